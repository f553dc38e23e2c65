"""Reading what a file holds: values and numeric tables in every form training data takes."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest

from rsilab.controller.readers import plain_json, read
from rsilab.controller.unpack import Uncheckable

ROWS = np.arange(60, dtype=float).reshape(6, 10) % 7


def _tables(where: str, data: bytes) -> list[list[list[float]]]:
    return [t.tolist() for t in read(where, data).tables]


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize("delimiter", [",", "\t", ";", " "])
def test_delimited_text_gives_its_numeric_columns(delimiter: str) -> None:
    header = delimiter.join([*(f"x{i}" for i in range(10)), "name"])
    lines = [delimiter.join([*(str(v) for v in row), f"row{i}"]) for i, row in enumerate(ROWS)]
    assert _tables("t.txt", "\n".join([header, *lines]).encode()) == [ROWS.tolist()]


def test_json_lists_of_rows_and_records_give_tables() -> None:
    as_lists = json.dumps(ROWS.tolist()).encode()
    assert ROWS.tolist() in _tables("a.json", as_lists)
    jsonl = "\n".join(json.dumps({"id": str(i), "input": r, "target": 1}) for i, r in
                      enumerate(ROWS.tolist())).encode()  # fmt: skip
    assert _tables("b.jsonl", jsonl) == [ROWS.tolist()]
    records = json.dumps([{f"f{j}": v for j, v in enumerate(r)} for r in ROWS.tolist()])
    assert _tables("c.json", records.encode()) == [ROWS.tolist()]
    columns = json.dumps({f"f{j}": ROWS[:, j].tolist() for j in range(10)})
    assert ROWS.tolist() in _tables("d.json", columns.encode())


def test_images_under_a_key_are_rows_and_a_stack_of_images_is_a_table() -> None:
    images = ROWS.reshape(6, 2, 5)
    per_record = "\n".join(json.dumps({"image": im.tolist()}) for im in images).encode()
    assert _tables("e.jsonl", per_record) == [ROWS.tolist()]
    assert _tables("f.npy", _npy(images)) == [ROWS.tolist()]


def test_a_two_dimensional_array_is_also_offered_feature_major() -> None:
    wide = np.arange(80, dtype=float).reshape(8, 10)
    assert _tables("g.npy", _npy(wide)) == [wide.tolist(), wide.T.tolist()]


def test_pickles_and_object_arrays_are_read_without_running_them() -> None:
    data = {"train": [np.asarray(r) for r in ROWS], "labels": list(range(6))}
    parsed = read("h.pkl", pickle.dumps(data))
    assert parsed.binary and ROWS.tolist() in [t.tolist() for t in parsed.tables]
    objects = np.empty(2, dtype=object)
    objects[0], objects[1] = ROWS.tolist(), "x"
    parsed = read("i.npy", _npy(objects))
    assert parsed.binary and ROWS.tolist() in [t.tolist() for t in parsed.tables]
    assert json.loads(plain_json(parsed.values))[0] == ROWS.tolist()


def test_walking_more_values_than_the_budget_is_uncheckable() -> None:
    with pytest.raises(Uncheckable, match="more values than the guard walks"):
        read("j.json", json.dumps(ROWS.tolist()).encode(), max_values=10)


def _safetensors(**arrays: np.ndarray) -> bytes:
    """The safetensors layout written by hand: 8-byte little-endian header size, JSON, data."""
    header, body = {}, b""
    for name, array in arrays.items():
        data = array.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [len(body), len(body) + len(data)]}  # fmt: skip
        body += data
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + body


def test_forms_are_told_by_their_bytes_whatever_the_name() -> None:
    wide = np.arange(80, dtype=float).reshape(8, 10)
    parsed = read("weights.dat", _safetensors(x=wide))
    assert parsed.binary and [t.tolist() for t in parsed.tables] == [wide.tolist(), wide.T.tolist()]
    for protocol in (0, 1):
        parsed = read("rows.txt", pickle.dumps(ROWS.tolist(), protocol=protocol))
        assert parsed.binary and _tables("x", pickle.dumps(ROWS.tolist(), protocol)) == [
            ROWS.tolist()
        ]
    # text that ends with a full stop is text, not a pickle
    assert not read("notes.pkl", b"(see the notes below).").binary


def test_a_delimited_table_is_also_offered_feature_major() -> None:
    wide = np.arange(80, dtype=float).reshape(8, 10)
    csv = "\n".join(",".join(str(v) for v in row) for row in wide.T).encode()
    assert _tables("t.csv", csv) == [wide.T.tolist(), wide.tolist()]
