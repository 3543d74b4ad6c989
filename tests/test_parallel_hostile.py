"""A hostile MODE E server against `drsftp get -P 2`: blocks past the size,
overlapping blocks in either order, EOD counts that do not add up, a
stream that never ends, a data connection from another address.  The
client ends with one plain line and a non-zero exit, keeps in its .part
the blocks it accepted and nothing of a refused one (their bytes differ
from the file's), and never renames a bad .part into place."""

import os
import socket
import threading
import time

import pytest
from conftest import drsftp, tcp_entry, wait_until

from drsftp.ftp.eblock import data_header, eod

SIZE = 1000
DATA = bytes(range(256)) * 4 # 1024 bytes; the file is DATA[:SIZE]


class FakeServer:
    """One FTP session in a thread: FEAT lists PARALLEL; RETR runs ``script(port_addr)``."""

    def __init__(self, script):
        self.script = script
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.port = self.lst.getsockname()[1]
        self.errors = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.lst.settimeout(30)
            conn, _ = self.lst.accept()
            conn.settimeout(30)
            with conn, conn.makefile("rb") as rf:
                def say(text):
                    conn.sendall(text.encode() + b"\r\n")

                say("220 fake")
                addr = None
                for _ in range(100):  # bounded session
                    line = rf.readline().decode().strip()
                    if not line:
                        return
                    verb, _, arg = line.partition(" ")
                    verb = verb.upper()
                    if verb == "USER":
                        say("331 pass")
                    elif verb == "PASS":
                        say("230 in")
                    elif verb == "FEAT":
                        say("211-Extensions\r\n PARALLEL\r\n SIZE\r\n211 End.")
                    elif verb in ("TYPE", "MODE", "OPTS"):
                        say("200 ok")
                    elif verb == "SIZE":
                        say(f"213 {SIZE}")
                    elif verb == "PORT":
                        n = [int(x) for x in arg.split(",")]
                        addr = (".".join(map(str, n[:4])), n[4] * 256 + n[5])
                        say("200 PORT ok")
                    elif verb == "RETR":
                        say("150 sending")
                        self.script(addr)
                        say("226 done")
                    elif verb == "QUIT":
                        say("221 bye")
                        return
                    else:
                        say("500 no")
        except OSError as exc:  # the client may close first; noted, not fatal
            self.errors.append(exc)
        finally:
            self.lst.close()

    def stop(self):
        self.thread.join(30)


def _stream(addr, source="127.0.0.1"):
    s = socket.create_connection(addr, timeout=10, source_address=(source, 0))
    return s


def _blocks(s, *parts):
    for p in parts:
        s.sendall(p)


def _get(tmp_path, script, *extra):
    srv = FakeServer(script)
    dest = str(tmp_path / "out.bin")
    try:
        r = drsftp("get", "-P", "2", f"ftp://u:p@127.0.0.1:{srv.port}/f.bin", dest, "--progress", "never",
                   "--timeout", "3", *extra, timeout=60)
    finally:
        srv.stop()
    return r, dest


def _one_line_failure(r, dest, words, kept=b""):
    """``kept``: what the .part holds, the accepted blocks at their offsets."""
    assert r.returncode == 1 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("drsftp: error:") and words in last, r.stderr
    assert not os.path.exists(dest)  # never renamed into place
    with open(dest + ".part", "rb") as f:  # (kept for --continue)
        assert f.read() == kept


def _read_by_peer(sock):
    """Whether the peer (on this host) has read all ``sock`` sent it."""
    entry = tcp_entry(sock.getpeername(), sock.getsockname())
    return entry is not None and entry[1] == 0


def test_block_past_the_size(tmp_path):
    def script(addr):
        with _stream(addr) as s:
            _blocks(s, data_header(SIZE - 10, 100), DATA[:100], eod(eof_streams=1))
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "past the limit")


def test_overlapping_blocks(tmp_path):
    def script(addr):
        with _stream(addr) as s:
            _blocks(s, data_header(0, 100), DATA[:100], data_header(50, 100), b"X" * 100, eod(eof_streams=1))
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "overlaps", DATA[:100])


def test_a_block_running_into_a_range_received_before_it(tmp_path):
    """The higher block first, then a lower one reaching into it (any
    block may come first: GFD.20)."""
    def script(addr):
        with _stream(addr) as s:
            _blocks(s, data_header(100, 100), DATA[100:200], data_header(0, 101), b"X" * 101, eod(eof_streams=1))
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "overlaps", b"\0" * 100 + DATA[100:200])


def test_more_eods_than_the_count(tmp_path):
    def script(addr):
        with _stream(addr) as a, _stream(addr) as b:
            _blocks(b, eod())  # a second EOD for a transfer the EOF says has one
            # read first (after completion it would be moot)
            assert wait_until(lambda: _read_by_peer(b), 20), "the client never read the EOD"
            _blocks(a, data_header(0, SIZE), DATA[:SIZE], eod(eof_streams=1))
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "EOD", DATA[:SIZE])


def test_a_stream_that_never_sends_eod(tmp_path):
    held = []

    def script(addr):
        s = _stream(addr)
        held.append(s)  # stays open, all data and no EOD/EOF
        _blocks(s, data_header(0, SIZE), DATA[:SIZE])
    r, dest = _get(tmp_path, script)
    for s in held:
        s.close()
    _one_line_failure(r, dest, "stalled", DATA[:SIZE])


def test_empty_block_headers_do_not_keep_a_stalled_get_alive(tmp_path):
    def script(addr):
        with _stream(addr) as s:
            _blocks(s, data_header(0, SIZE), DATA[:SIZE])
            for _ in range(400):  # (20 s at most: an empty header every 50 ms, never an EOD)
                try:
                    s.sendall(data_header(SIZE, 0))
                except OSError:
                    break  # (the client gave up)
                time.sleep(0.05)
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "stalled", DATA[:SIZE])


def test_a_data_connection_from_another_address_is_refused(tmp_path):
    seen = {}

    def script(addr):
        with _stream(addr, source="127.0.0.2") as foreign:
            foreign.sendall(data_header(0, 10) + b"x" * 10)  # would land at offset 0
            foreign.settimeout(10)
            try:
                seen["foreign"] = foreign.recv(1)  # b"": the client closed it
            except OSError as exc:
                seen["foreign"] = exc
        with _stream(addr) as s:
            _blocks(s, data_header(0, SIZE), DATA[:SIZE], eod(eof_streams=1))
    r, dest = _get(tmp_path, script)
    assert r.returncode == 0, r.stderr
    assert seen["foreign"] == b"" or isinstance(seen["foreign"], ConnectionResetError)
    with open(dest, "rb") as f:
        assert f.read() == DATA[:SIZE]
    assert "refused a data connection from 127.0.0.2" in r.stderr


@pytest.mark.parametrize("count", [0, 1 << 17])
def test_an_eod_count_out_of_range(tmp_path, count):
    def script(addr):
        with _stream(addr) as s:
            _blocks(s, data_header(0, SIZE), DATA[:SIZE], bytes([0x48]) + (0).to_bytes(8, "big")
                    + count.to_bytes(8, "big"))
    r, dest = _get(tmp_path, script)
    _one_line_failure(r, dest, "EOD count")  # (one read: the decoder refuses it before the block is written)
