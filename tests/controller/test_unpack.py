"""Opening containers: every format by its magic bytes, nested, and every cap a refusal."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
import zlib

import numpy as np
import pytest

from rsilab.controller.unpack import Caps, Opener, Uncheckable, sniff

PAYLOAD = b"0,1,2,3\n4,5,6,7\n" * 200


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _leaves(data: bytes, caps: Caps | None = None) -> dict[str, bytes]:
    return {n.where: n.data for n in Opener(caps).nodes("f", data) if not n.container}


@pytest.mark.parametrize(
    ("pack", "kind"),
    [
        (gzip.compress, "gzip"),
        (bz2.compress, "bz2"),
        (lzma.compress, "xz"),
        (lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE), "xz"),
        (zlib.compress, "zlib"),
    ],
)
def test_each_stream_format_is_told_by_its_bytes_and_opened(pack: object, kind: str) -> None:
    data = pack(PAYLOAD)  # type: ignore[operator]
    assert sniff(data) == kind
    assert _leaves(data) == {"f!": PAYLOAD}


def test_archives_nested_two_deep_are_opened_whatever_their_names() -> None:
    npz = _npz(x=np.arange(12).reshape(3, 4))
    inner = _zip({"rows.csv": PAYLOAD, "a.npz": npz})
    outer = gzip.compress(_tar({"deep/inner.bin": bz2.compress(inner)}))
    leaves = _leaves(outer)
    assert leaves["f!!deep/inner.bin!!rows.csv"] == PAYLOAD
    x = np.load(io.BytesIO(leaves["f!!deep/inner.bin!!a.npz!x.npy"]))
    assert x.tolist() == np.arange(12).reshape(3, 4).tolist()
    nodes = list(Opener().nodes("f", outer))
    assert [n.depth for n in nodes if n.container] == [0, 1, 2, 3, 4]


def test_concatenated_gzip_members_are_all_read() -> None:
    assert _leaves(gzip.compress(b"one\n") + gzip.compress(b"two\n")) == {"f!": b"one\ntwo\n"}


def test_plain_files_and_lookalikes_are_leaves() -> None:
    for data in (b"x^ is not zlib", b"PK but not a zip", b"\x5d\x00\x00 no lzma", b""):
        assert [(n.where, n.container) for n in Opener().nodes("f", data)] == [("f", False)]


def test_a_damaged_stream_gives_what_came_out_before_the_damage() -> None:
    text = bytes(range(256)) * 400
    whole = gzip.compress(text)
    out = _leaves(whole[: len(whole) // 2])["f!"]
    assert 0 < len(out) < len(text) and text.startswith(out)


def test_passing_the_byte_cap_is_uncheckable() -> None:
    with pytest.raises(Uncheckable, match="cap of 1000 bytes"):
        _leaves(gzip.compress(PAYLOAD), Caps(total_bytes=1000))


def test_passing_the_ratio_cap_is_uncheckable_but_small_members_are_not_held_to_it() -> None:
    bomb = gzip.compress(b"\0" * 200_000)
    with pytest.raises(Uncheckable, match="more than 10 times its size"):
        _leaves(bomb, Caps(ratio=10, ratio_floor=50_000))
    assert len(_leaves(bomb, Caps(ratio=10, ratio_floor=1 << 20))["f!"]) == 200_000


def test_nesting_deeper_than_the_cap_is_uncheckable() -> None:
    nested = PAYLOAD
    for _ in range(4):
        nested = gzip.compress(nested)
    assert _leaves(nested, Caps(depth=4))["f!!!!"] == PAYLOAD
    with pytest.raises(Uncheckable, match="nested deeper than 3"):
        _leaves(nested, Caps(depth=3))


def test_too_many_members_is_uncheckable() -> None:
    many = _tar({f"m{i}": b"x" for i in range(30)})
    assert len(_leaves(many, Caps(members=30))) == 30
    with pytest.raises(Uncheckable, match="more than 29 archive members"):
        _leaves(many, Caps(members=29))


def test_an_encrypted_zip_member_is_uncheckable() -> None:
    data = bytearray(_zip({"secret.csv": PAYLOAD}))
    for magic in (b"PK\x03\x04", b"PK\x01\x02"):  # set the encryption bit in both headers
        at = data.index(magic)
        flag = at + (6 if magic == b"PK\x03\x04" else 8)
        data[flag] |= 0x1
    with pytest.raises(Uncheckable, match="encrypted zip member"):
        _leaves(bytes(data))


@pytest.mark.parametrize(
    "magic", [b"\x28\xb5\x2f\xfd", b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07", b"\x04\x22\x4d\x18"]
)
def test_containers_the_guard_cannot_open_are_uncheckable(magic: bytes) -> None:
    with pytest.raises(Uncheckable, match="cannot open"):
        _leaves(magic + b"\x00" * 64)


# --- base64 and hex text: a layer like any other ------------------------------------------


def test_base64_base32_and_hex_text_is_read_as_it_is_and_decoded() -> None:
    import base64

    packed = gzip.compress(bytes(range(256)) * 2)  # 512 bytes that hardly compress
    for text, name in (
        (base64.b64encode(packed), "base64"),
        (base64.encodebytes(packed), "base64"),  # wrapped at 76 characters
        (base64.urlsafe_b64encode(packed).rstrip(b"="), "base64"),
        (PAYLOAD.hex().encode(), "hex"),
        (PAYLOAD.hex().upper().encode() + b"\n", "hex"),
        (base64.b32encode(packed), "base32"),
        (base64.b32encode(packed).rstrip(b"="), "base32"),
    ):
        nodes = list(Opener().nodes("f.txt", text))
        assert nodes[0].data == text and not nodes[0].container
        assert nodes[1].where == f"f.txt!{name}" and nodes[1].depth == 1
        assert nodes[-1].data in (PAYLOAD, bytes(range(256)) * 2), name


def test_short_or_ordinary_text_is_not_decoded() -> None:
    for text in (b"ab" * 30, b"0a1b" * 15, b"hello world, this is prose. " * 20, PAYLOAD):
        assert [n.data for n in Opener().nodes("f.txt", text)] == [text]


def test_decoded_text_counts_against_the_byte_and_depth_caps() -> None:
    import base64

    text = base64.b64encode(b"x" * 3000)
    with pytest.raises(Uncheckable, match="cap of 4000 bytes"):
        list(Opener(Caps(total_bytes=4000)).nodes("f.txt", text))
    nested = PAYLOAD
    for _ in range(4):
        nested = nested.hex().encode()
    with pytest.raises(Uncheckable, match="nested deeper than 3"):
        list(Opener(Caps(depth=3)).nodes("f.txt", nested))
