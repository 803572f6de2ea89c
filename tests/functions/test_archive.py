"""Workspace archives: exclusions, reproducible identity, limits, and unsafe archives refused."""

from __future__ import annotations

import stat
import zipfile

import pytest

from rltune.functions.archive import content_hash, extract_archive, zip_workspace
from rltune.sdk.errors import ArchiveError


def make_ws(root):
    files = {
        "functions/reward.py": "R = 1\n", "functions/__init__.py": "", "requirements.txt": "",
        "README.md": "docs", "data/train.jsonl": "{}", "tests/test_x.py": "", "x.pyc": "",
        "functions/__pycache__/r.cpython.pyc": "", "secrets.txt": "k", "logs/run.txt": "",
        "keep/important.txt": "keep", "keep/other.txt": "drop", ".gitignore":
        "secrets.txt\nlogs/\nkeep/*.txt\n!keep/important.txt\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_default_exclusions_and_gitignore(tmp_path):
    ws = make_ws(tmp_path / "ws")
    arc = zip_workspace(ws, tmp_path / "a.zip")
    assert arc.files == ["functions/__init__.py", "functions/reward.py", "keep/important.txt",
                         "requirements.txt"]
    assert zipfile.ZipFile(arc.path).namelist() == arc.files


def test_identity_is_reproducible_and_content_based(tmp_path):
    ws = make_ws(tmp_path / "ws")
    a = zip_workspace(ws, tmp_path / "a.zip")
    b = zip_workspace(ws, tmp_path / "b.zip")
    assert a.sha256 == b.sha256 == content_hash(ws)
    assert a.path.read_bytes() == b.path.read_bytes()
    (ws / "functions/reward.py").write_text("R = 2\n")
    assert zip_workspace(ws, tmp_path / "c.zip").sha256 != a.sha256


def test_size_limit_names_the_big_files(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "weights.bin").write_bytes(__import__("os").urandom(300_000))
    with pytest.raises(ArchiveError, match=r"over the 0 MB limit.*weights\.bin") as info:
        zip_workspace(ws, tmp_path / "a.zip", max_bytes=100_000)
    assert "gitignore" in str(info.value)
    assert not (tmp_path / "a.zip").exists()


def test_roundtrip(tmp_path):
    ws = make_ws(tmp_path / "ws")
    arc = zip_workspace(ws, tmp_path / "a.zip")
    out = extract_archive(arc.path, tmp_path / "out")
    assert (out / "functions/reward.py").read_text() == "R = 1\n"
    assert content_hash(out) == arc.sha256


def crafted(path, name, data=b"x", mode=stat.S_IFREG | 0o644):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ok.py", "ok = 1\n")
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        zf.writestr(info, data)
    return path


@pytest.mark.parametrize("name,mode,message", [
    ("../evil.py", stat.S_IFREG | 0o644, "escapes the target folder with '..'"),
    ("a/../../evil.py", stat.S_IFREG | 0o644, "escapes the target folder"),
    ("/etc/evil.py", stat.S_IFREG | 0o644, "has an absolute path"),
    ("link.py", stat.S_IFLNK | 0o777, "is a symlink"),
])
def test_unsafe_archives_are_refused(tmp_path, name, mode, message):
    arc = crafted(tmp_path / "bad.zip", name, b"/etc/passwd", mode)
    with pytest.raises(ArchiveError, match=message) as info:
        extract_archive(arc, tmp_path / "out")
    assert name in str(info.value) and str(arc) in str(info.value)
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil.py").exists()


def test_oversized_member_and_not_a_zip(tmp_path):
    arc = crafted(tmp_path / "big.zip", "big.bin", b"0" * 5000)
    with pytest.raises(ArchiveError, match=r"'big\.bin' is 0\.0 MB, over"):
        extract_archive(arc, tmp_path / "out", max_member_bytes=1000)
    with pytest.raises(ArchiveError, match="unpacks to"):
        extract_archive(arc, tmp_path / "out", max_total_bytes=1000)
    (tmp_path / "junk.zip").write_text("not a zip")
    with pytest.raises(ArchiveError, match="not a readable zip archive"):
        extract_archive(tmp_path / "junk.zip", tmp_path / "out")


# (.gitignore, files of the workspace, a file git keeps, a file git ignores): each row names
# one rule of git's own semantics; the hand-made matcher this replaced got the first three wrong.
GITIGNORE_TABLE = [
    ("/*.py\n", ["top.py", "functions/x.py"], "functions/x.py", "top.py"),
    ("docs/*.md\n", ["docs/a.md", "docs/sub/x.md"], "docs/sub/x.md", "docs/a.md"),
    ("\\#notes\n", ["#notes", "notes"], "notes", "#notes"),
    ("*.txt\n!keep.txt\n", ["a.txt", "keep.txt", "sub/b.txt"], "keep.txt", "sub/b.txt"),
    ("build/\n", ["build/out.py", "src/build/gen.py", "build.py"], "build.py",
     "src/build/gen.py"),
    ("**/cache/*.bin\n", ["cache/a.bin", "x/y/cache/b.bin", "x/cache.bin"], "x/cache.bin",
     "x/y/cache/b.bin"),
    ("a/**/z.py\n", ["a/z.py", "a/b/c/z.py", "b/a/z.py"], "b/a/z.py", "a/b/c/z.py"),
    ("# a comment\n*.log\n!important.log\n", ["x.log", "important.log", "# a comment"],
     "# a comment", "x.log"),
    ("secret\n", ["secret", "lib/secret", "secrets"], "secrets", "lib/secret"),
    ("/only-root/\n", ["only-root/a.py", "lib/only-root/b.py"], "lib/only-root/b.py",
     "only-root/a.py"),
    ("*.py[co]\n?.tmp2\n", ["a.pyc", "a.py", "b.tmp2", "bb.tmp2"], "bb.tmp2", "a.pyc"),
    ("trailing.py   \n", ["trailing.py", "other.py"], "other.py", "trailing.py"),
]


@pytest.mark.parametrize("rules,files,kept,ignored", GITIGNORE_TABLE,
                         ids=[row[0].splitlines()[0] for row in GITIGNORE_TABLE])
def test_gitignore_filtering_equals_pathspec(tmp_path, rules, files, kept, ignored):
    import pathspec

    from rltune.functions.archive import workspace_files

    ws = tmp_path / "ws"
    for rel in [*files, ".gitignore"]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(rules if rel == ".gitignore" else "x\n")
    spec = pathspec.GitIgnoreSpec.from_lines(rules.splitlines())
    expected = sorted(f for f in [*files, ".gitignore"] if not spec.match_file(f))
    assert workspace_files(ws, excludes=()) == expected
    assert kept in expected and ignored not in expected  # the row's rule, stated plainly
