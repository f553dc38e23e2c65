"""Reading bare numbers: which readings of a binary are tried, and which are dropped."""

from __future__ import annotations

import numpy as np

from rsilab.controller.raw import interpretations, is_binary, may_hold_rows

ROWS = (np.arange(10 * 9) % 17).reshape(10, 9).astype(float)


def _readings(data: bytes, widths: set[int]) -> dict[str, list[list[float]]]:
    return {label: table.tolist() for label, table in interpretations(data, widths)}


def test_the_writer_s_type_width_and_order_is_among_the_readings() -> None:
    for dtype in ("<f4", ">f8", "<i2", ">u2", "u1", "i1", "<i8"):
        readings = _readings(ROWS.astype(dtype).tobytes(), {9, 10})
        name = np.dtype(dtype).str
        assert readings[f"{name}x9"] == ROWS.tolist(), dtype
        assert readings[f"{name}x9T"] == ROWS.reshape(9, 10).T.tolist(), dtype
    feature_major = _readings(ROWS.T.astype("<f4").tobytes(), {9})
    assert feature_major["<f4x9T"] == ROWS.tolist()


def test_readings_that_cannot_be_numbers_of_their_type_are_dropped() -> None:
    readings = _readings(ROWS.astype("<f4").tobytes(), {9})
    assert ">f4x9" not in readings  # byte-swapped float32: denormal (1.0 reads as 4.6e-41)
    assert "<f8x9" not in readings  # 45 float64 values: fewer than 8 rows of 9
    assert "<f4x9" in readings and "|u1x9" in readings  # bytes fit any integer type
    wide = _readings((ROWS * 1e6 + 0.37).astype("<f8").tobytes(), {9})
    assert set(wide) >= {"<f8x9", "<i4x9"} and "<f4x9" not in wide  # float64 halves as float32
    assert _readings(b"\0" * 9 * 7, {9}) == {}  # fewer than 8 rows in any type


def test_only_binaries_whose_size_fits_a_width_may_hold_rows() -> None:
    assert may_hold_rows(65 * 8, {65}) and may_hold_rows(65 * 4 * 100, {65})
    assert not may_hold_rows(65 * 8 + 1, {64, 65}) and not may_hold_rows(65 * 7, {65})


def test_text_is_not_binary_and_bytes_are() -> None:
    assert not is_binary("0,1,2\nprix: 3 €\n".encode())
    assert is_binary(b"\x00\x01\x02") and is_binary(b"\xff\xfe\x00")
    assert is_binary(bytes(range(1, 17)) * 10)  # bare uint8 pixels: control characters
