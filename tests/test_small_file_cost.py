"""What one small file costs `drsftp serve` on a cached MODE E stream
(globus-url-copy -fast): its replies go out together, its data in one send
with its EOD, its path is checked
without resolving the home again.  The
server runs in this process (its ioloop in a thread), its control sends
and sendfile calls counted; no timing."""

from __future__ import annotations

import contextlib
import os
import socket

import pytest
from conftest import PASSWORD, USER, in_thread, wait_until
from pyftpdlib.ioloop import IOLoop
from pyftpdlib.servers import FTPServer

from drsftp.ftp.eblock import BlockDecoder, Data, EndOfData, EndOfFile, data_header, eod
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ftp.facts import MlsxFilesystem

PAYLOAD = os.urandom(1000)
IDLE_TICK = 0.25  # s: an idle cached stream's pace (eblock/streams.py)


@contextlib.contextmanager
def serving(root, sent: list[bytes]):
    """An in-process server whose control connections record every send."""
    served = build_server(ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD))
    served.close()

    def send(self, data):
        n = served.handler.send(self, data)
        sent.append(bytes(data[:n]))
        return n

    server = FTPServer(("127.0.0.1", 0), type("Counted", (served.handler,), {"send": send}), ioloop=IOLoop())
    with in_thread(server, "drs-smallfile-ftpd") as port:
        yield port


class Ctl:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.f = self.sock.makefile("rb")
        assert self.reply().startswith("220")
        for line, code in ((f"USER {USER}", "331"), (f"PASS {PASSWORD}", "230"), ("TYPE I", "200"),
                           ("MODE E", "200")):
            assert self.cmd(line).startswith(code)

    def reply(self) -> str:
        line = self.f.readline().decode()
        while line[3:4] == "-":  # a multi-line reply: to its last line
            while not (more := self.f.readline().decode()).startswith(line[:3] + " "):
                pass
            line = more
        return line

    def cmd(self, line: str) -> str:
        self.sock.sendall(line.encode() + b"\r\n")
        return self.reply()

    def final(self) -> tuple[str, list[str]]:
        seen = []
        while (r := self.reply()).startswith("1"):
            seen.append(r)
        return r, seen


def settle(ctl: Ctl, sent: list[bytes]) -> None:
    """A NOOP's round trip, then no record: the server recorded what it
    sent before (it records a send after making it)."""
    reply = ctl.cmd("NOOP").encode()
    assert reply.startswith(b"200")
    assert wait_until(lambda: any(s.endswith(reply) for s in sent), timeout=10)
    sent.clear()


def read_file(conn) -> bytes:
    decoder, got = BlockDecoder(), bytearray()
    while True:
        buf = conn.recv(1 << 16)
        assert buf, "the stream closed before EOF"
        for ev in decoder.feed(buf):
            if isinstance(ev, Data):
                got[ev.offset:ev.offset + len(ev.data)] = ev.data
            elif isinstance(ev, EndOfFile):
                return bytes(got)


@contextlib.contextmanager
def cached_stream(root, sent: list[bytes], first: str):
    """A session (its control connection, its MODE E stream) whose RETR of
    ``first`` opened the stream the next RETRs reuse; ``sent`` cleared."""
    with serving(root, sent) as port, socket.create_server(("127.0.0.1", 0)) as listener:
        ctl = Ctl(port)
        p = listener.getsockname()[1]
        assert ctl.cmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}").startswith("200")
        ctl.sock.sendall(f"RETR {first}\r\n".encode())
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(20)
            assert read_file(conn) == (root / first).read_bytes()
            assert ctl.final()[0].startswith("226")
            settle(ctl, sent)
            yield ctl, conn
        ctl.sock.close()


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = os.sendfile

    def sendfile(*args):
        calls.append(args[3])
        return real(*args)

    monkeypatch.setattr(os, "sendfile", sendfile)
    return calls


def test_a_small_retr_on_a_cached_stream_is_one_send_of_data_and_one_of_replies(tmp_path, counted):
    (tmp_path / "small.bin").write_bytes(PAYLOAD)
    sent: list[bytes] = []
    with cached_stream(tmp_path, sent, "small.bin") as (ctl, conn):
        counted.clear()
        ctl.sock.sendall(b"RETR small.bin\r\n")  # on the cached stream
        assert read_file(conn) == PAYLOAD
        final, marks = ctl.final()
        assert wait_until(lambda: any(b"226 " in s for s in sent), timeout=10)  # (recorded after the send)
    assert final.startswith("226") and marks[0].startswith("125")
    # the data with its header and EOD in one send, no sendfile of 1000 bytes
    assert counted == []
    # 125 and 226 in one segment: they were one send
    assert [s for s in sent if b"125 " in s or b"226 " in s] == [s for s in sent if b"125 " in s and b"226 " in s]
    assert len([s for s in sent if b"226 " in s]) == 1


def test_a_small_stor_whose_blocks_came_first_answers_in_one_send(tmp_path):
    sent: list[bytes] = []
    with serving(tmp_path, sent) as port:
        ctl = Ctl(port)
        reply = ctl.cmd("PASV")
        nums = reply[reply.index("(") + 1:reply.index(")")].split(",")
        data = socket.create_connection(("127.0.0.1", int(nums[4]) * 256 + int(nums[5])), timeout=20)
        blocks = data_header(0, len(PAYLOAD)) + PAYLOAD + eod(eof_streams=1)
        with data:
            ctl.sock.sendall(b"STOR first.bin\r\n")
            data.sendall(blocks)
            assert ctl.final()[0].startswith("226")
            data.sendall(blocks)  # the next file's blocks, before its STOR (cached stream)
            settle(ctl, sent)  # (they are in the server's kernel by now)
            ctl.sock.sendall(b"STOR second.bin\r\n")
            final, marks = ctl.final()
            assert wait_until(lambda: any(b"226 " in s for s in sent), timeout=10)
        ctl.sock.close()
    assert final.startswith("226") and marks[0].startswith("125")
    assert (tmp_path / "second.bin").read_bytes() == PAYLOAD
    # the 125, the markers and the 226: one send
    assert len(sent) == 1 and b"125 " in sent[0] and b"226 " in sent[0], sent


def test_validpath_resolves_the_home_once_and_below_it_one_lstat_a_component(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "b" / "f").touch()
    fs = MlsxFilesystem(str(home), None)
    assert fs.validpath(str(home / "a"))  # the home resolved here
    calls = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    assert fs.validpath(str(home / "a" / "b" / "f"))
    assert calls == [str(home / "a"), str(home / "a" / "b"), str(home / "a" / "b" / "f")]


def test_validpath_agrees_with_pyftpdlibs_on_links_and_paths_outside(tmp_path):
    from pyftpdlib.filesystems import AbstractedFS

    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "b" / "f").touch()
    (home / "out").symlink_to(tmp_path)
    (home / "in").symlink_to(home / "a")
    (home / "rel").symlink_to("a")
    (tmp_path / "homelink").symlink_to(home)
    for root in (str(home), str(home) + "/", str(tmp_path / "homelink")):
        ours, stock = MlsxFilesystem(root, None), AbstractedFS(root, None)
        for p in (root, root.rstrip("/"), f"{home}/a", f"{home}/a/b/f", f"{home}/out", f"{home}/out/home",
                  f"{home}/in/b", f"{home}/rel/b/f", f"{home}/missing", f"{home}/missing/x", f"{home}/a/new",
                  f"{home}/../home/a", f"{home}/out/missing", str(tmp_path), "/",
                  f"{tmp_path}/homelink/a/b/f", f"{tmp_path}/homelink/out", root.rstrip("/") + "x"):
            assert ours.validpath(p) == stock.validpath(p), (root, p)


@pytest.fixture
def ticks(monkeypatch):
    """Every SocketTuner.tick, by the tuner's role."""
    from drsftp.io.tuner import SocketTuner

    seen: list[object] = []
    real = SocketTuner.tick

    def tick(self, *args, **kw):
        seen.append(self.role)
        return real(self, *args, **kw)

    monkeypatch.setattr(SocketTuner, "tick", tick)
    return seen


def test_a_cached_stream_between_small_files_ticks_at_the_idle_pace(tmp_path, ticks):
    import time

    (tmp_path / "small.bin").write_bytes(PAYLOAD)
    with serving(tmp_path, []) as port, socket.create_server(("127.0.0.1", 0)) as listener:
        ctl = Ctl(port)
        p = listener.getsockname()[1]
        assert ctl.cmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}").startswith("200")
        ctl.sock.sendall(b"RETR small.bin\r\n")
        conn, _ = listener.accept()
        with conn:
            assert read_file(conn) == PAYLOAD
            assert ctl.final()[0].startswith("226")
            time.sleep(IDLE_TICK)  # past the first ticks
            ticks.clear()
            time.sleep(2 * IDLE_TICK)  # cached, idle: at the idle pace two or three ticks (at 5 ms: 100)
            seen = len(ticks)
        ctl.sock.close()
    assert seen <= 4, seen


def test_small_stream_mode_files_are_sent_before_their_first_tick(tmp_path, ticks):
    import ftplib

    (tmp_path / "small.bin").write_bytes(PAYLOAD)
    with serving(tmp_path, []) as port:
        ftp = ftplib.FTP()
        ftp.connect("127.0.0.1", port, timeout=20)
        ftp.login(USER, PASSWORD)
        for _ in range(20):
            got = bytearray()
            ftp.retrbinary("RETR small.bin", got.extend)
            assert got == PAYLOAD
        ftp.quit()
    from drsftp.tuning import Role

    # the tick that came at once on every data channel: now one tick's time
    # later, after a small file's channel closed (a loaded machine may be late)
    assert ticks.count(Role.SENDER) < 10, ticks


def read_files(conn, n: int) -> list[bytes]:
    """``n`` files, one after the other on a cached stream (each to its EOF and EOD)."""
    decoder, files, got, pending = BlockDecoder(), [], bytearray(), b""
    while len(files) < n:
        buf = pending or conn.recv(1 << 16)
        assert buf, "the stream closed before the last file"
        events, used = decoder.feed_some(buf, stop_at_eod=True)
        pending = bytes(buf[used:])
        for ev in events:
            if isinstance(ev, Data):
                got[ev.offset:ev.offset + len(ev.data)] = ev.data
            elif isinstance(ev, EndOfData):
                files.append(bytes(got))
                got = bytearray()
                decoder.reset()
    return files


def test_pipelined_small_retrs_arrive_whole_and_their_replies_go_in_one_send(tmp_path):
    """Three RETRs in one read: each file whole with its EOD on the cached
    stream, then the six replies in one send on the control connection."""
    for name in ("a", "b", "c", "first"):
        (tmp_path / f"{name}.bin").write_bytes(name.encode() + PAYLOAD)
    sent: list[bytes] = []
    with cached_stream(tmp_path, sent, "first.bin") as (ctl, conn):
        ctl.sock.sendall(b"RETR a.bin\r\nRETR b.bin\r\nRETR c.bin\r\n")  # on the cached stream
        files = read_files(conn, 3)
        finals = [ctl.final() for _ in range(3)]
        assert wait_until(lambda: sum(s.count(b"226 ") for s in sent) == 3, timeout=10)
    assert files == [name + PAYLOAD for name in (b"a", b"b", b"c")]
    assert all(final.startswith("226") and marks[0].startswith("125") for final, marks in finals)
    assert len([s for s in sent if b"226 " in s]) == 1  # the replies: one send


def test_plain_paths_translate_as_pyftpdlib_translates_them():
    """ftp2fs and fs2ftp take a plain path as it is (no normalising): the
    same answer as pyftpdlib's, plain or not, under plain homes and others."""
    from pyftpdlib.filesystems import AbstractedFS

    from drsftp.ftp.safepath import client_path

    paths = ["/a", "/a/b", "a/b", "/a/../b", "/a/./b", "/a//b", "/a/", "/.x/y", "/..", "/...", "/a/..b", "", "/",
             "//a", "b/..", "/a/b/."]
    for root in ("/", "/srv/ftp", "/srv/ftp/", "/srv//ftp", "/srv/./ftp"):
        for cwd in ("/", "/a"):
            fs = MlsxFilesystem(root, None)
            fs.cwd = cwd
            for p in paths + [root + q for q in paths] + [root + "/" + q for q in paths]:
                assert fs.ftp2fs(p) == AbstractedFS.ftp2fs(fs, p), (root, cwd, p)
                asked = client_path(fs.root, os.path.join(fs.root, p))
                assert fs.fs2ftp(p) == (asked if asked is not None else AbstractedFS.fs2ftp(fs, p)), (root, p)
