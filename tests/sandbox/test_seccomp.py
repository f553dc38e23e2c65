"""The seccomp filter, run by a small classic-BPF interpreter of its own on system calls
described with literal numbers (the kernel's, not the module's), then for real in a job."""

from __future__ import annotations

import struct

import pytest

from rsilab.sandbox._seccomp import no_userns_filter

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | 1, 0x00050000 | 38
NEWUSER, NEWNS, SIGCHLD, CLONE_VM = 0x10000000, 0x00020000, 17, 0x100
X86_64, I386, AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7


def run_bpf(program: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """What the filter returns for one system call (``struct seccomp_data``, little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


X86 = no_userns_filter("x86_64")
ARM = no_userns_filter("aarch64")


@pytest.mark.parametrize(
    ("nr", "arg0", "expected"),
    [
        (272, NEWUSER, EPERM),  # unshare(CLONE_NEWUSER)
        (272, NEWUSER | NEWNS, EPERM),
        (272, NEWNS, ALLOW),  # unshare of another namespace: the kernel's own checks decide
        (56, NEWUSER | SIGCHLD, EPERM),  # clone(CLONE_NEWUSER)
        (56, SIGCHLD, ALLOW),  # fork
        (56, CLONE_VM | SIGCHLD, ALLOW),  # a thread or vfork
        (435, 0, ENOSYS),  # clone3, whatever its arguments
        (0x40000000 + 272, NEWUSER, ENOSYS),  # x32 unshare
        (0x40000000 + 0, 0, ENOSYS),  # any x32 call
        (0, 0, ALLOW),  # read
        (117, 0, ALLOW),  # setresuid (setpriv drops to the sandbox uid after the filter)
        (157, 0, ALLOW),  # prctl
        (308, 0, ALLOW),  # setns (needs rights no job has)
    ],
)
def test_x86_64_decisions(nr: int, arg0: int, expected: int) -> None:
    assert run_bpf(X86, nr, X86_64, arg0) == expected


def test_another_architecture_is_killed() -> None:
    """An i386 system call (``int 0x80``) carries other numbers: 120 is its clone."""
    assert run_bpf(X86, 120, I386, NEWUSER) == KILL
    assert run_bpf(X86, 0, I386) == KILL
    assert run_bpf(ARM, 97, X86_64, NEWUSER) == KILL


@pytest.mark.parametrize(
    ("nr", "arg0", "expected"),
    [
        (97, NEWUSER, EPERM),
        (220, NEWUSER | SIGCHLD, EPERM),
        (220, SIGCHLD, ALLOW),
        (435, 0, ENOSYS),
    ],
)
def test_aarch64_decisions(nr: int, arg0: int, expected: int) -> None:
    assert run_bpf(ARM, nr, AARCH64, arg0) == expected


def test_unknown_hosts_get_no_filter() -> None:
    with pytest.raises(NotImplementedError):
        no_userns_filter("riscv64")
