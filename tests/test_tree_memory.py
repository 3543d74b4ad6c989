"""A dataset job's memory does not grow with its tree (docs/DATASETS.md,
"Memory"): the queue a streamed walk fills is paced, a cached put session
lets go of the files it sent, the report keeps failures and counts the
rest, --json spools its records, and a stream's buffers are sized to the
files.  Bounds are checked through the job's own counters on small trees
with the limits lowered, not by timing."""

import asyncio
import json
import os

from conftest import running_server
from dataset_util import assert_same_tree

from drsftp.client.session.control import ControlConnection
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.cached import put as cached_put
from drsftp.client.trees.cached.get import _CachedSink
from drsftp.client.trees.cached.session import CachedSession
from drsftp.client.trees.dataset import run_get, run_put
from drsftp.client.trees.job import result as resultmod
from drsftp.client.trees.job import treejob
from drsftp.client.trees.job.result import FileOutcome, JobReport
from drsftp.client.trees.job.treejob import JobOptions
from drsftp.ftp.url import parse_url

DIRS, PER_DIR = 10, 50  # 500 small files
HIGH, LOW, KEEP = 40, 20, 30


def _tree(root):
    blob = os.urandom(700)
    for d in range(DIRS):
        (root / f"d{d}").mkdir(parents=True)
        for i in range(PER_DIR):
            (root / f"d{d}" / f"f{i:03}").write_bytes(blob[i:i + (d * PER_DIR + i) % 700])


def _lowered(monkeypatch) -> dict:
    """Small limits, and the most files the queue held after each enqueue."""
    monkeypatch.setattr(treejob, "BACKLOG_HIGH", HIGH, raising=False)
    monkeypatch.setattr(treejob, "BACKLOG_LOW", LOW, raising=False)
    monkeypatch.setattr(resultmod, "KEEP_DONE", KEEP, raising=False)
    seen = {"queue": 0}
    enqueue = treejob.TreeJob.enqueue

    def watched(self, i, p):
        enqueue(self, i, p)
        seen["queue"] = max(seen["queue"], len(self.queue))

    monkeypatch.setattr(treejob.TreeJob, "enqueue", watched)
    return seen


def _check_report(res) -> None:
    assert res.count("ok") == DIRS * PER_DIR and res.entries == DIRS * PER_DIR and res.count("failed") == 0
    assert len(res.outcomes) == KEEP  # the first ones kept whole, the rest counted
    assert res.bytes == sum((k % 700) for k in range(DIRS * PER_DIR))


def test_a_streamed_get_paces_its_walk_and_keeps_a_summary(tmp_path, monkeypatch):
    seen = _lowered(monkeypatch)
    root = tmp_path / "srv"
    _tree(root / "t")
    with running_server(root) as srv:
        res = asyncio.run(asyncio.wait_for(run_get(
            [(parse_url(srv.url("t") + "/"), True)], str(tmp_path / "out"), TransferOptions(progress=False),
            JobOptions(recursive=True, sessions=2, progress=False)), 120))
    assert_same_tree(root / "t", tmp_path / "out")
    # at most HIGH files, then one more directory per lister (2 sessions: 2 listers)
    assert seen["queue"] <= HIGH + 2 * PER_DIR, seen
    _check_report(res)


def test_a_put_walks_a_directory_at_a_time_and_lets_go_of_sent_files(tmp_path, monkeypatch):
    seen = _lowered(monkeypatch)
    held = {"order": 0}
    request = cached_put.CachedPuts.request

    def watched(self, local, remote):
        fp = request(self, local, remote)
        held["order"] = max(held["order"], len(self.order))
        return fp

    monkeypatch.setattr(cached_put.CachedPuts, "request", watched)
    _tree(tmp_path / "src")
    (tmp_path / "srv").mkdir()
    with running_server(tmp_path / "srv") as srv:
        res = asyncio.run(asyncio.wait_for(run_put(
            [str(tmp_path / "src") + "/"], parse_url(srv.url("up") + "/"), TransferOptions(progress=False),
            JobOptions(recursive=True, sessions=2, progress=False)), 120))
    assert_same_tree(tmp_path / "src", tmp_path / "srv" / "up")
    assert seen["queue"] <= HIGH + PER_DIR, seen  # the walk waits while the queue is full
    assert 0 < held["order"] <= 2 * cached_put_ahead(), held  # (the files on the wire, not all it sent)
    _check_report(res)


def cached_put_ahead() -> int:
    from drsftp.client.trees.cached.worker import MAX_AHEAD

    return MAX_AHEAD["put"]


def test_the_report_keeps_failures_and_counts_the_rest_and_json_spools_every_record(tmp_path, monkeypatch):
    monkeypatch.setattr(resultmod, "KEEP_DONE", 10)
    out = tmp_path / "j.json"
    report = JobReport("get", False, 0, str(out))
    for i in range(200):
        report.record(FileOutcome(f"/x/f{i}", "ok" if i % 40 else "failed", error=None if i % 40 else "no"))
    res = report.result
    assert res.entries == 200 and res.count("failed") == 5 and res.count("ok") == 195
    assert len(res.outcomes) == 15 and sum(o.status == "failed" for o in res.outcomes) == 5
    res.write_json(str(out))
    rec = json.loads(out.read_text())
    assert [f["path"] for f in rec["files"]] == [f"/x/f{i}" for i in range(200)]
    assert rec["direction"] == "get" and "seconds" in rec and not os.listdir(tmp_path)[1:]  # (the spool is gone)


class _Owner:
    wanted = 1
    done = True
    files = ()


def test_a_streams_read_buffer_starts_small_and_grows_as_reads_fill_it():
    from drsftp.client.streams.modee.stream import FIRST_READ, BlockSink, ReadBuffer

    sink = _CachedSink(_Owner(), None)  # type: ignore[arg-type]
    assert len(sink.get_buffer(-1)) == FIRST_READ <= 64 << 10  # not read_chunk's 4 MiB
    buf = ReadBuffer(1 << 20)
    buf.used(100)
    assert len(buf.view) == FIRST_READ  # a part-filled read: no growth
    for _ in range(10):
        buf.used(len(buf.view))
    assert len(buf.view) == 1 << 20  # full reads: doubled up to the most
    assert BlockSink.get_buffer.__qualname__  # (the single transfer's sink shares ReadBuffer)


class _File:
    def __init__(self, size, moved=0):
        self.size, self.bytes = size, moved


def test_a_cached_session_of_small_files_ticks_its_streams_slowly():
    from drsftp.client.trees.cached.session import SMALL_TICK

    cs = object.__new__(CachedSession)
    cs.files = [_File(1000), _File(None), _File(5000, 100)]  # type: ignore[assignment]
    assert cs.tick_floor() == SMALL_TICK
    cs.files.append(_File(8 << 20))  # type: ignore[attr-defined]
    assert cs.tick_floor() == 0.0  # a window's worth on the wire: DRS's own ticks


def test_corked_commands_go_out_in_one_write():
    async def main():
        import socket

        a, b = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=a)
        ctl = ControlConnection(reader, writer, "h")
        writes: list[bytes] = []
        real = writer.write
        writer.write = lambda data: (writes.append(data), real(data))[1]  # type: ignore[method-assign]
        ctl.cork()
        for line in ("ALLO 5", "STOR x", "MFMT 20200101000000 y"):
            ctl.start(line)
        assert writes == []
        await asyncio.sleep(0)  # flushed at the next turn of the loop at the latest
        assert writes == [b"ALLO 5\r\nSTOR x\r\nMFMT 20200101000000 y\r\n"]
        ctl.start("NOOP")  # not corked: at once
        assert writes[-1] == b"NOOP\r\n"
        writer.close()
        ctl._task.cancel()
        b.close()

    asyncio.run(main())


def test_a_cached_get_replaces_an_old_part_file_rather_than_writing_through_it(tmp_path):
    root = tmp_path / "srv"
    (root / "t").mkdir(parents=True)
    (root / "t" / "f").write_bytes(b"new content")
    out = tmp_path / "out"
    out.mkdir()
    keep = tmp_path / "keep"
    keep.write_bytes(b"another file's bytes")
    os.link(keep, out / "f.part")  # an old .part hard-linked elsewhere: created anew, not truncated
    with running_server(root) as srv:
        res = asyncio.run(asyncio.wait_for(run_get(
            [(parse_url(srv.url("t") + "/"), True)], str(out), TransferOptions(progress=False),
            JobOptions(recursive=True, sessions=1, progress=False)), 60))
    assert res.count("ok") == 1, res.outcomes
    assert (out / "f").read_bytes() == b"new content" and keep.read_bytes() == b"another file's bytes"


def test_a_cached_sessions_stream_tuners_keep_no_timeline(monkeypatch):
    from drsftp.client.streams.modee.base import ModeESession
    from drsftp.client.trees.cached.get import CachedGets

    class _Writer:
        def get_extra_info(self, name):
            return None

    class _Ctl:
        writer = _Writer()

    for cls, kept in ((CachedGets, False), (ModeESession, True)):
        s = object.__new__(cls)
        s.opts, s.ctl = TransferOptions(progress=False), _Ctl()
        if cls is ModeESession:
            s.role = CachedGets.role  # type: ignore[attr-defined]
        assert s.new_tuner().timeline is kept  # (20,000 samples a stream, kept for hours, for no record)
