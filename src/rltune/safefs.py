"""The one way trusted code touches a folder that tenant code can write.

A sandboxed function writes into a few folders of the server's (``TENANT_WRITABLE``: the job's
``traces/``, a worker's private folder, a venv while it builds). The trainer, the gateway and
the pool run outside the sandbox, as the server's user (root on many servers): if they opened
``traces/<id>.jsonl`` by its path, a symbolic link put there by the function would make them
create, append to or read any file they can reach, and a FIFO would hang them.

:class:`TenantFolder` opens every file relative to a descriptor of the folder, with
``O_NOFOLLOW`` (a link in the last component is refused by the kernel; names are single
components, so there is no other) and ``O_NONBLOCK`` (a FIFO neither blocks nor is used), then
checks with ``fstat`` on the open descriptor that it is a regular file with one link (a hard
link to a file elsewhere is refused too) and no larger than the folder's bound. A file that
fails a check is an :class:`UnsafeFileError` naming it and what it is.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> f = TenantFolder(d, max_bytes=1024)
    >>> f.append("a.jsonl", b"x\\n"); f.take("a.jsonl"), f.take("a.jsonl")
    (b'x\\n', None)
    >>> os.symlink("/etc/passwd", os.path.join(d, "b"))
    >>> try:
    ...     f.read("b")
    ... except UnsafeFileError as exc:
    ...     print("refused:", exc.where, "symbolic link" in exc.message)
    refused: b True
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

from rltune.sdk.errors import UnsafeFileError

__all__ = ["TENANT_WRITABLE", "TenantFolder", "UnsafeFileError"]

#: Every folder a sandboxed process can write, by the path it sees it at, with what it is
#: and the trusted code that touches it (through :class:`TenantFolder` only).
#: ``functions.sandbox.bwrap_command`` refuses to mount any other folder writable.
TENANT_WRITABLE: dict[str, str] = {
    "/traces": "the job's traces/ (span files; observability.spanstore.SpanStore)",
    "/worker": "a worker's private folder (its ready file; functions.backends.local)",
    "/workspace": "a venv build's private copy of the workspace (removed after the build)",
    "/venv": "a venv while it builds (its ready marker; functions.requirements.ensure_venv)",
}

_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


class TenantFolder:
    """Files of one tenant-writable folder, each named by a single path component."""

    def __init__(self, path: str | Path, *, max_bytes: int, create: bool = False):
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)

    def _refuse(self, name: str, what: str) -> UnsafeFileError:
        return UnsafeFileError(
            f"{name} in {self.path} is {what}: trusted code reads and writes only regular "
            f"files of at most {self.max_bytes} bytes there", where=name,
            hint="a function may have put it there; remove it")

    @contextlib.contextmanager
    def _dir(self) -> Iterator[int]:
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | _FLAGS)
        try:
            yield fd
        finally:
            os.close(fd)

    def _name(self, name: str) -> str:
        if not name or "/" in name or "\0" in name or name in (".", ".."):
            raise ValueError(f"{name!r} is not a single file name")
        return name

    def _open(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        try:
            fd = os.open(name, flags | _FLAGS, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link
                raise self._refuse(name, "a symbolic link, not a regular file") from None
            if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without reader, a folder
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                raise self._refuse(name, _kind(st.st_mode)) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise self._refuse(name, _kind(st.st_mode))
            if st.st_nlink != 1:
                raise self._refuse(name, f"a hard link ({st.st_nlink} names)")
            if st.st_size > self.max_bytes:
                raise self._refuse(name, f"{st.st_size} bytes, over the bound")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def append(self, name: str, data: bytes) -> None:
        """Append ``data`` with one ``write`` (created when missing); refused past the bound."""
        with self._dir() as d:
            fd = self._open(d, self._name(name), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                if os.fstat(fd).st_size + len(data) > self.max_bytes:
                    raise self._refuse(name, "full")
                os.write(fd, data)
            finally:
                os.close(fd)

    def read(self, name: str) -> Optional[bytes]:
        """The file's bytes, or None when there is no such file."""
        with self._dir() as d:
            try:
                fd = self._open(d, self._name(name), os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                chunks, left = [], self.max_bytes + 1
                while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                    chunks.append(chunk)
                    left -= len(chunk)
            finally:
                os.close(fd)
        data = b"".join(chunks)
        if len(data) > self.max_bytes:  # grew while read
            raise self._refuse(name, "over the bound")
        return data

    def take(self, name: str) -> Optional[bytes]:
        """``read``, then the name is removed (whatever it was: a refused entry goes too)."""
        try:
            return self.read(name)
        finally:
            self.remove(name)

    def remove(self, name: str) -> None:
        """Remove the name itself (a link, not what it points to); missing is fine."""
        with self._dir() as d:
            try:
                os.unlink(self._name(name), dir_fd=d)
            except FileNotFoundError:
                pass
            except (IsADirectoryError, PermissionError):  # a folder: refused when used
                pass

    def replace(self, name: str, data: bytes) -> None:
        """A new regular file holding ``data`` in place of whatever had the name."""
        with self._dir() as d:
            self.remove(name)
            fd = self._open(d, self._name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def is_file(self, name: str) -> bool:
        """Whether the name is a regular file of one link (a link to one is not)."""
        try:
            with self._dir() as d:
                st = os.stat(self._name(name), dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1

    def has(self, name: str) -> bool:
        """Whether anything has the name (a link counts; it is not followed)."""
        try:
            with self._dir() as d:
                os.stat(self._name(name), dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True
