"""What a tree of many small files costs the client per file on cached
sessions (docs/decisions/0040-small-files-batched-per-session.md): a deep
queue's commands and a put's MFMTs go out several to a write, the DRS
exchange is paced while the wire holds small files, one stall timer a
session, a directory's paths checked once.  The live tests run the job in
this process against a `drsftp serve` process and count the client's
control writes; no timing."""

from __future__ import annotations

import asyncio
import os
import time
from asyncio import selector_events

import pytest
from conftest import PASSWORD, USER, make_file, running_server
from dataset_util import assert_same_tree

from drsftp.client.session.control import FTPError
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.cached import worker
from drsftp.client.trees.cached.session import SMALL_DRS, CachedSession
from drsftp.client.trees.dataset import JobOptions, run_get, run_put
from drsftp.client.trees.job.treejob import DIR_CACHE, Item, Source, TreeJob
from drsftp.client.trees.plan import Transfer
from drsftp.ftp.listing import DIR
from drsftp.ftp.safepath import UnsafePath, local_path, remote_join
from drsftp.ftp.url import FTPLocation

FILES = 300


def _small_tree(root) -> None:
    for d in range(3):
        (root / f"d{d}").mkdir(parents=True)
    for i in range(FILES):
        make_file(root / f"d{i % 3}" / f"f{i:04d}", 10 + i, seed=i)
        os.utime(root / f"d{i % 3}" / f"f{i:04d}", (1_600_000_000 + i, 1_600_000_000 + i))


def _control_writes(monkeypatch, verbs: tuple[bytes, ...]) -> list[int]:
    """Each client write that carries one of ``verbs``: how many of their lines."""
    counts: list[int] = []
    write = selector_events._SelectorSocketTransport.write

    def counting(self, data):
        n = sum(bytes(data).count(b"\r\n" + v + b" ") + bytes(data).startswith(v + b" ") for v in verbs)
        if n:
            counts.append(n)
        return write(self, data)

    monkeypatch.setattr(selector_events._SelectorSocketTransport, "write", counting)
    return counts


def _opts() -> TransferOptions:
    return TransferOptions(progress=False, connect_timeout=10)


def test_a_get_r_of_small_files_sends_its_retrs_several_to_a_write(tmp_path, monkeypatch):
    src = tmp_path / "srv" / "src"
    _small_tree(src)
    counts = _control_writes(monkeypatch, (b"RETR",))
    with running_server(tmp_path / "srv") as srv:
        loc = FTPLocation("127.0.0.1", srv.port, USER, PASSWORD, "/src/")
        result = asyncio.run(run_get([(loc, True)], str(tmp_path / "dest") + "/", _opts(),
                                     JobOptions(recursive=True, sessions=1)))
    assert result.count("ok") == FILES
    assert_same_tree(src, tmp_path / "dest")
    assert sum(counts) == FILES
    assert len(counts) <= FILES // (worker.REFILL["get"] - 1), counts  # (one a file: 300 writes)


def test_a_put_r_of_small_files_batches_its_stors_and_mfmts_and_sets_every_time(tmp_path, monkeypatch):
    src = tmp_path / "src"
    _small_tree(src)
    (tmp_path / "srv" / "up").mkdir(parents=True)
    counts = _control_writes(monkeypatch, (b"STOR", b"MFMT"))
    with running_server(tmp_path / "srv") as srv:
        loc = FTPLocation("127.0.0.1", srv.port, USER, PASSWORD, "/up/")
        result = asyncio.run(run_put([str(src) + "/"], loc, _opts(), JobOptions(recursive=True, sessions=1)))
    assert result.count("ok") == FILES
    assert_same_tree(src, tmp_path / "srv" / "up")
    assert sum(counts) == 2 * FILES  # a STOR and an MFMT a file
    assert len(counts) <= 2 * FILES // (worker.REFILL["put"] - 1), counts
    for i in range(FILES):  # the last MFMTs too: sent before the session closed
        assert os.stat(tmp_path / "srv" / "up" / f"d{i % 3}" / f"f{i:04d}").st_mtime == 1_600_000_000 + i


class _File:
    def __init__(self, size, moved=0):
        self.size, self.bytes = size, moved


class _Exchange:
    last_sent = float("-inf")


class _Drs:
    exchange = _Exchange()


def test_a_small_wire_exchanges_drs_once_a_second_a_wide_one_every_tick():
    cs = object.__new__(CachedSession)
    cs.drs = _Drs()  # type: ignore[assignment]
    cs.files = []  # type: ignore[assignment]
    cs.tick_floor()
    assert not cs.drs_wanted()  # between files: nothing to say
    cs.files = [_File(1000), _File(5000, 100)]  # type: ignore[assignment]
    cs.tick_floor()
    assert cs.drs_wanted()  # none yet
    cs.drs.exchange.last_sent = time.monotonic()
    assert not cs.drs_wanted()
    cs.drs.exchange.last_sent = time.monotonic() - SMALL_DRS
    assert cs.drs_wanted()
    cs.drs.exchange.last_sent = time.monotonic()
    cs.files.append(_File(8 << 20))  # type: ignore[attr-defined]
    assert cs.tick_floor() == 0.0 and cs.drs_wanted()  # a window's worth: DRS's own pace


class _Done:
    def __init__(self) -> None:
        self.done = asyncio.get_running_loop().create_future()


class _Session:
    """What StallWatch reads of a cached session: its bytes, its fail()."""

    def __init__(self, moving: bool) -> None:
        self.moving, self.n, self.failed = moving, 0, None
        self.file: _Done | None = None

    @property
    def received(self) -> int:
        self.n += self.moving
        return self.n

    def fail(self, exc: FTPError) -> None:
        self.failed = exc
        assert self.file is not None
        self.file.done.set_exception(exc)


def test_a_stalled_session_fails_the_file_awaited_and_a_moving_one_does_not(monkeypatch):
    monkeypatch.setattr(worker.StallWatch, "EVERY", 0.01)

    async def main(moving: bool) -> _Session:
        cs = _Session(moving)
        watch = worker.StallWatch(cs, 0.05)  # type: ignore[arg-type]
        cs.file = f = _Done()
        try:
            if moving:  # it moves for 20 checks, then the file ends
                asyncio.get_running_loop().call_later(0.2, f.done.set_result, None)
            await asyncio.wait_for(watch.until_done(f), 10)  # type: ignore[arg-type]
        finally:
            watch.stop()
        return cs

    stalled = asyncio.run(main(False))
    assert stalled.failed is not None and "stalled" in str(stalled.failed)
    assert asyncio.run(main(True)).failed is None


def test_paths_of_a_tree_are_the_checked_joins_and_unsafe_names_are_refused():
    async def main() -> None:
        job = TreeJob("get", FTPLocation("127.0.0.1", 21, "u", "p", "/"), _opts(), JobOptions(recursive=True))
        job.sources = [Source("/srv/top", "dest", DIR), Source("rel/", "/abs/", DIR)]
        rels = [("f",), ("d", "f"), ("d", "e", "f"), ("d", "g"), ("a..b", "..x")]
        rels += [(f"dir{i}", "f") for i in range(DIR_CACHE + 10)]  # past the cache's bound
        for src in (0, 1):
            s = job.sources[src]
            for rel in rels * 2:  # (the second time from the cache)
                item = Item(src, Transfer(rel, 1, None))
                assert job.paths(item) == (remote_join(s.remote, rel), local_path(s.local, rel))
        for bad in [("d", ".."), ("d", "."), ("..", "f"), ("d", "x/y"), ("d", ""), ("d", "a\nb")]:
            with pytest.raises(UnsafePath):
                job.paths(Item(0, Transfer(bad, 1, None)))

    asyncio.run(main())


def test_ahead_fills_a_queue_of_small_files_and_paces_big_ones_by_the_rate():
    from types import SimpleNamespace as NS

    job = NS(jopts=NS(pipeline=True), rtt=0.01)
    sess = NS(rate=lambda window: 1e6)  # two RTTs at 1 MB/s: 20 kB
    inflight = worker.Inflight()
    for _ in range(worker.MAX_AHEAD["get"]):
        assert worker.ahead(job, sess, inflight, "get")  # type: ignore[arg-type]
        inflight.append((None, NS(size=1000, bytes=0, offset=0)))
    assert not worker.ahead(job, sess, inflight, "get")  # type: ignore[arg-type]  # full
    while inflight:
        inflight.popleft()
    assert inflight.listed == 0
    big = [NS(size=1 << 20, bytes=0, offset=0), NS(size=1 << 20, bytes=0, offset=1000), NS(size=None, bytes=5)]
    for f in big:
        inflight.append((None, f))
    assert inflight.listed == (2 << 20) - 1000
    assert not worker.ahead(job, sess, inflight, "get")  # type: ignore[arg-type]  # 2 MiB left: past 20 kB
    big[0].bytes, big[1].bytes = (1 << 20) - 100, (1 << 20) - 1100  # (their ends still on the way)
    assert worker.ahead(job, sess, inflight, "get")  # type: ignore[arg-type]  # 200 B left, whatever was listed
