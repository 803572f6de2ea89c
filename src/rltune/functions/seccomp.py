"""A seccomp filter for sandboxed functions: the syscalls that help escape a sandbox fail (EPERM).

bubblewrap loads a filter given as a classic-BPF program on a file descriptor (``bwrap
--seccomp FD``). This module writes that program itself. Why not a dependency: the PyPI
``seccomp`` bindings are an sdist that compiles against libseccomp's headers, and ``pyseccomp``
loads ``libseccomp.so.2`` at run time — both add a system library to every install for a
program of ~40 instructions whose format the kernel fixes (``linux/filter.h``,
``linux/seccomp.h``).

The program, run by the kernel on every syscall of the sandboxed process and its children::

    load seccomp_data.arch
    arch != this machine's   -> return ERRNO(EPERM)   (e.g. i386 calls through int 0x80)
    load seccomp_data.nr
    nr >= 0x40000000 (x86-64) -> return ERRNO(EPERM)  (the x32 ABI)
    nr == <each denied call> -> return ERRNO(EPERM)
    return ALLOW

Denied: mounting and unmounting (``mount``, ``umount2``, the new mount API, ``pivot_root``,
``chroot``), namespaces (``unshare``, ``setns``), file handles (``name_to_handle_at``,
``open_by_handle_at``: the latter opens any file of a mounted file system by handle), the
kernel keyring, ``ptrace`` and reading other processes' memory, BPF and perf events, module
and kexec loading, ``userfaultfd``, swap, reboot, ``acct``, ``syslog``, ``quotactl``.

Example:
    >>> prog = program("x86_64")
    >>> len(prog) % 8, len(prog) // 8 > len(DENIED)
    (0, True)
"""

from __future__ import annotations

import os
import platform
import struct

# linux/filter.h: instruction classes and fields; linux/seccomp.h: return values.
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word at offset k
_BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K: jump jt if A == k, else jf
_BPF_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_BPF_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K: return k
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_OFF_NR, _OFF_ARCH = 0, 4
_X32_SYSCALL_BIT = 0x40000000

#: linux/audit.h: AUDIT_ARCH_* of the architectures we know the syscall numbers of.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: Denied syscalls and their numbers (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h).
DENIED: dict[str, tuple[int, int]] = {
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "unshare": (272, 97), "setns": (308, 268),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89),
    "syslog": (103, 116), "quotactl": (179, 60), "lookup_dcookie": (212, 18),
}


def machine() -> str:
    """This machine's architecture as the keys of ``AUDIT_ARCH`` name it (or as it is)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def supported(arch: str | None = None) -> bool:
    return (arch or machine()) in AUDIT_ARCH


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter, native byte order


def program(arch: str | None = None) -> bytes:
    """The BPF program (struct sock_filter[]) for ``arch`` (default: this machine)."""
    arch = arch or machine()
    if arch not in AUDIT_ARCH:
        raise ValueError(f"no seccomp syscall table for {arch!r}")
    column = 0 if arch == "x86_64" else 1
    numbers = sorted({nrs[column] for nrs in DENIED.values()})
    deny = _insn(_BPF_RET_K, SECCOMP_RET_ERRNO | EPERM)
    body = [_insn(_BPF_LD_W_ABS, _OFF_ARCH),
            _insn(_BPF_JEQ_K, AUDIT_ARCH[arch], jt=1, jf=0),
            deny,
            _insn(_BPF_LD_W_ABS, _OFF_NR)]
    checks = []
    if arch == "x86_64":
        checks.append((_BPF_JGE_K, _X32_SYSCALL_BIT))
    checks += [(_BPF_JEQ_K, nr) for nr in numbers]
    for i, (code, k) in enumerate(checks):
        # jump over the remaining checks and the ALLOW to the final deny
        body.append(_insn(code, k, jt=len(checks) - i, jf=0))
    body += [_insn(_BPF_RET_K, SECCOMP_RET_ALLOW), deny]
    return b"".join(body)


def program_fd() -> int:
    """A fresh, inheritable descriptor positioned at the start of ``program()`` (bwrap reads
    it to its end, so each sandbox needs its own). The caller passes and closes it."""
    data = program()
    fd = os.memfd_create("rltune-seccomp", 0) if hasattr(os, "memfd_create") else None
    if fd is None:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="rltune-seccomp-")
        os.unlink(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd
