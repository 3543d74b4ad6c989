"""The transfer log under interrupts: every RETR of a download on byte
ranges is logged exactly once, in whatever order its sessions' ends and
closes come (drsftp/server/ops/translog.py RangedDownloads, sans-IO, as a
property over interleavings), and a killed put or ``get -P 4`` against a
real `drsftp serve` has exactly one line, with the client's path."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

from conftest import make_file, running_server, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_eblock_server import Ctl
from test_translog import _records

from drsftp.client.streams import parallel
from drsftp.client.transfer.getput import TransferOptions
from drsftp.ftp.url import parse_url
from drsftp.server.ops import translog

SIZE = 1000
KEYS = [("192.0.2.1", "u", "/f.bin"), ("192.0.2.1", "u", "/g.bin")]

# One RETR: which file, from where, how many bytes; the last RETR of a
# session may end after its session closed (the data connection outlived
# the control one: an interrupted client).
retr = st.tuples(st.sampled_from([0, 1]), st.integers(0, SIZE - 1), st.integers(0, SIZE))
session_plan = st.tuples(st.lists(retr, min_size=1, max_size=3), st.booleans())


def _events(session, plan):
    """The session's events in its own order: start, end, ..., close."""
    retrs, end_after_close = plan
    out = []
    for i, (k, offset, nbytes) in enumerate(retrs):
        part = translog.RangeRetr(session, f"192.0.2.1:{session}", offset, min(nbytes, SIZE - offset), SIZE,
                                  0.0, 1.0, False, False)
        out.append(("start", session, KEYS[k], part))
        if i == len(retrs) - 1 and end_after_close:
            out += [("close", session, None, None), ("end", session, KEYS[k], part)]
        else:
            out.append(("end", session, KEYS[k], part))
    if out[-1][0] != "close" and not (end_after_close and out[-2][0] == "close"):
        out.append(("close", session, None, None))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=st.lists(session_plan, min_size=1, max_size=4), data=st.data())
def test_every_part_is_logged_exactly_once_whatever_the_order_of_ends_and_closes(plans, data):
    queues = [_events(s, plan) for s, plan in enumerate(plans, 1)]
    rd = translog.RangedDownloads()
    logged: list[translog.RangeRetr] = []  # every part in a line (a whole RETR is a line of its own)
    parts = []
    while any(queues):
        q = data.draw(st.sampled_from([q for q in queues if q]))
        what, session, key, part = q.pop(0)
        if what == "start":
            ended = rd.started(key, session)
        elif what == "end":
            parts.append(part)
            whole, ended = rd.ended(key, part)
            if whole:
                logged.append(part)
        else:
            ended = rd.left(session)
        for _, line in ended:
            assert line, "a line with no part"
            logged += line
    assert sorted(map(id, logged)) == sorted(map(id, parts))  # each part once, none lost
    assert rd._downloads == {} and rd._closed == {}  # nothing held once every session has gone


def test_an_end_after_its_sessions_close_is_logged_and_holds_nothing():
    """The case seen live: ``get -P 4`` interrupted, one session's close
    handled before its RETR's end; neither that download nor a later one of
    the file by the same client was ever logged."""
    rd = translog.RangedDownloads()
    key = KEYS[0]
    for s in (1, 2):
        rd.started(key, s)
    rd.ended(key, translog.RangeRetr(2, "p", 500, 100, SIZE, 0.0, 1.0, False, False))
    assert rd.left(2) == [] and rd.left(1) == []  # 1's RETR still runs
    whole, ended = rd.ended(key, translog.RangeRetr(1, "p", 0, 200, SIZE, 0.0, 1.0, False, False))
    assert not whole and [len(p) for _, p in ended] == [2]
    rd.started(key, 3)  # the --continue, from a new session
    rd.ended(key, translog.RangeRetr(3, "p", 200, 300, SIZE, 0.0, 1.0, False, False))
    [(_, later)] = rd.left(3)
    assert [p.session for p in later] == [3]


# -- end to end ---------------------------------------------------------------------------


def _reset(sock):
    """Close ``sock`` with a reset, as the kernel does for a killed client
    with unread data."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_killed_put_has_one_line_with_the_clients_path_and_no_server_path(tmp_path):
    root = tmp_path / "srv"
    (root / "in").mkdir(parents=True)
    log_file = tmp_path / "t.log"
    with running_server(root, "--log-file", str(log_file), "--log-format", "json") as srv:
        ctl = Ctl(srv.port)
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        ctl.sock.sendall(b"STOR in/up.bin\r\n")
        assert ctl.reply()[0] in ("125", "150")  # (125: the data connection was accepted first)
        data.sendall(b"x" * 200_000)
        assert wait_until(lambda: os.path.exists(root / "in" / ".up.bin.part"), 15)
        time.sleep(0.3)  # the server reads what was sent
        _reset(data)  # the client killed: both connections reset
        ctl.f.close()  # (the reader holds the socket open)
        _reset(ctl.sock)
        assert wait_until(lambda: _records(log_file, "transfer"), 15)
        time.sleep(0.5)  # a second line would come now
    [rec] = _records(log_file, "transfer")
    assert (rec["path"], rec["direction"], rec["complete"]) == ("/in/up.bin", "put", False)
    assert str(root) not in log_file.read_text()


def test_an_interrupted_parallel_get_and_its_continue_have_one_line_each(tmp_path, monkeypatch):
    """``get -P 4`` on byte ranges (stream mode: four sessions, each REST +
    RETR of its quarter) whose client dies mid-transfer, every connection
    reset in turn, then ``get -P 4 --continue``: one line each, with the
    client's path (the interrupted one was not logged, nor any later one
    of that file by that user)."""
    root = tmp_path / "srv"
    root.mkdir()
    size = 32 << 20
    make_file(root / "big.bin", size)
    log_file = tmp_path / "t.log"
    with running_server(root, "--log-file", str(log_file), "--log-format", "json") as srv:
        held = []
        for i in range(4):
            ctl = Ctl(srv.port)
            data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
            assert ctl.cmd(f"REST {i * size // 4}")[0] == "350"
            ctl.sock.sendall(b"RETR big.bin\r\n")
            assert ctl.reply()[0] in ("125", "150")
            data.recv(65536)  # the transfer is under way; the rest waits in the buffers
            held.append((ctl, data))
        for n, (ctl, data) in enumerate(held):  # the client killed: its sockets go in no set order
            ctl.f.close()  # (the reader holds the socket open)
            for sock in (ctl.sock, data) if n % 2 else (data, ctl.sock):
                _reset(sock)
        assert wait_until(lambda: len(_records(log_file, "transfer")) == 1, 20), log_file.read_text()
        monkeypatch.setattr(parallel, "extended_block", lambda ctl: False)  # a server without PARALLEL
        out = tmp_path / "big.bin"
        with open(out, "wb") as f:
            f.write((root / "big.bin").read_bytes()[: size // 8])  # what the interrupted get had written
        asyncio.run(parallel.get(parse_url(srv.url("big.bin")), str(out), TransferOptions(progress=False,
                                                                                       resume=True), 4))
        assert wait_until(lambda: len(_records(log_file, "transfer")) == 2, 20), _records(log_file, "transfer")
        time.sleep(0.5)  # a third line would come now
    recs = _records(log_file, "transfer")
    assert [(r["path"], r["direction"], r["complete"]) for r in recs] == [("/big.bin", "get", False),
                                                                          ("/big.bin", "get", True)], recs
    assert str(root) not in log_file.read_text()


def test_the_clients_path_survives_the_sessions_close():
    """A data connection that outlives its session (a killed client, an
    orphaned third-party copy) is logged by the client's path: pyftpdlib
    has dropped the session's filesystem by then, and the server path was
    logged instead."""
    h = translog.TransferLogMixin()
    h.fs = None
    h._home = "/srv/home"
    assert h._ftp_path("/srv/home/in/.up.bin.part") == "/in/.up.bin.part"
    assert h._ftp_path("/elsewhere/x.bin") == "/x.bin"  # never a server path
