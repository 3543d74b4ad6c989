"""What a resume may take as the part already held (docs/PARALLEL.md,
"Resume"): a --retries attempt continues only what its own run wrote,
never an older DEST or remote file of the final name; one stream takes
of a -P get's part file only the bytes up to its record's first gap."""

from __future__ import annotations

import asyncio
import os

import pytest
from conftest import running_server

from drsftp.client.session.control import FTPError
from drsftp.client.streams import parallel
from drsftp.client.streams.rangeplan import ResumeRecord, save_record
from drsftp.client.thirdparty.single import copy
from drsftp.client.transfer.attempts import with_retries
from drsftp.client.transfer.getput import TransferOptions, get, put
from drsftp.client.trees.cached import worker
from drsftp.client.trees.dataset import JobOptions, run_get
from drsftp.ftp.eblock import RangeSet
from drsftp.ftp.url import parse_url

NEW, OLD = b"N" * 200, b"O" * 100
M = 1 << 20


def _first_fails(inner):
    """``inner`` as a retried run whose first attempt fails before any
    data moves, as a server that is full at login does (421)."""
    calls = []

    async def run(o):
        calls.append(o)
        if len(calls) == 1:
            raise FTPError("421 Too many connections", transient=True)
        return await inner(o)

    return run, calls


def _retried(inner):
    run, calls = _first_fails(inner)
    res = asyncio.run(with_retries(run, TransferOptions(use_drs_command=False), 1, base_delay=0.01))
    assert len(calls) == 2
    return res


def test_a_get_retry_does_not_continue_an_older_dest(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(NEW)
    dest = tmp_path / "x"
    dest.write_bytes(OLD)  # an older local copy, and no --continue
    with running_server(root) as srv:
        loc = parse_url(srv.url("x"))
        res = _retried(lambda o: get(loc, str(dest), o))
    assert dest.read_bytes() == NEW
    assert res.resumed_from == 0


def test_a_parallel_get_retry_does_not_take_a_same_size_dest_as_complete(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(NEW)
    dest = tmp_path / "x"
    dest.write_bytes(b"O" * len(NEW))
    with running_server(root) as srv:
        loc = parse_url(srv.url("x"))
        _retried(lambda o: parallel.get(loc, str(dest), o, 2))
    assert dest.read_bytes() == NEW


def test_a_put_retry_does_not_continue_an_older_remote_file(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(OLD)  # an older remote copy
    src = tmp_path / "x"
    src.write_bytes(NEW)
    with running_server(root) as srv:
        loc = parse_url(srv.url("x"))
        _retried(lambda o: put(str(src), loc, o))
    assert (root / "x").read_bytes() == NEW


def test_a_parallel_put_retry_does_not_continue_an_older_remote_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # (its MODE E resume records)
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(OLD)
    src = tmp_path / "x"
    src.write_bytes(NEW)
    with running_server(root) as srv:
        loc = parse_url(srv.url("x"))
        _retried(lambda o: parallel.put(str(src), loc, o, 2))
    assert (root / "x").read_bytes() == NEW


def test_a_copy_retry_does_not_continue_an_older_destination_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_bytes(NEW)
    (b / "x").write_bytes(OLD)
    with running_server(a) as sa, running_server(b) as sb:
        src, dst = parse_url(sa.url("x")), parse_url(sb.url("x"))
        _retried(lambda o: copy(src, dst, o, 1))
    assert (b / "x").read_bytes() == NEW


def test_a_get_retry_continues_the_part_its_own_attempt_wrote(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(NEW)
    dest = tmp_path / "x"
    part = tmp_path / "x.part"
    calls = []

    async def run(o):
        calls.append(o)
        res = await get(loc, str(dest), o)
        if len(calls) == 1:  # the first attempt wrote the part, then "lost" the rest
            with open(part, "wb") as f:
                f.write(NEW[:150])
            dest.rename(tmp_path / "first")
            raise FTPError("short transfer", transient=True)
        return res

    with running_server(root) as srv:
        loc = parse_url(srv.url("x"))
        res = asyncio.run(with_retries(run, TransferOptions(use_drs_command=False), 1, base_delay=0.01))
    assert dest.read_bytes() == NEW
    assert res.resumed_from == 150


# -- a -P get's part file: ranges with holes between, its record beside it


def _parallel_part(dest, data, ranges):
    """What an interrupted `get -P N` leaves: ``ranges`` written, its record."""
    part = str(dest) + ".part"
    with open(part, "wb") as fp:
        for a, b in ranges:
            fp.seek(a)
            fp.write(data[a:b])
    save_record(part, ResumeRecord(len(data), None, RangeSet(ranges)))
    return part


@pytest.mark.parametrize(("ranges", "resumed"), [
    ([(3 * M, 4 * M)], 0),  # its last stream's range only: nothing from 0
    ([(0, M), (3 * M, 4 * M)], M),  # up to the first gap
])
def test_a_single_stream_continue_takes_no_hole_as_held(tmp_path, ranges, resumed):
    root = tmp_path / "srv"
    root.mkdir()
    data = os.urandom(4 * M)
    (root / "f").write_bytes(data)
    dest = tmp_path / "f"
    part = _parallel_part(dest, data, ranges)
    with running_server(root) as srv:
        res = asyncio.run(get(parse_url(srv.url("f")), str(dest), TransferOptions(use_drs_command=False, resume=True)))
    assert dest.read_bytes() == data
    assert res.resumed_from == resumed
    assert not os.path.exists(part + ".ranges")


@pytest.mark.parametrize("verify", [False, True])  # (True: the uncached path, REST from the walk's part size)
def test_a_tree_continue_takes_no_hole_as_held(tmp_path, verify):
    root = tmp_path / "srv"
    (root / "d").mkdir(parents=True)
    data = os.urandom(4 * M)
    (root / "d" / "f").write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    _parallel_part(out / "f", data, [(0, M), (3 * M, 4 * M)])
    with running_server(root) as srv:
        res = asyncio.run(asyncio.wait_for(run_get(
            [(parse_url(srv.url("d")), True)], str(out), TransferOptions(use_drs_command=False, verify=verify),
            JobOptions(recursive=True, sessions=1, resume=True)), 60))
    assert [o.status for o in res.outcomes] == ["ok"]
    assert (out / "f").read_bytes() == data


def test_sync_updates_a_big_changed_file_of_the_same_size(tmp_path, monkeypatch):
    """A file -r runs with streams of its own (worker.big_get), out of date
    by its mtime: fetched, not kept as "already complete" for its size."""
    monkeypatch.setattr(worker, "BIG_FILE", M)
    root = tmp_path / "srv"
    (root / "d").mkdir(parents=True)
    (root / "d" / "big").write_bytes(b"N" * 2 * M)  # the new version, now
    out = tmp_path / "out"
    out.mkdir()
    old = out / "big"
    old.write_bytes(b"O" * 2 * M)  # an older copy of the same size
    os.utime(old, (946684800, 946684800))  # (2000-01-01: older than the server's)
    with running_server(root) as srv:
        res = asyncio.run(asyncio.wait_for(run_get(
            [(parse_url(srv.url("d")), True)], str(out), TransferOptions(use_drs_command=False),
            JobOptions(recursive=True, sessions=1, sync=True)), 60))
    assert [o.status for o in res.outcomes] == ["ok"]
    assert old.read_bytes() == b"N" * 2 * M


def test_a_block_whose_write_failed_is_not_held(tmp_path):
    """A MODE E block the disk refused (ENOSPC) is not in the ledger a
    resume record is saved from (the record would call its zeros held)."""
    import errno
    from unittest import mock

    from drsftp.client.streams.modee import stream as st
    from drsftp.ftp import eblock
    from drsftp.ftp.eblock import ReceiveLedger

    class Owner:
        def __init__(self, fd, size):
            self.ledger, self.wanted, self.fd, self.failed = ReceiveLedger(limit=size), 2, fd, None

        def fail(self, exc):
            self.failed = exc

        def progress(self):
            pass

    part = str(tmp_path / "x.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        owner = Owner(fd, 200_000)
        later, first = st.BlockSink(owner, mock.Mock(bytes=0)), st.BlockSink(owner, mock.Mock(bytes=0))
        tail = eblock.data_header(100_000, 100_000) + b"T" * 100_000
        later.buf.view = memoryview(bytearray(tail))
        later.buffer_updated(len(tail))
        head = eblock.data_header(0, 100_000) + b"H" * 60_000
        first.buf.view = memoryview(bytearray(head))
        with mock.patch.object(st, "pwrite_all", side_effect=OSError(errno.ENOSPC, "No space left on device")):
            first.buffer_updated(len(head))
    finally:
        os.close(fd)
    assert owner.failed is not None
    assert list(owner.ledger.received) == [(100_000, 200_000)]  # (the written block only)
