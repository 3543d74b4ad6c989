"""Every transfer command gets exactly one final reply (RFC 959 4.2, 5.4),
whatever the client does with its data connection, and the session stays
usable after it (the NOOP that follows reads 200, not a stray reply).

Raw sockets on loopback; every read times out in seconds."""

import filecmp
import os
import re
import shutil
import socket
import subprocess
import time

import pytest
from conftest import PASSWORD, TCP_CLOSE_WAIT, USER, make_file, running_server, sha256_file, tcp_entry, wait_until

SIZE = 8 << 20  # larger than loopback's socket buffers: a stalled reader stalls the sender
TIMEOUT = 5.0


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("final")
    make_file(root / "f.bin", SIZE, seed=3)
    with running_server(root) as s:
        yield s


class Control:
    """A raw control connection: send a line, read whole replies."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = bytearray()
        assert self.reply().startswith("220")
        for line, code in ((f"USER {USER}", "331"), (f"PASS {PASSWORD}", "230"), ("TYPE I", "200")):
            assert self.cmd(line).startswith(code)

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(4096)  # socket.timeout after TIMEOUT s: the test fails
            if not chunk:
                raise EOFError("control connection closed")
            self.buf += chunk
        i = self.buf.index(b"\n") + 1
        text, self.buf[:i] = self.buf[:i].decode().rstrip("\r\n"), b""
        return text

    def reply(self):
        first = self.line()
        if first[3:4] == "-":  # multi-line: up to "NNN "
            while not self.line().startswith(first[:3] + " "):
                pass
        return first

    def send(self, line):
        self.sock.sendall(line.encode() + b"\r\n")

    def cmd(self, line):
        self.send(line)
        return self.reply()

    def pasv(self):
        nums = [int(n) for n in re.search(r"\((.*)\)", self.cmd("PASV")).group(1).split(",")]
        return socket.create_connection((".".join(map(str, nums[:4])), nums[4] * 256 + nums[5]),
                                        timeout=TIMEOUT)

    def data_state(self):
        """'waiting', 'open' or 'closed', from STAT (pyftpdlib's status lines)."""
        text = self.cmd_multi("STAT")
        return ("waiting" if "waiting for connection" in text
                else "open" if "Data connection open" in text else "closed")

    def cmd_multi(self, line):
        self.send(line)
        lines = [self.line()]
        if lines[0][3:4] == "-":
            while not lines[-1].startswith(lines[0][:3] + " "):
                lines.append(self.line())
        return "\n".join(lines)

    def final(self):
        """Skip 1xx marks; return the final reply."""
        r = self.reply()
        while r[:1] == "1":
            r = self.reply()
        return r

    def usable(self):
        """The next reply is NOOP's: nothing stray came before it."""
        assert self.cmd("NOOP").startswith("200")

    def close(self):
        self.sock.close()


@pytest.fixture
def ctl(srv):
    c = Control(srv.port)
    yield c
    c.close()


def wait_data_closed(ctl):
    """Until the server has accepted the data connection and seen it close."""
    deadline = time.monotonic() + TIMEOUT
    while ctl.data_state() != "closed":
        assert time.monotonic() < deadline, "the server never saw the data connection close"
        time.sleep(0.02)


def wait_data_open(ctl):
    deadline = time.monotonic() + TIMEOUT
    while ctl.data_state() != "open":
        assert time.monotonic() < deadline, "the server never accepted the data connection"
        time.sleep(0.02)


def read_all(data):
    got = bytearray()
    while chunk := data.recv(1 << 20):
        got += chunk
    return bytes(got)


# -- the data connection closed before the transfer starts --------------------------
@pytest.mark.parametrize("rest", [None, SIZE - 1000, SIZE])
def test_closed_before_retr_gets_425(ctl, srv, rest):
    """lftp pget's helpers: REST, close the data connection, RETR."""
    ctl.pasv().close()
    wait_data_closed(ctl)
    if rest is not None:
        assert ctl.cmd(f"REST {rest}").startswith("350")
    assert ctl.cmd("RETR f.bin").startswith("425")  # no 150: nothing to wait for
    ctl.usable()
    data = ctl.pasv()  # the REST was used up by the refused RETR: this RETR starts at 0
    ctl.send("RETR f.bin")
    with open(os.path.join(srv.root, "f.bin"), "rb") as f:
        assert read_all(data) == f.read()
    data.close()
    assert ctl.final().startswith("226")
    ctl.usable()


def test_closed_before_stor_gets_425(ctl, srv):
    ctl.pasv().close()
    wait_data_closed(ctl)
    assert ctl.cmd("STOR never.bin").startswith("425")
    ctl.usable()
    assert not os.path.exists(os.path.join(srv.root, "never.bin"))


def test_no_data_connection_at_all_gets_425(ctl):
    for cmd in ("RETR f.bin", "LIST", "NLST", "MLSD", "STOR x.bin", "APPE x.bin"):
        assert ctl.cmd(cmd).startswith("425"), cmd
    ctl.usable()


def test_a_missing_file_gets_550_before_any_425(ctl):
    """Without a data connection, RETR of a file that is not there (or STOR
    into a directory that is not there) is answered by what is wrong with
    it (550), not by the missing data connection (425)."""
    assert ctl.cmd("RETR no-such-file.bin").startswith("550")
    assert ctl.cmd("STOR no-such-dir/x.bin").startswith("550")
    assert ctl.cmd("RETR f.bin").startswith("425")  # the file is there: the connection is what is missing
    ctl.usable()


def test_the_commands_own_checks_answer_before_any_425(ctl):
    """REST past the end of the file is 554 (RFC 1123 4.1.3.4) and REST
    before APPE or STOU 450, as with a data connection: the 425 only
    replaces the 150 of a command that would start."""
    for cmd in ("RETR f.bin", "STOR f.bin"):
        assert ctl.cmd(f"REST {SIZE + 1}").startswith("350")
        assert ctl.cmd(cmd).startswith("554"), cmd
    assert ctl.cmd("REST 10").startswith("350")
    assert ctl.cmd("APPE x.bin").startswith("450")
    assert ctl.cmd("STOU").startswith("450")  # that REST is still pending: APPE did not run
    assert ctl.cmd("REST 0").startswith("350")
    ctl.usable()


def test_a_refused_upload_leaves_the_tree_as_it_was(ctl, srv):
    """STOU, APPE and STOR answered 425: STOU's file made for its unique
    name is gone again, APPE made no file, and STOR (with REST or without)
    left the part file of an interrupted upload as it was, to be resumed."""
    part = os.path.join(srv.root, ".g.bin.part")
    with open(part, "wb") as f:
        f.write(b"x" * 1000)
    try:
        before = sorted(os.listdir(srv.root))
        for cmd in ("STOU", "STOU g", "APPE new.bin", "STOR g.bin"):
            assert ctl.cmd(cmd).startswith("425"), cmd
        assert ctl.cmd("REST 1000").startswith("350")
        assert ctl.cmd("STOR g.bin").startswith("425")
        ctl.usable()
        assert sorted(os.listdir(srv.root)) == before
        assert os.path.getsize(part) == 1000
    finally:
        os.remove(part)


def test_closed_before_retr_handed_it_all_gets_426(ctl):
    """RETR's 1yz, then the client closes without reading: 8 MiB cannot
    all go into the socket buffers, so the server sees the close before
    its last byte (RFC 959: 426, connection closed, transfer aborted)."""
    data = ctl.pasv()
    r = ctl.cmd("RETR f.bin")
    assert r[:3] in ("125", "150"), r
    data.close()
    r = ctl.final()
    assert r.startswith("426"), r
    ctl.usable()


@pytest.mark.parametrize("rest", [SIZE - 1000, SIZE])
def test_closed_after_the_server_ended_the_retr_gets_226(ctl, rest):
    """What REST left near the end goes into the socket buffers at once;
    the server ends the transfer by closing (stream mode, RFC 959 3.4.1)
    and answers 226 then: a client that closes after that without reading
    changes nothing (stream mode cannot tell it from one that read it all)."""
    data = ctl.pasv()
    assert ctl.cmd(f"REST {rest}").startswith("350")
    r = ctl.cmd("RETR f.bin")
    assert r[:3] in ("125", "150"), r
    ours = (data.getsockname(), data.getpeername())
    assert wait_until(lambda: (tcp_entry(*ours) or ("",))[0] == TCP_CLOSE_WAIT, TIMEOUT), "the server never closed"
    data.close()
    r = ctl.final()
    assert r.startswith("226"), r
    ctl.usable()


def test_closed_during_transfer_gets_426(ctl):
    data = ctl.pasv()
    data.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    ctl.send("RETR f.bin")
    assert ctl.reply()[:3] in ("125", "150")
    got = 0
    while got < 1 << 20:
        got += len(data.recv(65536))
    data.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    data.close()  # RST: unread data
    r = ctl.reply()
    assert r.startswith("426"), r
    ctl.usable()


def test_closed_after_last_byte_gets_226(ctl):
    data = ctl.pasv()
    ctl.send("RETR f.bin")
    got = read_all(data)
    data.close()
    assert len(got) == SIZE
    assert ctl.final().startswith("226")
    ctl.usable()


def test_rest_at_size_sends_nothing_and_226(ctl):
    data = ctl.pasv()
    assert ctl.cmd(f"REST {SIZE}").startswith("350")
    ctl.send("RETR f.bin")
    assert read_all(data) == b""
    data.close()
    assert ctl.final().startswith("226")
    ctl.usable()


def test_rest_past_end_gets_554(ctl):
    data = ctl.pasv()
    assert ctl.cmd(f"REST {SIZE + 1}").startswith("350")
    assert ctl.cmd("RETR f.bin").startswith("554")  # RFC 1123 4.1.3.4
    ctl.usable()
    data.close()


# -- ABOR in every state ------------------------------------------------------------
def test_abor_with_nothing_open(ctl):
    assert ctl.cmd("ABOR").startswith("225")
    ctl.usable()


def test_abor_with_pasv_listening(ctl):
    ctl.cmd("PASV")
    assert ctl.cmd("ABOR").startswith("225")
    ctl.usable()


def test_abor_before_the_data_connection_comes(ctl):
    """RETR answered 150 and waits for the connection: 426 for it, 226 for ABOR."""
    ctl.cmd("PASV")
    assert ctl.cmd("RETR f.bin").startswith("150")
    ctl.send("ABOR")
    assert [ctl.reply()[:3], ctl.reply()[:3]] == ["426", "226"]
    ctl.usable()
    assert ctl.cmd("PASV").startswith("227")  # no transfer is left running


def test_abor_upload_before_first_byte(ctl, srv):
    """STOR on an open data connection, no byte sent yet (pyftpdlib
    answered a lone 225 here, leaving STOR without its reply)."""
    data = ctl.pasv()
    wait_data_open(ctl)
    assert ctl.cmd("STOR up.bin").startswith("125")
    ctl.send("ABOR")
    assert [ctl.reply()[:3], ctl.reply()[:3]] == ["426", "226"]
    ctl.usable()
    data.close()
    assert not os.path.exists(os.path.join(srv.root, "up.bin"))


def test_abor_data_connection_idle(ctl):
    data = ctl.pasv()
    wait_data_open(ctl)
    assert ctl.cmd("ABOR").startswith("225")
    ctl.usable()
    data.close()


def test_abor_during_transfer(ctl):
    data = ctl.pasv()
    data.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    ctl.send("RETR f.bin")
    assert ctl.reply()[:3] in ("125", "150")
    assert len(data.recv(65536)) > 0
    ctl.send("ABOR")
    assert [ctl.reply()[:3], ctl.reply()[:3]] == ["426", "226"]
    ctl.usable()
    data.close()


def test_abor_after_transfer(ctl):
    data = ctl.pasv()
    ctl.send("RETR f.bin")
    assert len(read_all(data)) == SIZE
    data.close()
    assert ctl.final().startswith("226")
    assert ctl.cmd("ABOR").startswith("225")
    ctl.usable()


# -- a real parallel-range client -----------------------------------------------------
LFTP_RUNS = 10
LFTP_SIZE = 24 << 20


@pytest.mark.parametrize("parts", [4, 8])
def test_lftp_pget_never_stalls(tmp_path, parts):
    """lftp pget's helpers close their data connections around REST/RETR
    when the first connection has moved the file; with net:timeout 3 a
    missing final reply shows as a retry, seen in the log."""
    lftp = shutil.which("lftp")
    assert lftp, "lftp is not installed (the peer this test needs)"
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "big.bin", LFTP_SIZE, seed=9)
    digest = sha256_file(src)
    dst = tmp_path / "got.bin"
    with running_server(root) as s:
        for run in range(LFTP_RUNS):
            if dst.exists():
                dst.unlink()
            script = (f"set net:timeout 3; set net:max-retries 1; set xfer:clobber on; "
                      f"open -u {USER},{PASSWORD} ftp://127.0.0.1:{s.port}; "
                      f"pget -n {parts} big.bin -o {dst}; quit")
            p = subprocess.run([lftp, "-d", "-e", script], check=False, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, (run, p.stderr[-2000:])
            stalls = [ln for ln in p.stderr.splitlines() if "Timeout" in ln or "timed out" in ln]
            assert not stalls, (run, stalls)
            assert filecmp.cmp(src, dst, shallow=False) and sha256_file(dst) == digest, run


def test_port_connection_serves_one_transfer(ctl, srv):
    """After a PORT transfer ends, a RETR without a new PORT/PASV gets 425
    (pyftpdlib keeps the used connector: it answered 150 and waited)."""
    lst = socket.create_server(("127.0.0.1", 0))
    lst.settimeout(TIMEOUT)
    port = lst.getsockname()[1]
    assert ctl.cmd(f"PORT 127,0,0,1,{port >> 8},{port & 255}").startswith("200")
    data, _ = lst.accept()
    lst.close()
    assert ctl.cmd(f"REST {SIZE - 10}").startswith("350")
    ctl.send("RETR f.bin")
    assert len(read_all(data)) == 10
    data.close()
    assert ctl.final().startswith("226")
    assert ctl.cmd("RETR f.bin").startswith("425")
    ctl.usable()


def test_port_to_nobody_then_retr(ctl):
    """PORT to a closed port: PORT gets 425; the RETR after it gets 425 too,
    not a 150 that waits for the connection that failed."""
    lst = socket.create_server(("127.0.0.1", 0))
    port = lst.getsockname()[1]
    lst.close()
    assert ctl.cmd(f"PORT 127,0,0,1,{port >> 8},{port & 255}").startswith("425")
    assert ctl.cmd("RETR f.bin").startswith("425")
    ctl.usable()
