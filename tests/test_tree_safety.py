"""Tree jobs never lose the destination's data to what they could not tell
apart (docs/DATASETS.md, "--sync"): `copy -r` never resumes from an older
file of the final name."""

from __future__ import annotations

import os

import pytest
from conftest import drsftp, running_server

from drsftp.client.thirdparty.tree import _partial
from drsftp.client.trees.plan import Stat

OLD, NEW = 946684800, 1700000000  # 2000-01-01, 2023-11-14 (UTC)


def _copy(sa, sb, tmp_path, *args):
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    return drsftp("copy", sa.url("t/"), sb.url("t/"), "--progress", "never", "-r", *args, timeout=60, env=env)


def _trees(tmp_path, a_bytes, b_bytes, b_mtime):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "t").mkdir(parents=True)
    (b / "t").mkdir(parents=True)
    (a / "t" / "f").write_bytes(a_bytes)
    os.utime(a / "t" / "f", (NEW, NEW))
    (b / "t" / "f").write_bytes(b_bytes)
    os.utime(b / "t" / "f", (b_mtime, b_mtime))
    return a, b


# -- copy -r: a shorter final NAME is no resume prefix ------------------------------------

@pytest.mark.parametrize("option", ["--sync", "--continue"])
def test_copy_of_a_grown_rewritten_file_never_splices_the_older_one(tmp_path, option):
    # B holds the old version whole (older than A's): a REST at its size would keep its bytes
    a, b = _trees(tmp_path, b"N" * 200, b"O" * 100, OLD)
    with running_server(a) as sa, running_server(b) as sb:
        r = _copy(sa, sb, tmp_path, option, "-P", "1")
    assert r.returncode == 0, r.stderr
    assert (b / "t" / "f").read_bytes() == b"N" * 200


def test_copy_continue_resumes_a_shorter_name_written_since_the_source_changed(tmp_path):
    # (a server that writes in place: the interrupted copy is under NAME, newer than A's file)
    a, b = _trees(tmp_path, b"N" * 200, b"R" * 100, NEW + 60)
    with running_server(a) as sa, running_server(b) as sb:
        r = _copy(sa, sb, tmp_path, "--continue", "-P", "1")
    assert r.returncode == 0, r.stderr
    assert (b / "t" / "f").read_bytes() == b"R" * 100 + b"N" * 100


def test_partial_copies_on_b_are_part_files_or_with_continue_newer_shorter_names():
    src = {("f",): Stat(200, NEW), ("g",): Stat(200, NEW), ("h",): Stat(200, None)}
    have = {("f",): Stat(100, NEW + 1), ("g",): Stat(100, OLD), ("h",): Stat(100, NEW), (".k.part",): Stat(7, OLD)}
    assert _partial(have, src, in_place=False) == {("k",): 7}
    assert _partial(have, src, in_place=True) == {("f",): 100, ("k",): 7}
