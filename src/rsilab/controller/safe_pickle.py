"""Reading a pickle's data without running it.

:func:`load` runs the standard unpickler's opcode machine with :meth:`find_class` replaced:
no global the pickle names is ever imported or called. Lists, dicts, tuples, sets, numbers,
strings and bytes come out as themselves; numpy arrays, dtypes and scalars are rebuilt by
this module from their raw bytes (``np.frombuffer``, never numpy's own reducers); any other
global becomes an :class:`Opaque` that only records the arguments and state the pickle gave
it, so data nested in objects of unknown classes (a DataFrame's blocks, a dataclass's fields)
is still reached. Persistent ids become opaque too. Nothing a pickle holds can run code here.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, Literal

import numpy as np

__all__ = ["Opaque", "load", "resolve"]


class Opaque:
    """An object of a class the pickle named; holds what the pickle built it from."""

    name = "object"

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        made = super().__new__(cls)
        made.parts = [*args, *kwargs.values()]
        return made

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    parts: list[Any]

    def __setstate__(self, state: Any) -> None:
        self.parts.append(state)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.parts.append([key, value])

    def append(self, value: Any) -> None:
        self.parts.append(value)

    def extend(self, values: Any) -> None:
        self.parts.extend(values)

    def add(self, value: Any) -> None:
        self.parts.append(value)


class _Dtype(Opaque):
    name = "numpy.dtype"

    def resolve(self) -> np.dtype[Any] | None:
        """The dtype, for plain (non-structured, non-object) kinds; None otherwise."""
        code = self.parts[0] if self.parts else None
        order = "|"
        for part in self.parts[1:]:
            if isinstance(part, tuple) and len(part) > 1 and isinstance(part[1], str):
                order = part[1]
                if len(part) > 3 and part[3] is not None:
                    return None  # a structured dtype: its fields are not rebuilt
        if not isinstance(code, str) or code.startswith("O") or not code.isalnum():
            return None
        try:
            return np.dtype((order if order in "<>" else "") + code)
        except TypeError:
            return None


class _Array(Opaque):
    name = "numpy.ndarray"

    def build(self) -> Any:
        """The array from its pickled state ``(version, shape, dtype, fortran, data)``."""
        state = self.parts[-1] if self.parts else None
        if not (isinstance(state, tuple) and len(state) == 5):
            return self
        _, shape, dtype, fortran, data = state
        if isinstance(data, list):  # an object array: its items, as a list
            return data
        return _from_buffer(data, dtype, shape, "F" if fortran else "C") if shape else self


def _from_buffer(data: Any, dtype: Any, shape: Any, order: Literal["C", "F"]) -> Any:
    resolved = dtype.resolve() if isinstance(dtype, _Dtype) else None
    if resolved is None or not isinstance(data, bytes | bytearray):
        return data
    try:
        flat = np.frombuffer(bytes(data), dtype=resolved)
        return flat.reshape([int(s) for s in shape], order=order).copy()
    except (ValueError, TypeError):
        return data


def _reconstruct(subtype: Any = None, shape: Any = None, dtype: Any = None) -> _Array:
    return _Array()


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any = "C") -> Any:
    raw = bytes(buffer) if isinstance(buffer, bytes | bytearray | memoryview) else buffer
    return _from_buffer(raw, dtype, shape, "F" if order == "F" else "C")


def _scalar(dtype: Any, data: Any = None) -> Any:
    resolved = dtype.resolve() if isinstance(dtype, _Dtype) else None
    if resolved is None or not isinstance(data, bytes) or len(data) != resolved.itemsize:
        return data
    return np.frombuffer(data, dtype=resolved)[0].item()


def _encode(text: Any = "", encoding: Any = "latin1") -> Any:
    if isinstance(text, str) and encoding in ("latin1", "latin-1"):
        return text.encode("latin1")
    return text


def _dict(*args: Any) -> dict[Any, Any]:
    return {}


def _list(*args: Any) -> list[Any]:
    return list(args[0]) if args and isinstance(args[0], list | tuple) else []


_NUMPY = ("numpy.core.multiarray", "numpy._core.multiarray")
_SAFE: dict[tuple[str, str], Any] = {
    **{(m, "_reconstruct"): _reconstruct for m in _NUMPY},
    **{(m, "scalar"): _scalar for m in _NUMPY},
    **{(m, "_frombuffer"): _frombuffer for m in ("numpy.core.numeric", "numpy._core.numeric")},
    ("numpy", "dtype"): _Dtype,
    ("numpy", "ndarray"): _Array,
    ("_codecs", "encode"): _encode,
    ("collections", "OrderedDict"): _dict,
    ("collections", "defaultdict"): _dict,
    ("collections", "deque"): _list,
    **{(b, "set"): _list for b in ("builtins", "__builtin__")},
    **{(b, "frozenset"): _list for b in ("builtins", "__builtin__")},
    **{(b, "list"): _list for b in ("builtins", "__builtin__")},
    **{(b, "dict"): _dict for b in ("builtins", "__builtin__")},
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        known = _SAFE.get((module, name))
        if known is not None:
            return known
        return type(name, (Opaque,), {"name": f"{module}.{name}"[:200]})

    def persistent_load(self, pid: Any) -> Any:
        return Opaque("persistent", pid)


def load(data: bytes) -> Any:
    """The data a pickle holds, built without running any of it (see the module docstring).
    Arrays may come out as placeholders: pass each value met through :func:`resolve`.

    Raises:
        ValueError: ``data`` is not a pickle this reader can walk (truncated, damaged, or
            using out-of-band buffers).
    """
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except Exception as exc:  # any damage the opcode machine reports
        raise ValueError(f"not a readable pickle: {type(exc).__name__}") from None


def resolve(value: Any) -> Any:
    """``value``, or the array it stands for when it is a rebuilt-array placeholder."""
    return value.build() if isinstance(value, _Array) else value
