"""Workspace archives: zip a workspace reproducibly, hash its content, extract safely.

Zipping skips the cloud SDK's default exclusions (VCS and editor files, caches,
``*.md``, ``*.log``, ``data/``, ``tests/``, …) and whatever the workspace's ``.gitignore``
ignores, by git's rules (``pathspec.GitIgnoreSpec``). Entries are sorted and time-stamped
1980-01-01 so the same content gives the same bytes; ``content_hash`` (over paths and file
bytes) is the archive's identity.

Extraction refuses absolute paths, ``..`` components, symlinks, special files, members larger
than ``max_member_bytes`` and archives that unpack to more than ``max_total_bytes``; sizes are
counted while reading, so a header that lies about a member's size does not help.

Example:
    >>> import pathlib, tempfile
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / "reward.py").write_text("x = 1\\n")
    >>> _ = (ws / "notes.md").write_text("skipped\\n")
    >>> arc = zip_workspace(ws, pathlib.Path(tempfile.mkdtemp()) / "ws.zip")
    >>> arc.files
    ['reward.py']
    >>> out = extract_archive(arc.path, pathlib.Path(tempfile.mkdtemp()) / "x")
    >>> (out / "reward.py").read_text()
    'x = 1\\n'
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

import pathspec

from rltune.sdk.errors import ArchiveError

DEFAULT_EXCLUDES = (
    ".git", ".gitignore", ".DS_Store", ".vscode", ".Python", ".env", ".venv", ".idea",
    "__pycache__", "*.swp", "*.egg", "*.egg-info", "*.pyc", "*.md", "*.log", "*.tmp", "*.bak",
    "build", "develop-eggs", ".eggs", "test", "tests", "tmp", "temp", "data",
)
MAX_ARCHIVE_BYTES = 200 * 2**20  # the cloud rejects uploads above 200 MB
MAX_MEMBER_BYTES = 200 * 2**20
MAX_TOTAL_BYTES = 1024 * 2**20
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass
class WorkspaceArchive:
    """A zipped workspace: where it is, its content hash and what it holds."""

    path: Path
    sha256: str
    size: int
    files: list[str] = field(default_factory=list)


def gitignore_spec(root: Path) -> Optional[pathspec.GitIgnoreSpec]:
    """The workspace's ``.gitignore`` with git's own semantics (anchoring, ``**``, ``!``,
    ``dir/``, escapes such as ``\\#``), or None when there is none."""
    path = root / ".gitignore"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


class _Filter:
    def __init__(self, root: Path, excludes: Iterable[str]):
        self.excludes = tuple(excludes)
        self.spec = gitignore_spec(root)

    def skip(self, rel: str, is_dir: bool) -> bool:
        name = PurePosixPath(rel).name
        if any(fnmatch.fnmatchcase(name, pat) for pat in self.excludes):
            return True
        # A folder is asked as ``dir/`` (so ``build/`` matches it); as in git, the walk does
        # not enter an ignored folder, so nothing below it can be re-included.
        return self.spec is not None and self.spec.match_file(rel + "/" if is_dir else rel)


def workspace_files(root: str | Path, excludes: Iterable[str] = DEFAULT_EXCLUDES) -> list[str]:
    """Relative POSIX paths of the files that would be packed, sorted."""
    root = Path(root).resolve()
    flt = _Filter(root, excludes)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(
            d for d in dirnames
            if not flt.skip(rel_dir + d, True) and not os.path.islink(os.path.join(dirpath, d))
        )
        for f in filenames:
            full = os.path.join(dirpath, f)
            if os.path.islink(full) or not os.path.isfile(full) or flt.skip(rel_dir + f, False):
                continue
            out.append(rel_dir + f)
    return sorted(out)


def content_hash(root: str | Path, files: Optional[list[str]] = None) -> str:
    """sha256 over (path, file bytes) of the packed files: the workspace's identity."""
    root = Path(root)
    digest = hashlib.sha256()
    for rel in files if files is not None else workspace_files(root):
        digest.update(rel.encode() + b"\0")
        digest.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return digest.hexdigest()


def zip_workspace(root: str | Path, dest: str | Path, *,
                  excludes: Iterable[str] = DEFAULT_EXCLUDES,
                  max_bytes: int = MAX_ARCHIVE_BYTES) -> WorkspaceArchive:
    """Zip ``root`` into ``dest`` reproducibly; raise ``ArchiveError`` past ``max_bytes``."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise ArchiveError(f"workspace {root} is not a directory", where=str(root),
                           hint="give the folder that holds your functions")
    files = workspace_files(root, excludes)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for rel in files:
            info = zipfile.ZipInfo(rel, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            zf.writestr(info, (root / rel).read_bytes())
    size = tmp.stat().st_size
    if size > max_bytes:
        tmp.unlink()
        biggest = sorted(files, key=lambda f: (root / f).stat().st_size, reverse=True)[:3]
        raise ArchiveError(
            f"workspace archive is {size / 2**20:.1f} MB, over the {max_bytes / 2**20:.0f} MB "
            f"limit (largest files: {', '.join(biggest)})",
            where=str(root),
            hint="move data and model files out of the workspace or list them in .gitignore",
        )
    os.replace(tmp, dest)
    return WorkspaceArchive(dest, content_hash(root, files), size, files)


def _check_member(info: zipfile.ZipInfo, where: str, max_member_bytes: int) -> PurePosixPath:
    name = info.filename
    hint = "re-create the archive with `rltune functions package` from a plain folder"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"member {name!r} has an absolute path", where=where, hint=hint)
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise ArchiveError(f"member {name!r} escapes the target folder with '..'", where=where,
                           hint=hint)
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ArchiveError(f"member {name!r} is a symlink; symlinks are not allowed",
                           where=where, hint="replace the link with the file it points to")
    ftype = stat.S_IFMT(mode)  # many zip tools store permission bits only: type 0 is a file
    if ftype and ftype not in (stat.S_IFREG, stat.S_IFDIR):
        raise ArchiveError(f"member {name!r} is not a regular file", where=where, hint=hint)
    if info.file_size > max_member_bytes:
        raise ArchiveError(
            f"member {name!r} is {info.file_size / 2**20:.1f} MB, over the "
            f"{max_member_bytes / 2**20:.0f} MB limit per file", where=where,
            hint="keep large files out of the workspace")
    return PurePosixPath(*parts)


def _check_collisions(members: list) -> None:
    """Refuse members that cannot all exist: a file ``a`` and ``a/b.py``, or a name twice."""
    files: dict[PurePosixPath, str] = {}
    dirs: dict[PurePosixPath, str] = {}
    for info, rel in members:
        rel = PurePosixPath(*rel.parts)
        for parent in list(rel.parents)[:-1]:
            dirs.setdefault(parent, info.filename)
        if info.is_dir():
            dirs.setdefault(rel, info.filename)
        elif rel in files:
            raise ArchiveError(f"the archive holds {info.filename!r} twice", where=info.filename,
                               hint="re-create the archive from a plain folder")
        else:
            files[rel] = info.filename
    for rel, name in files.items():
        if rel in dirs:
            raise ArchiveError(f"{name!r} is a file but {dirs[rel]!r} needs it to be a folder",
                               where=name, hint="rename one of them and re-create the archive")


def extract_archive(archive: str | Path, dest: str | Path, *,
                    max_member_bytes: int = MAX_MEMBER_BYTES,
                    max_total_bytes: int = MAX_TOTAL_BYTES) -> Path:
    """Check every member, then extract into ``dest`` (created; must be empty or absent)."""
    archive, dest = Path(archive), Path(dest)
    where = str(archive)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(f"not a readable zip archive: {exc}", where=where,
                           hint="upload a .zip made by `rltune functions package`") from exc
    with zf:
        members = [(info, _check_member(info, where, max_member_bytes)) for info in zf.infolist()]
        _check_collisions(members)
        declared = sum(info.file_size for info, _ in members)
        if declared > max_total_bytes:
            raise ArchiveError(f"archive unpacks to {declared / 2**20:.1f} MB, over the "
                               f"{max_total_bytes / 2**20:.0f} MB limit", where=where,
                               hint="keep large files out of the workspace")
        dest.mkdir(parents=True, exist_ok=True)
        total = 0
        try:
            for info, rel in members:
                target = dest.joinpath(*rel.parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                written = 0
                with zf.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(1 << 20):
                        written += len(chunk)
                        total += len(chunk)
                        if written > max_member_bytes or total > max_total_bytes:
                            raise ArchiveError(
                                f"member {info.filename!r} unpacks past the size limit "
                                f"(its header understates it)", where=where,
                                hint="re-create the archive from a plain folder")
                        out.write(chunk)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return dest
