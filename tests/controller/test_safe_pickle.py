"""Pickles read without running them: data comes out, no code runs."""

from __future__ import annotations

import collections
import dataclasses
import pickle
from typing import Any

import numpy as np
import pytest

from rsilab.controller import safe_pickle

RAN: list[str] = []


def _record(what: str) -> None:
    RAN.append(what)


class Payload:
    """Unpickling an instance calls _record: what a malicious pickle does with os.system."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_record, ("code ran",))


@dataclasses.dataclass
class Row:
    pixels: list[int]
    label: int


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_and_arrays_come_out_as_themselves(protocol: int) -> None:
    data = {
        "rows": [[0, 1, 2], [3, 4, 5]],
        "array": np.arange(6, dtype=np.int16).reshape(2, 3),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "nested": collections.OrderedDict(x=(1.5, "text", np.float32(2.5))),
        "texts": np.array(["ab", "c"]),
    }
    value = safe_pickle.load(pickle.dumps(data, protocol=protocol))
    assert value["rows"] == [[0, 1, 2], [3, 4, 5]]
    array = safe_pickle.resolve(value["array"])
    assert isinstance(array, np.ndarray) and array.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert safe_pickle.resolve(value["fortran"]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert value["nested"]["x"] == (1.5, "text", 2.5)
    assert safe_pickle.resolve(value["texts"]).tolist() == ["ab", "c"]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_no_global_is_called_and_objects_keep_their_data(protocol: int) -> None:
    RAN.clear()
    value = safe_pickle.load(pickle.dumps([Payload(), Row([7, 8], 3)], protocol=protocol))
    assert RAN == []
    payload, row = value
    assert isinstance(payload, safe_pickle.Opaque) and payload.parts == ["code ran"]
    assert isinstance(row, safe_pickle.Opaque)
    assert {"pixels": [7, 8], "label": 3} in [p for p in row.parts if isinstance(p, dict)]


def test_damaged_pickles_raise_value_error() -> None:
    whole = pickle.dumps({"a": list(range(100))})
    with pytest.raises(ValueError, match="not a readable pickle"):
        safe_pickle.load(whole[: len(whole) // 2])
    with pytest.raises(ValueError):
        safe_pickle.load(b"not a pickle at all")
