"""Opening containers and compressed forms, within caps, for the content guard.

:class:`Opener` takes a file's bytes and yields every *node* inside it: the file itself, what
each compressed layer (gzip, bzip2, xz/lzma, zlib) holds once decompressed, and each member
of an archive (zip, so npz too; tar), nested to any depth up to the cap. Formats are told by
their magic bytes, never by the file name, so a renamed archive is opened all the same.

The caps (:class:`Caps`) bound the work an archive can cause: the bytes produced by opening
(over everything one :class:`Opener` opens), the compression ratio of a large member, the
nesting depth and the number of members. Text that is base64, base32 or hexadecimal of
meaningful length (:func:`decode_text`), and text in UTF-16 or UTF-32
(:func:`rsilab.controller.charset.unicode_text`, re-encoded as the UTF-8 every reader reads),
are layers too: the file is read as it is *and* decoded, and what the decoding gives is opened
and read again, charged to the same caps.
Going past one raises :class:`Uncheckable`, as does a container rsilab cannot open (an
encrypted zip member, zstd, 7z, rar, lz4): what the guard cannot read it cannot check, so the
caller refuses it, never skips it.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import io
import lzma
import re
import string
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from rsilab.controller.charset import unicode_text

__all__ = ["Caps", "Node", "Opener", "Uncheckable", "decode_text", "sniff"]

_READ = 1 << 20
_UNSUPPORTED = {
    b"\x28\xb5\x2f\xfd": "zstd",
    b"7z\xbc\xaf\x27\x1c": "7z",
    b"Rar!\x1a\x07": "rar",
    b"\x04\x22\x4d\x18": "lz4",
}
MIN_ENCODED = 128
"""Base64 or hex text shorter than this (non-space characters) is not decoded: a hash or a
key, not data."""
_HEX = frozenset(string.hexdigits.encode())
_BASE32 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567=")
_BASE64 = re.compile(rb"[A-Za-z0-9+/]+={0,2}|[A-Za-z0-9_-]+={0,2}")


@dataclass(frozen=True)
class Caps:
    """Bounds on what opening one candidate's data may cost."""

    total_bytes: int = 512 << 20
    """Bytes read and produced by opening, over everything one :class:`Opener` opens."""
    ratio: float = 200.0
    """Largest decompressed / compressed size of a member that produces over ``ratio_floor``."""
    ratio_floor: int = 8 << 20
    """Members producing fewer bytes than this are not held to ``ratio``."""
    depth: int = 6
    """Containers nested deeper than this are refused."""
    members: int = 20_000
    """Archive members, over everything one :class:`Opener` opens."""
    raw_bytes: int = 16 << 20
    """Largest file of bare numbers read as rows (:mod:`rsilab.controller.raw`): a larger
    binary in no known form whose size fits rows of a private item's width is refused."""


class Uncheckable(Exception):
    """Data the guard cannot read: a cap exceeded, or a container it cannot open."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where = where
        self.why = why


@dataclass(frozen=True)
class Node:
    """One thing found in a file: the file itself, a decompressed layer or an archive member."""

    where: str
    """The file's path, then ``!member`` for each layer opened (``!`` alone for a stream)."""
    data: bytes
    depth: int
    """Layers opened to reach it (0: the file itself)."""
    container: bool
    """Whether it was opened further (its content is in the nodes under it)."""


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


class Opener:
    """Opens files within one set of caps (not thread-safe: one per candidate)."""

    def __init__(self, caps: Caps | None = None) -> None:
        self.caps = caps or Caps()
        self.used = 0
        self.members = 0

    def count(self, where: str, size: int) -> None:
        """Charge ``size`` bytes read at ``where`` to the byte cap.

        Raises:
            Uncheckable: the cap is passed.
        """
        self.used += size
        if self.used > self.caps.total_bytes:
            raise Uncheckable(
                where, f"opening the data would pass the cap of {self.caps.total_bytes} bytes"
            )

    def nodes(self, where: str, data: bytes, depth: int = 0) -> Iterator[Node]:
        """``data`` and everything inside it, outermost first.

        Raises:
            Uncheckable: a cap is passed, or a container cannot be opened.
        """
        kind = sniff(data)
        if kind is None:
            yield Node(where, data, depth, False)
            # read as it is above, and decoded here: the text of another Unicode encoding
            # as UTF-8 (what every reader reads), then base64 or hex text as what it holds
            for decoded in (unicode_text(data), decode_text(data)):
                if decoded is None:
                    continue
                name, inner = decoded
                if depth >= self.caps.depth:
                    raise Uncheckable(where, f"containers nested deeper than {self.caps.depth}")
                self.count(where, len(inner))
                yield from self.nodes(f"{where}!{name}", inner, depth + 1)
            return
        if kind in _UNSUPPORTED.values():
            raise Uncheckable(where, f"a {kind} container, which the guard cannot open")
        if depth >= self.caps.depth:
            raise Uncheckable(where, f"containers nested deeper than {self.caps.depth}")
        yield Node(where, data, depth, True)
        if kind == "zip":
            for name, member in self._zip(where, data):
                yield from self.nodes(f"{where}!{name}", member, depth + 1)
        elif kind == "tar":
            for name, member in self._tar(where, data):
                yield from self.nodes(f"{where}!{name}", member, depth + 1)
        else:
            yield from self.nodes(f"{where}!", self._stream(where, kind, data), depth + 1)

    def _stream(self, where: str, kind: str, data: bytes) -> bytes:
        """What a compressed stream holds; a stream that will not decompress yields what came
        out before the damage (a job's own decompressor fails on it alike)."""
        makers: dict[str, Callable[[], _Decompressor]] = {
            "gzip": lambda: zlib.decompressobj(wbits=31),
            "zlib": zlib.decompressobj,
            "bz2": bz2.BZ2Decompressor,
            "xz": lambda: lzma.LZMADecompressor(format=lzma.FORMAT_AUTO),
        }
        out = bytearray()
        rest = data
        while rest:
            try:
                rest = self._inflate(where, makers[kind](), rest, len(data), out)
            except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
                break
            if kind == "zlib" or not rest.strip(b"\0"):
                break  # gzip, bz2 and xz may hold several streams; zlib holds one
        return bytes(out)

    def _inflate(
        self, where: str, engine: _Decompressor, data: bytes, packed: int, out: bytearray
    ) -> bytes:
        """Decompress one stream of ``data`` into ``out`` within the caps; what follows it."""
        tail = hasattr(engine, "unconsumed_tail")  # zlib keeps unread input; bz2, lzma buffer it
        chunk = engine.decompress(data, _READ)
        while True:
            self._grow(where, out, chunk, packed)
            if engine.eof:
                return engine.unused_data
            if tail:
                pending: bytes = getattr(engine, "unconsumed_tail", b"")
                if not pending:
                    self._grow(where, out, getattr(engine, "flush")(), packed)  # noqa: B009
                    return b""  # the input ended before the stream did
                chunk = engine.decompress(pending, _READ)
            elif getattr(engine, "needs_input", True):
                return b""
            else:
                chunk = engine.decompress(b"", _READ)

    def _grow(self, where: str, out: bytearray, chunk: bytes, packed: int) -> None:
        out += chunk
        self.count(where, len(chunk))
        if len(out) > self.caps.ratio_floor and len(out) > self.caps.ratio * max(packed, 1):
            raise Uncheckable(where, f"decompresses more than {self.caps.ratio:g} times its size")

    def _member(self, where: str) -> None:
        self.members += 1
        if self.members > self.caps.members:
            raise Uncheckable(where, f"more than {self.caps.members} archive members")

    def _zip(self, where: str, data: bytes) -> Iterator[tuple[str, bytes]]:
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            infos = archive.infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise Uncheckable(where, f"a damaged zip archive ({exc})") from None
        for info in infos:
            if info.is_dir():
                continue
            self._member(where)
            name = f"{where}!{info.filename}"
            if info.flag_bits & 0x1:
                raise Uncheckable(name, "an encrypted zip member")
            out = bytearray()
            try:
                with archive.open(info) as stream:
                    while chunk := stream.read(_READ):
                        self._grow(name, out, chunk, info.compress_size)
            except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as exc:
                raise Uncheckable(name, f"a zip member that cannot be read ({exc})") from None
            yield info.filename, bytes(out)

    def _tar(self, where: str, data: bytes) -> Iterator[tuple[str, bytes]]:
        try:
            archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:")  # noqa: SIM115
            members = archive.getmembers()
        except (tarfile.TarError, OSError, ValueError) as exc:
            raise Uncheckable(where, f"a damaged tar archive ({exc})") from None
        with archive:
            yield from self._tar_members(where, archive, members)

    def _tar_members(
        self, where: str, archive: tarfile.TarFile, members: list[tarfile.TarInfo]
    ) -> Iterator[tuple[str, bytes]]:
        for member in members:
            if not (member.isfile() or member.islnk()):
                continue
            self._member(where)
            name = f"{where}!{member.name}"
            try:
                stream = archive.extractfile(member)
                content = stream.read() if stream is not None else b""
            except (tarfile.TarError, OSError, KeyError) as exc:
                raise Uncheckable(name, f"a tar member that cannot be read ({exc})") from None
            self.count(name, len(content))
            yield member.name, content


def sniff(data: bytes) -> str | None:
    """The container or compression ``data`` starts with, or None (a plain file, npy too)."""
    head = data[:8]
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh") and data[3:4].isdigit():
        return "bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"\x5d\x00\x00") and _opens(lzma.LZMADecompressor, data):
        return "xz"  # the legacy .lzma form: a weak magic, so it must also decompress
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if data[257:262] == b"ustar":
        return "tar"
    zlib_header = len(head) >= 2 and head[0] == 0x78 and head[1] in (0x01, 0x5E, 0x9C, 0xDA)
    if zlib_header and _opens(zlib.decompressobj, data):
        return "zlib"
    for magic, kind in _UNSUPPORTED.items():
        if head.startswith(magic):
            return kind
    return None


def decode_text(data: bytes) -> tuple[str, bytes] | None:
    """``("hex" | "base32" | "base64", decoded)`` when ``data``, line breaks and spaces aside,
    is hexadecimal, base32 or base64 (standard or URL-safe, padded or not) of at least
    :data:`MIN_ENCODED` characters; else None. Text that fits several alphabets is read in the
    narrowest: only hex digits is hex, only A-Z and 2-7 is base32."""
    if len(data) < MIN_ENCODED or not _encoded_start(data[:4096]):
        return None
    compact = b"".join(data.split())
    if len(compact) < MIN_ENCODED:
        return None
    if len(compact) % 2 == 0 and all(c in _HEX for c in compact[:4096]):
        try:
            return "hex", binascii.unhexlify(compact)
        except (binascii.Error, ValueError):
            pass
    if all(c in _BASE32 for c in compact):
        # A-Z, 2-7 and "=" alone: base32 (base64 of real bytes mixes in lowercase letters)
        try:
            return "base32", base64.b32decode(
                compact.rstrip(b"=") + b"=" * (-len(compact.rstrip(b"=")) % 8)
            )
        except (binascii.Error, ValueError):
            pass
    if len(compact) % 4 == 1 or not _BASE64.fullmatch(compact):
        return None
    padded = compact.rstrip(b"=") + b"=" * (-len(compact.rstrip(b"=")) % 4)
    try:
        if b"-" in compact or b"_" in compact:
            return "base64", base64.urlsafe_b64decode(padded)
        return "base64", base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _encoded_start(head: bytes) -> bool:
    """Whether ``head`` holds only base64 (or hex) characters and white space: a cheap test
    before the whole file is joined."""
    return _BASE64.fullmatch(b"".join(head.split()).rstrip(b"=")) is not None


def _opens(make: Callable[[], _Decompressor], data: bytes) -> bool:
    """Whether ``data`` starts a stream ``make()`` decompresses (for weak magic bytes)."""
    try:
        make().decompress(data[:4096], 64)
    except (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError):
        return False
    return True
