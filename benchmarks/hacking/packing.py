"""Packing data the way a leak hides it: one folder entry per container form.

Shared by the leak variants, the false-alarm rows and the content guard's tests, so the
forms checked are the same everywhere."""

from __future__ import annotations

import io
import tarfile
import zipfile

import numpy as np


def npy_bytes(rows: np.ndarray) -> bytes:
    """``rows`` as a ``.npy`` file."""
    buffer = io.BytesIO()
    np.save(buffer, rows)
    return buffer.getvalue()


def npz_bytes(rows: np.ndarray) -> bytes:
    """``rows`` as a compressed ``.npz`` file (one array, ``rows``)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, rows=rows)
    return buffer.getvalue()


def tar_bytes(name: str, data: bytes) -> bytes:
    """A tar archive holding ``data`` as ``name``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes(name: str, data: bytes) -> bytes:
    """A deflated zip archive holding ``data`` as ``name``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()
