"""Tree jobs never lose the destination's data to what they could not read
or could not tell apart (docs/DATASETS.md, "--sync", "Failures and bad
input"): `copy -r` never resumes from an older file of the final name;
`copy -r` takes up a MODE E resume record only for the same source
version (size and MDTM); `get -r --delete` and `put -r --delete` delete
nothing at or below a directory not read whole."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import PASSWORD, USER, drsftp, in_thread, running_server
from pyftpdlib.ioloop import IOLoop
from pyftpdlib.servers import FTPServer

from drsftp.client.session.control import FTPError
from drsftp.client.streams.rangeplan import ResumeRecord, load_record, save_record
from drsftp.client.thirdparty import tree
from drsftp.client.thirdparty.pipelined import PairPipe, PipeItem
from drsftp.client.thirdparty.single import record_base
from drsftp.client.thirdparty.tree import _partial
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.dataset import JobOptions, run_get, run_put
from drsftp.client.trees.job.treejob import Item
from drsftp.client.trees.localtree import local_source_dirs
from drsftp.client.trees.plan import Stat, Transfer, plan
from drsftp.ftp.copypipe import Stage
from drsftp.ftp.eblock import RangeSet
from drsftp.ftp.listing import format_time_val
from drsftp.ftp.url import parse_url
from drsftp.server.app import ServerConfig, build_server

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


# -- copy -r in MODE E: the resume record names the source's version -----------------------

def _record(sa, sb) -> str:
    return record_base(replace(parse_url(sa.url("t/")), path="/t/f"), replace(parse_url(sb.url("t/")), path="/t/f"))


@pytest.mark.parametrize("pipeline", [(), ("--no-pipeline",)], ids=["pipelined", "one-by-one"])
@pytest.mark.parametrize("recorded", [None, format_time_val(OLD), format_time_val(NEW)],
                         ids=["no-mtime", "other-mtime", "same-mtime"])
def test_copy_continue_takes_up_a_mode_e_record_only_for_the_same_source_version(
        tmp_path, monkeypatch, pipeline, recorded):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "t").mkdir(parents=True)
    (b / "t").mkdir(parents=True)
    (a / "t" / "f").write_bytes(b"N" * 200)  # regenerated at the same size
    os.utime(a / "t" / "f", (NEW, NEW))
    (b / "t" / ".f.part").write_bytes(b"O" * 100)  # an interrupted copy's blocks
    with running_server(a) as sa, running_server(b) as sb:
        base = _record(sa, sb)
        os.makedirs(os.path.dirname(base))
        save_record(base, ResumeRecord(200, recorded, _held(0, 100)))
        r = _copy(sa, sb, tmp_path, "--continue", "-P", "2", *pipeline)
    assert r.returncode == 0, r.stderr
    same = recorded == format_time_val(NEW)
    assert (b / "t" / "f").read_bytes() == (b"O" * 100 + b"N" * 100 if same else b"N" * 200)
    assert load_record(base) is None  # (done: no record left)


def _held(start, end):
    return RangeSet([(start, end)])


def test_a_pipelined_copy_cut_short_records_the_source_mdtm(tmp_path):
    base = str(tmp_path / "rec")

    async def cut():
        pipe = PairPipe.__new__(PairPipe)  # (only its bookkeeping of files)
        pipe.items = {}
        item = PipeItem(SimpleNamespace(seq=1, size=200, b=Stage.STARTED), base, held=_held(0, 50),
                        mtime=format_time_val(NEW))
        pipe._resolve(item, FTPError("connection lost", transient=True))

    asyncio.run(cut())
    rec = load_record(base)
    assert rec is not None and (rec.size, rec.mtime, list(rec.held)) == (200, format_time_val(NEW), [(0, 50)])


def test_a_copy_one_by_one_keeps_its_record_with_the_listed_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    seen = {}

    async def run_one(pair, spec, topts, auto, record, size, mtime, *rest):
        seen.update(record=record, mtime=mtime)

    monkeypatch.setattr(tree, "run_one", run_one)
    pair = SimpleNamespace(extended_block=lambda: True, cached=True)
    for mtime, want in ((NEW, format_time_val(NEW)), (None, None)):
        item = Item(0, Transfer(("f",), 200, mtime))
        asyncio.run(tree._copy_one(_job(), 0, pair, item, "/t/f", "/t/f"))
        assert seen == {"record": record_base(F, F), "mtime": want}


def test_without_the_sources_time_no_record_is_taken_up(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    base = record_base(F, F)
    os.makedirs(os.path.dirname(base))
    for mtime, want in ((None, ()), (NEW, ((0, 100),))):
        save_record(base, ResumeRecord(200, format_time_val(NEW), _held(0, 100)))
        item = Item(0, Transfer(("f",), 200, mtime))
        assert tree._resume_ranges(_job(), item, "/t/f", "/t/f", mode_e=True) == (want, base)
    assert load_record(base) is not None  # (taken up: kept until the copy ends)


F = parse_url("ftp://u:p@127.0.0.1:21/t/f")


def _job():
    """What _copy_one and _resume_ranges read of a CopyJob (--continue, -P 2)."""
    return SimpleNamespace(jopts=SimpleNamespace(resume=True, cached=True, streams=2), topts=None, active={},
                           location=lambda side, path: replace(F, path=path))


# -- get -r / put -r --delete: nothing deleted below a directory not read whole ---------------

def _refusing_server(root, refused):
    served = build_server(ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD))
    served.close()
    base = served.handler

    def ftp_MLSD(self, path):
        if path.rstrip("/").endswith(refused):
            self.respond("550 Permission denied.")
            return None
        return base.ftp_MLSD(self, path)

    return FTPServer(("127.0.0.1", 0), type("Refusing", (base,), {"ftp_MLSD": ftp_MLSD}), ioloop=IOLoop())


def test_get_delete_keeps_the_local_tree_of_a_directory_whose_listing_failed(tmp_path, capsys):
    root = tmp_path / "srv"
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "keep").write_bytes(b"K" * 10)
    (root / "d" / "top").write_bytes(b"T" * 10)
    dest = tmp_path / "out"
    (dest / "sub" / "deep").mkdir(parents=True)
    (dest / "sub" / "keep").write_bytes(b"K" * 10)
    (dest / "sub" / "deep" / "precious").write_bytes(b"P" * 10)
    (dest / "gone").write_bytes(b"G" * 10)  # not on the server: --delete's
    with in_thread(_refusing_server(root, "/sub"), "refusing-ftpd") as port:
        loc = parse_url(f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/d")
        res = asyncio.run(asyncio.wait_for(run_get(
            [(loc, True)], str(dest), TransferOptions(use_drs_command=False),
            JobOptions(recursive=True, sessions=1, delete=True, progress=False)), 60))
    assert (dest / "sub" / "keep").exists() and (dest / "sub" / "deep" / "precious").exists()
    assert (dest / "top").read_bytes() == b"T" * 10 and not (dest / "gone").exists()
    assert res.count("failed") == 1 and res.count("deleted") == 1
    assert "deletes nothing here or below" in capsys.readouterr().err


def _put_delete(tmp_path, monkeypatch, unreadable):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a").write_bytes(b"A" * 10)
    (src / "top").write_bytes(b"T" * 10)
    root = tmp_path / "srv"
    (root / "d" / "sub" / "deep").mkdir(parents=True)
    (root / "d" / "sub" / "a").write_bytes(b"A" * 10)
    (root / "d" / "sub" / "remote-only").write_bytes(b"R" * 10)
    (root / "d" / "sub" / "deep" / "x").write_bytes(b"X" * 10)
    (root / "d" / "gone").write_bytes(b"G" * 10)
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).rstrip("/") == os.path.join(str(src), unreadable).rstrip("/"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with running_server(root) as s:
        loc = parse_url(s.url("d"))
        res = asyncio.run(asyncio.wait_for(run_put(
            [str(src) + "/"], loc, TransferOptions(use_drs_command=False),
            JobOptions(recursive=True, sessions=1, delete=True, progress=False)), 60))
    return root / "d", res


def test_put_delete_keeps_the_remote_tree_of_an_unreadable_local_directory(tmp_path, monkeypatch):
    d, res = _put_delete(tmp_path, monkeypatch, "sub")
    assert sorted(os.listdir(d / "sub")) == ["a", "deep", "remote-only"] and (d / "sub" / "deep" / "x").exists()
    assert (d / "top").exists() and not (d / "gone").exists()
    assert res.count("failed") == 1 and res.count("deleted") == 1


def test_put_delete_of_an_unreadable_source_root_deletes_nothing(tmp_path, monkeypatch):
    d, res = _put_delete(tmp_path, monkeypatch, "")
    assert (d / "gone").exists() and (d / "sub" / "remote-only").exists()
    assert res.count("failed") == 1 and res.count("deleted") == 0


def test_a_directory_removed_mid_walk_is_unlisted_not_empty(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    failed = []
    walk = local_source_dirs(str(tmp_path), lambda path, why: failed.append(path))
    assert set(next(walk)) == {("a",), ("b",)}  # the root's entries
    os.rmdir(tmp_path / "b")  # (gone before the walk lists it)
    rest = {}
    for entries in walk:
        rest.update(entries)
    assert rest[("b",)] == Stat(is_dir=True, unlisted=True) and failed == [str(tmp_path / "b")]


def test_the_plan_deletes_nothing_at_or_below_an_unlisted_entry_on_either_side():
    source = {("d",): Stat(is_dir=True, unlisted=True), ("f",): Stat(5, 1.0), ("u",): Stat(unlisted=True)}
    dest = {("d",): Stat(is_dir=True), ("d", "x"): Stat(1, 1.0), ("d", "e"): Stat(is_dir=True),
            ("d", "e", "y"): Stat(1, 1.0), ("u",): Stat(3, 1.0), ("z",): Stat(1, 1.0),
            ("w",): Stat(is_dir=True, unlisted=True), ("v",): Stat(is_dir=True), ("v", "q"): Stat(1, 1.0)}
    p = plan(source, dest, delete=True, sync=True)
    assert p.deletes == [("v", "q"), ("v",), ("z",)]
    assert p.kept == [("d",), ("u",)]
    assert [t.rel for t in p.transfers] == [("f",)] and p.mkdirs == []
    # the whole source unread (its root's listing failed): nothing at all deleted
    assert plan({(): Stat(is_dir=True, unlisted=True)}, dest, delete=True).deletes == []
