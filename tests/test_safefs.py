"""The safe file primitive: links, FIFOs, hard links, folders and oversized files put in a
tenant-writable folder are refused, and nothing outside the folder is created, changed or read."""

from __future__ import annotations

import os

import pytest

from rltune.safefs import TenantFolder, UnsafeFileError


@pytest.fixture
def place(tmp_path):
    """(the tenant's folder, a file outside it holding a private row)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    outside = tmp_path / "victim.jsonl"
    outside.write_bytes(b'{"private": "VICTIMROW"}\n')
    return TenantFolder(folder, max_bytes=1000), outside


def test_a_regular_file_is_appended_read_and_taken(place):
    f, _ = place
    f.append("a.jsonl", b"1\n")
    f.append("a.jsonl", b"2\n")
    assert f.read("a.jsonl") == b"1\n2\n"
    assert f.take("a.jsonl") == b"1\n2\n" and f.read("a.jsonl") is None
    assert not f.has("a.jsonl")


def test_a_symbolic_link_is_neither_followed_for_writing_nor_for_reading(place):
    f, outside = place
    os.symlink(outside, f.path / "a.jsonl")
    before = outside.read_bytes()
    with pytest.raises(UnsafeFileError, match=r"a\.jsonl .* symbolic link"):
        f.append("a.jsonl", b"span\n")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        f.read("a.jsonl")
    with pytest.raises(UnsafeFileError):
        f.take("a.jsonl")
    assert outside.read_bytes() == before
    assert not f.has("a.jsonl")  # take removed the link itself, not its target
    assert outside.exists()


def test_a_dangling_link_creates_no_file_where_it_points(place, tmp_path):
    f, _ = place
    target = tmp_path / "made-by-root"
    os.symlink(target, f.path / "_job.jsonl")
    with pytest.raises(UnsafeFileError):
        f.append("_job.jsonl", b"x\n")
    with pytest.raises(UnsafeFileError):
        f.read("_job.jsonl")
    assert not target.exists()
    f.replace("_job.jsonl", b"mine\n")  # replace: a new regular file instead of the link
    assert not target.exists() and f.read("_job.jsonl") == b"mine\n"


def test_a_fifo_neither_blocks_nor_is_used(place):
    f, _ = place
    os.mkfifo(f.path / "a.jsonl")
    with pytest.raises(UnsafeFileError, match="FIFO"):
        f.append("a.jsonl", b"x\n")  # no reader: a plain open would block for ever
    with pytest.raises(UnsafeFileError, match="FIFO"):
        f.read("a.jsonl")


def test_a_hard_link_to_another_file_is_refused(place):
    f, outside = place
    os.link(outside, f.path / "a.jsonl")
    before = outside.read_bytes()
    with pytest.raises(UnsafeFileError, match="hard link"):
        f.append("a.jsonl", b"x\n")
    with pytest.raises(UnsafeFileError, match="hard link"):
        f.read("a.jsonl")
    assert outside.read_bytes() == before


def test_folders_and_sizes_over_the_bound_are_refused(place):
    f, _ = place
    (f.path / "d.jsonl").mkdir()
    with pytest.raises(UnsafeFileError, match="directory"):
        f.read("d.jsonl")
    with pytest.raises(UnsafeFileError, match="directory"):
        f.take("d.jsonl")  # the folder is left where it is
    (f.path / "big").write_bytes(b"x" * 1001)
    with pytest.raises(UnsafeFileError, match="1001 bytes"):
        f.read("big")
    f.append("full", b"x" * 999)
    with pytest.raises(UnsafeFileError, match="full"):
        f.append("full", b"yy")
    assert f.read("full") == b"x" * 999


@pytest.mark.parametrize("name", ["../victim.jsonl", "a/b", "", ".", "..", "a\0b"])
def test_a_name_is_one_path_component(place, name):
    f, _ = place
    with pytest.raises(ValueError, match="single file name"):
        f.append(name, b"x")
