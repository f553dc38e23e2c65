"""A seccomp filter that denies new user namespaces, assembled as classic BPF.

bubblewrap installs it (``--seccomp FD``) just before it executes the job's first program, so
it holds for every process of the job and cannot be removed. Denied:

- ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` in their flags (``EPERM``): a job cannot
  make a user namespace, so it cannot become uid 0 of one and use the kernel surface that
  opens (mounting, nested namespaces, ...);
- ``clone3`` always (``ENOSYS``): its flags live in memory a filter cannot read, and libc
  falls back to ``clone`` on ``ENOSYS``;
- on x86-64, every x32 system call (``ENOSYS``), since those reach the same kernel code under
  other numbers.

A system call of another architecture than the host's (e.g. ``int 0x80`` from a 64-bit
process) kills the process: the numbers above would not apply to it.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

CLONE_NEWUSER = 0x10000000

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # args[0]'s low 32 bits (little-endian hosts only)
_X32_BIT = 0x40000000


@dataclass(frozen=True)
class Arch:
    """One architecture's audit tag and system call numbers."""

    audit: int
    unshare: int
    clone: int
    clone3: int
    x32: bool = False


ARCHES = {
    "x86_64": Arch(audit=0xC000003E, unshare=272, clone=56, clone3=435, x32=True),
    "aarch64": Arch(audit=0xC00000B7, unshare=97, clone=220, clone3=435),
}
"""Hosts the filter is built for; elsewhere :func:`no_userns_filter` raises."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(arch: Arch) -> list[bytes]:
    """The filter's instructions, one 8-byte ``struct sock_filter`` each."""
    deny_ns = RET_ERRNO | errno.EPERM
    no_sys = RET_ERRNO | errno.ENOSYS
    ops = [
        _op(_LD_ABS_W, _ARCH),
        _op(_JEQ, arch.audit, jt=1),
        _op(_RET, RET_KILL_PROCESS),
        _op(_LD_ABS_W, _NR),
    ]
    if arch.x32:
        ops += [_op(_JGE, _X32_BIT, jf=1), _op(_RET, no_sys)]
    ops += [
        _op(_JEQ, arch.clone3, jf=1),
        _op(_RET, no_sys),
        _op(_JEQ, arch.unshare, jt=1),
        _op(_JEQ, arch.clone, jf=3),
        _op(_LD_ABS_W, _ARG0_LOW),
        _op(_JSET, CLONE_NEWUSER, jf=1),
        _op(_RET, deny_ns),
        _op(_RET, RET_ALLOW),
    ]
    return ops


def no_userns_filter(machine: str | None = None) -> bytes:
    """The filter as bubblewrap reads it from ``--seccomp FD``: the raw instructions.

    Raises:
        NotImplementedError: the host's architecture is not in :data:`ARCHES`.
    """
    name = machine or platform.machine()
    arch = ARCHES.get(name)
    if arch is None or struct.pack("=H", 1) != b"\x01\x00":
        raise NotImplementedError(f"no seccomp filter for {name} (big-endian or unknown)")
    return b"".join(program(arch))
