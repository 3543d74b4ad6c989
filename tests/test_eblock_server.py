"""drsftp serve in extended block mode (MODE E, GFD.20): GridFTP's own
client against it, and raw-socket peers that break the rules."""

import os
import select
import socket
import struct
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest
from conftest import PASSWORD, USER, make_file, running_server, sha256_file, wait_until

from drsftp.ftp.eblock import (
    BlockDecoder,
    Desc,
    EndOfData,
    EndOfFile,
    ReceiveLedger,
    header,
)
from drsftp.server.ftp.eblock.streams import Limits, Stream
from drsftp.tuning import Role

SIZE = 24 << 20


def guc(*args, timeout=60):
    """globus-url-copy; a missing program fails the test (FileNotFoundError)."""
    r = subprocess.run(["globus-url-copy", *args], check=False, capture_output=True, text=True, timeout=timeout)
    r.log = r.stdout + r.stderr  # -dbg's trace
    return r


def url(srv, path):
    return f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{path}"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "srv"
    r.mkdir()
    make_file(r / "big.bin", SIZE, seed=7)
    return r


def files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


# -- globus-url-copy ------------------------------------------------------------------


@pytest.mark.parametrize("flags", [["-p", "4"], ["-p", "4", "-fast"], ["-p", "4", "-tcp-bs", "1M"]])
def test_globus_get_put_parallel(root, tmp_path, flags):
    out = tmp_path / "out.bin"
    with running_server(root) as srv:
        r = guc("-dbg", *flags, url(srv, "big.bin"), f"file://{out}")
        assert r.returncode == 0, r.stderr
        assert "OPTS RETR Parallelism=4,4,4;" in r.log and "MODE E" in r.log
        assert sha256_file(out) == sha256_file(root / "big.bin")
        r = guc("-dbg", *flags, f"file://{out}", url(srv, "up.bin"))
        assert r.returncode == 0, r.stderr
        if "-tcp-bs" in flags:  # FEAT lists SBUF: the client sizes the streams with it
            assert "200 SBUF 1048576." in r.log
    assert sha256_file(root / "up.bin") == sha256_file(out)
    assert not os.path.exists(root / ".up.bin.part")


def test_globus_fast_reuses_streams_across_files(root, tmp_path):
    """-fast with a list: the second and third transfers reuse the cached
    streams (125), gets and puts, an empty file among them."""
    make_file(root / "small.bin", 100_000, seed=3)
    (root / "empty").write_bytes(b"")
    names = ["big.bin", "small.bin", "empty"]
    with running_server(root) as srv:
        lst = tmp_path / "get.lst"
        lst.write_text("".join(f"{url(srv, n)} file://{tmp_path}/g-{n}\n" for n in names))
        r = guc("-dbg", "-fast", "-p", "4", "-f", str(lst))
        assert r.returncode == 0, r.stderr
        assert r.log.count("reusing existing data connection") == 2
        lst = tmp_path / "put.lst"
        lst.write_text("".join(f"file://{tmp_path}/g-{n} {url(srv, 'p-' + n)}\n" for n in names))
        r = guc("-dbg", "-fast", "-p", "4", "-f", str(lst))
        assert r.returncode == 0, r.stderr
        assert r.log.count("reusing existing data connection") == 2
        assert "111 Range Marker 0-25165824" in r.log and "112-Perf Marker" in r.log
    for n in names:
        assert (root / f"p-{n}").read_bytes() == (root / n).read_bytes() == (tmp_path / f"g-{n}").read_bytes()


def test_globus_recursive_mlsd_over_mode_e(root, tmp_path):
    d = root / "d"
    (d / "sub").mkdir(parents=True)
    make_file(d / "a", 300_000, seed=4)
    (d / "sub" / "b").write_bytes(b"hi\n")
    (d / "empty").write_bytes(b"")
    with running_server(root) as srv:
        r = guc("-dbg", "-r", "-cd", "-fast", "-p", "2", url(srv, "d/"), f"file://{tmp_path}/copy/")
        assert r.returncode == 0, r.stderr
        assert "MLSD /d/" in r.log
        # and back up, pipelined (-pp): MKD, then STORs over the cached streams
        r = guc("-dbg", "-r", "-cd", "-fast", "-pp", "-p", "2", f"file://{tmp_path}/copy/", url(srv, "up/"))
        assert r.returncode == 0, r.stderr
    assert files_under(tmp_path / "copy") == files_under(d) == files_under(root / "up")
    for f in files_under(d):
        assert (tmp_path / "copy" / f).read_bytes() == (d / f).read_bytes() == (root / "up" / f).read_bytes()


# -- a raw MODE E client ------------------------------------------------------------------


class Ctl:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.f = self.sock.makefile("rb")
        assert self.reply()[0] == "220"
        assert self.cmd(f"USER {USER}")[0] == "331"
        assert self.cmd(f"PASS {PASSWORD}")[0] == "230"
        assert self.cmd("TYPE I")[0] == "200"

    def reply(self):
        line = self.f.readline().decode()
        code, lines = line[:3], [line]
        if line[3:4] == "-":
            while not (line := self.f.readline().decode()).startswith(code + " "):
                lines.append(line)
            lines.append(line)
        return code, "".join(lines)

    def final(self):
        """The next reply that is not a preliminary (1yz) one; markers seen."""
        seen = []
        while (r := self.reply())[0].startswith("1"):
            seen.append(r[1])
        return r[0], r[1], seen

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\r\n")
        return self.reply()

    def pasv(self):
        code, text = self.cmd("PASV")
        assert code == "227", text
        nums = text[text.index("(") + 1:text.index(")")].split(",")
        return int(nums[4]) * 256 + int(nums[5])

    def close(self):
        self.sock.close()


def put_mode_e(ctl, name, allo=None):
    """MODE E, PASV, ALLO, STOR: returns the data port (STOR answered 150)."""
    assert ctl.cmd("MODE E")[0] == "200"
    port = ctl.pasv()
    if allo is not None:
        assert ctl.cmd(f"ALLO {allo}")[0] == "200"
    assert ctl.cmd(f"STOR {name}")[0] == "150"
    return port


def block(offset, data):
    return header(0, len(data), offset) + data


def stream(port, src="127.0.0.1"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src, 0))
    return s


def closed_by_peer(s):
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def honest_upload_beside(srv, root, payload, hostile):
    """An honest two-stream upload in another session runs around the
    hostile test ``hostile()``: it must finish intact."""
    ctl = Ctl(srv.port)
    port = put_mode_e(ctl, "honest.bin", allo=len(payload))
    a, b = stream(port), stream(port)
    half = len(payload) // 2
    a.sendall(block(0, payload[:half]))
    hostile()
    b.sendall(block(half, payload[half:]) + header(Desc.EOD, 0, 0))
    a.sendall(header(Desc.EOD | Desc.EOF, 0, 2))
    code, text, _ = ctl.final()
    assert code == "226", text
    assert (root / "honest.bin").read_bytes() == payload
    ctl.close()
    a.close()
    b.close()


FRAGMENTS = 70000  # one-byte blocks with a hole between each: past the 65536 ranges an upload may hold

HOSTILE = {
    # name: (ALLO or None, bytes one stream sends, the final reply's code,
    # what the .part holds after: the accepted blocks at their offsets and
    # nothing of a refused one, whose bytes differ from every accepted
    # block's; b"": no part file left, or an empty one)
    "past ALLO": (1000, lambda: block(990, b"x" * 20), "451", b""),
    "past the server's limit": (None, lambda: block(1 << 50, b"x" * 20), "451", b""),
    "count over the bound": (None, lambda: header(0, 1 << 40, 0) + b"x" * 100, "451", b""),
    "overlap": (None, lambda: block(0, b"a" * 100) + block(50, b"b" * 100), "451", b"a" * 100),
    # the lower block second, running into the range received first
    "overlap into a range above": (None, lambda: block(100, b"h" * 100) + block(0, b"l" * 101), "451",
                                   b"\0" * 100 + b"h" * 100),
    "duplicate": (None, lambda: block(0, b"a" * 100) + block(0, b"d" * 100), "451", b"a" * 100),
    # (more EODs than the EOD count need two streams: tests/test_eblock_early_blocks.py;
    # on one stream a second EOD is the next transfer's)
    "EOF twice": (None, lambda: header(Desc.EOF, 0, 2) + header(Desc.EOF, 0, 2), "451", b""),
    "unknown descriptor": (None, lambda: header(0x01, 0, 0), "451", b""),
    "too fragmented": (None, lambda: b"".join(block(2 * i, b"f") for i in range(FRAGMENTS)), "451",
                       b"f\0" * 65535 + b"f"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_blocks_get_a_clear_reply(root, case):
    allo, payload, want, kept = HOSTILE[case]
    before = files_under(root.parent)
    with running_server(root) as srv:
        result = {}

        def hostile():
            ctl = Ctl(srv.port)
            port = put_mode_e(ctl, "evil.bin", allo=allo)
            s = stream(port)
            s.sendall(payload())
            result["final"] = ctl.final()
            result["closed"] = closed_by_peer(s)
            ctl.close()

        honest_upload_beside(srv, root, os.urandom(3 << 20), hostile)
        code, text, _ = result["final"]
        assert code == want, text
        assert result["closed"]  # the transfer's streams are dropped
        assert Ctl(srv.port).cmd("NOOP")[0] == "200"  # the server stays up
    after = files_under(root.parent)
    assert not os.path.exists(root / "evil.bin")  # never renamed into place
    assert set(after) - set(before) <= {"srv/.evil.bin.part", "srv/honest.bin"}
    part = root / ".evil.bin.part"
    assert (part.read_bytes() if part.exists() else b"") == kept  # the accepted blocks, nothing refused


def test_no_eod_ends_with_426_and_keeps_the_part(root):
    with running_server(root, "--data-timeout", "1.5") as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "slow.bin", allo=1000)
        s = stream(port)
        s.sendall(block(0, b"z" * 500))
        code, text, _ = ctl.final()
        assert code == "426", text
        assert (root / ".slow.bin.part").read_bytes()[:500] == b"z" * 500
        assert not (root / "slow.bin").exists()
        # and REST with the range held resumes it
        assert ctl.cmd("REST 0-500")[0] == "350"
        assert ctl.cmd("STOR slow.bin")[0] == "150"  # the listener stays; old streams were dropped
        s2 = stream(port)
        s2.sendall(block(500, b"y" * 500) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, markers = ctl.final()
        assert code == "226", text
        assert any("111 Range Marker 0-1000" in m for m in markers)
        assert (root / "slow.bin").read_bytes() == b"z" * 500 + b"y" * 500


def test_eod_count_short_of_streams_times_out(root):
    """EOF announces 3 EODs, 2 come: never complete; the data timeout ends it."""
    with running_server(root, "--data-timeout", "1.5") as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "short.bin")
        a, b = stream(port), stream(port)
        a.sendall(block(0, b"a" * 10) + header(Desc.EOD | Desc.EOF, 0, 3))
        b.sendall(block(10, b"b" * 10) + header(Desc.EOD, 0, 0))
        code, text, _ = ctl.final()
        assert code == "426", text
        assert not (root / "short.bin").exists()


def test_allo_size_short_is_incomplete(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "gap.bin", allo=300)
        s = stream(port)
        s.sendall(block(0, b"a" * 100) + block(200, b"c" * 100) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "451" and "200 of 300" in text, text
        assert not (root / "gap.bin").exists() and (root / ".gap.bin.part").exists()


def test_stream_limits_per_session_and_server(root):
    payload = os.urandom(1 << 20)
    with running_server(root, "--max-streams", "2", "--max-streams-total", "3") as srv:
        c1 = Ctl(srv.port)
        p1 = put_mode_e(c1, "one.bin", allo=len(payload))
        a, b = stream(p1), stream(p1)
        extra = stream(p1)  # the session's third: refused
        assert closed_by_peer(extra)
        c2 = Ctl(srv.port)
        p2 = put_mode_e(c2, "two.bin", allo=4)
        d = stream(p2)
        over = stream(p2)  # the server's fourth: refused
        assert closed_by_peer(over)
        d.sendall(block(0, b"abcd") + header(Desc.EOD | Desc.EOF, 0, 1))
        assert c2.final()[0] == "226"
        a.sendall(block(0, payload[:1000]) + header(Desc.EOD, 0, 0))
        b.sendall(block(1000, payload[1000:]) + header(Desc.EOD | Desc.EOF, 0, 2))
        assert c1.final()[0] == "226"
    assert (root / "one.bin").read_bytes() == payload
    assert (root / "two.bin").read_bytes() == b"abcd"


def test_data_connection_from_another_address_is_refused(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "addr.bin", allo=4)
        foreign = stream(port, src="127.0.0.2")
        assert closed_by_peer(foreign)
        s = stream(port)
        s.sendall(block(0, b"good") + header(Desc.EOD | Desc.EOF, 0, 1))
        assert ctl.final()[0] == "226"
    assert (root / "addr.bin").read_bytes() == b"good"


def test_mode_e_commands(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        _, feat = ctl.cmd("FEAT")
        assert " PARALLEL\r\n" in feat and " DCAU\r\n" in feat
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("DCAU N")[0] == "200"
        assert ctl.cmd("DCAU A")[0] == "504"
        assert ctl.cmd("SBUF 1048576")[0] == "200"
        assert ctl.cmd("SBUF x")[0] == "501"
        assert ctl.cmd('SITE CLIENTINFO appname="t";')[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=4,4,4;")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=0,0,0;")[0] == "501"
        assert ctl.cmd("OPTS RETR Parallelism=65,65,65;")[0] == "501"
        assert ctl.cmd("RETR big.bin")[0] == "425"  # no PORT yet
        assert ctl.cmd("PORT 10,9,8,7,200,1")[0] == "501"  # another host (RFC 2577: no bounce)
        assert ctl.cmd("PORT 127,0,0,1,0,80")[0] == "501"  # a privileged port
        ctl.pasv()
        assert ctl.cmd("RETR big.bin")[0] == "425"  # the sender connects: not after PASV
        assert ctl.cmd("REST 10-5")[0] == "501"
        assert ctl.cmd("LIST")[0] == "504"
        assert ctl.cmd("MODE S")[0] == "200"
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("TYPE A")[0] == "200"
        ctl.pasv()
        assert ctl.cmd("STOR x")[0] == "504"  # binary only


# -- RETR from a raw client: REST ranges and DRS streams=N -----------------------------------


class Receiver:
    """Accepts the server's streams and decodes them into a buffer."""

    def __init__(self, size):
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.lst.settimeout(10)
        self.buf = bytearray(size)
        self.ledger = ReceiveLedger(limit=size)
        self.lock = threading.Lock()
        self.threads = []
        self.conns = 0
        self.gate = threading.Event()  # readers wait for it
        self.closes = 0

    @property
    def port_cmd(self):
        p = self.lst.getsockname()[1]
        return f"PORT 127,0,0,1,{p >> 8},{p & 255}"

    def accept(self, n):
        for _ in range(n):
            s, _ = self.lst.accept()
            self.conns += 1
            t = threading.Thread(target=self._read, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, s):
        dec = BlockDecoder()
        self.gate.wait(20)
        s.settimeout(20)
        while not dec.ended:
            data = s.recv(1 << 20)
            if not data:
                break
            with self.lock:
                for ev in dec.feed(data):
                    self.ledger.apply(ev)
                    if isinstance(ev, EndOfData) and ev.close:
                        self.closes += 1
                    elif not isinstance(ev, (EndOfData, EndOfFile)):
                        self.buf[ev.offset:ev.offset + len(ev.data)] = ev.data

    def join(self):
        for t in self.threads:
            t.join(20)


def test_retr_rest_ranges_sends_only_the_rest(root):
    data = (root / "big.bin").read_bytes()
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = Receiver(SIZE)
        rx.gate.set()
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        held = [(0, 1 << 20), (5 << 20, 9 << 20)]
        assert ctl.cmd("REST " + ",".join(f"{a}-{b}" for a, b in held))[0] == "350"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        rx.accept(2)
        assert ctl.final()[0] == "226"
        rx.join()
    assert rx.ledger.complete and rx.ledger.eod_count == 2
    assert list(rx.ledger.received) == [(1 << 20, 5 << 20), (9 << 20, SIZE)]
    for a, b in rx.ledger.received:
        assert rx.buf[a:b] == data[a:b]


@pytest.mark.parametrize("start, asked", [(1, 3), (3, 1)])
def test_drs_streams_during_retr(root, start, asked):
    """DRS streams=N during a MODE E RETR: the server connects more
    streams or ends surplus ones with EOD|CLOSE; the EOF's EOD count
    counts every connection used; the reply sums over the streams."""
    data = (root / "big.bin").read_bytes()
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        rx = Receiver(SIZE)
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd(f"OPTS RETR Parallelism={start},{start},{start};")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        rx.accept(start)  # the readers wait: the transfer cannot finish yet
        code, text = ctl.cmd(f"DRS streams={asked} rate=1000000")
        assert code == "200" and text.startswith("200 DRS") and f"streams={max(start, asked)}" in text, text
        rx.accept(max(asked - start, 0))
        rx.gate.set()
        assert ctl.final()[0] == "226"
        rx.join()
    assert rx.ledger.complete
    assert rx.ledger.eod_count == rx.conns == max(start, asked)
    assert rx.closes == max(start - asked, 0)
    assert bytes(rx.buf) == data


def test_sbuf_sizes_streams_and_drs_sums_them(root):
    """SBUF is the static size under --tuning fixed (each stream's receive
    buffer reads back twice it); DRS during a MODE E STOR sums the
    streams' numbers and says how many there are."""
    sizes = {}
    for sbuf in (None, 98304):
        with running_server(root, "--tuning", "fixed:64k") as srv:
            ctl = Ctl(srv.port)
            if sbuf:
                assert ctl.cmd(f"SBUF {sbuf}")[0] == "200"
            port = put_mode_e(ctl, f"s{sbuf}.bin", allo=20)
            a, b = stream(port), stream(port)
            a.sendall(block(0, b"a" * 10))
            b.sendall(block(10, b"b" * 10))
            for _ in range(100):  # until the server has accepted both (bounded)
                code, text = ctl.cmd("DRS")
                if "streams=2" in text:
                    break
                time.sleep(0.05)
            assert code == "200" and "streams=2" in text, text
            pairs = dict(p.split("=") for p in text.split()[2:])
            sizes[sbuf] = int(pairs["rcvbuf"])
            a.sendall(header(Desc.EOD, 0, 0))
            b.sendall(header(Desc.EOD | Desc.EOF, 0, 2))
            assert ctl.final()[0] == "226"
    assert sizes == {None: 2 * 2 * 65536, 98304: 2 * 2 * 98304}


def test_sigterm_during_a_mode_e_transfer(root):
    import signal
    with running_server(root, "--grace", "1") as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "term.bin", allo=100)
        s = stream(port)
        s.sendall(block(0, b"t" * 50))
        assert ctl.cmd("NOOP")[0] == "200"  # the block is in
        srv.proc.send_signal(signal.SIGTERM)
        code, text, _ = ctl.final()
        assert code == "426", text
        assert ctl.reply()[0] == "421"
        assert srv.proc.wait(15) == 0
    assert (root / ".term.bin.part").read_bytes()[:50] == b"t" * 50


def test_globus_verify_checksum_with_cksm(root, tmp_path):
    out = tmp_path / "v.bin"
    with running_server(root) as srv:
        r = guc("-dbg", "-verify-checksum", "-p", "2", url(srv, "big.bin"), f"file://{out}")
        assert r.returncode == 0, r.stderr
        assert "CKSM MD5 0 -1 /big.bin" in r.log
        r = guc("-dbg", "-verify-checksum", "-p", "2", f"file://{out}", url(srv, "v.bin"))
        assert r.returncode == 0, r.stderr
        assert "CKSM MD5 0 -1 /v.bin" in r.log
    assert (root / "v.bin").read_bytes() == (root / "big.bin").read_bytes()


def test_cksm_command(root):
    import hashlib
    import zlib
    data = (root / "big.bin").read_bytes()
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert " CKSM MD5;ADLER32;SHA1;SHA256;SHA512;\r\n" in ctl.cmd("FEAT")[1]
        assert ctl.cmd("CKSM MD5 0 -1 /big.bin") == ("213", f"213 {hashlib.md5(data).hexdigest()}\r\n")
        assert ctl.cmd("CKSM SHA256 100 1000 big.bin")[1].split()[1] == hashlib.sha256(data[100:1100]).hexdigest()
        assert ctl.cmd("CKSM ADLER32 0 -1 big.bin")[1].split()[1] == f"{zlib.adler32(data):08x}"
        assert ctl.cmd("CKSM CRC7 0 -1 big.bin")[0] == "501"
        assert ctl.cmd("CKSM MD5 0 -5 big.bin")[0] == "501"
        assert ctl.cmd("CKSM MD5 0 -1 nothing")[0] == "550"
        assert ctl.cmd("CKSM MD5 0 -1 ../../../../etc/passwd")[0] == "550"


def test_retr_stream_closed_by_client_ends_with_426(root):
    with running_server(root, "--data-timeout", "30") as srv:
        ctl = Ctl(srv.port)
        lst = socket.create_server(("127.0.0.1", 0))
        lst.settimeout(10)
        p = lst.getsockname()[1]
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}")[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        a, _ = lst.accept()
        b, _ = lst.accept()
        a.recv(1000)
        a.close()  # unread data: a reset
        code, text, _ = ctl.final()
        assert code == "426" and "timed out" not in text, text  # the loss ended it, not the data timeout
        b.close()
        assert ctl.cmd("NOOP")[0] == "200"


def test_every_stream_is_a_flow_in_the_buffer_budget(root):
    """Each MODE E stream has its own tuner, counted in --buffer-budget."""
    from drsftp.io.tuner import SocketTuner
    from drsftp.server.app import ServerConfig, build_server

    server = build_server(ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0))
    budget = server.handler.buffer_budget
    stop = threading.Event()

    def run():
        while not stop.is_set():
            server.ioloop.loop(timeout=0.05, blocking=False)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        ctl = Ctl(server.socket.getsockname()[1])
        port = put_mode_e(ctl, "budget.bin", allo=30)
        streams = [stream(port) for _ in range(3)]
        for i, s in enumerate(streams):
            s.sendall(block(10 * i, b"q" * 10))

        def tuner_flows():
            return [k for k in list(budget._flows) if isinstance(k, SocketTuner)]

        for _ in range(200):  # bounded: until each stream's first tick
            if len(tuner_flows()) >= 3:
                break
            time.sleep(0.02)
        assert len(tuner_flows()) == 3
        for s in streams[:-1]:
            s.sendall(header(Desc.EOD, 0, 0))
        streams[-1].sendall(header(Desc.EOD | Desc.EOF, 0, 3))
        assert ctl.final()[0] == "226"
        # a RETR's two outgoing streams likewise
        rx = Receiver(SIZE)
        rx.gate.set()
        assert ctl.cmd("OPTS RETR Parallelism=2,2,2;")[0] == "200"
        assert ctl.cmd(rx.port_cmd)[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        rx.accept(2)
        assert ctl.final()[0] == "226"
        rx.join()
        assert ctl.cmd("MODE S")[0] == "200"  # drops the cached streams: their flows end
        for _ in range(200):
            if not tuner_flows():
                break
            time.sleep(0.02)
        assert tuner_flows() == []
    finally:
        stop.set()
        t.join(10)
        server.close_all()
    assert (root / "budget.bin").read_bytes() == b"q" * 30


class _Job:
    """What a stream's failure is reported to: the replies it got."""

    def __init__(self):
        self.members, self.replies = set(), []

    def fail(self, reply):
        self.replies.append(reply)


@pytest.mark.parametrize("event", ["handle_close", "handle_write_event"])  # (HUP|ERR; or OUT alone)
@pytest.mark.parametrize("peer, code", [("reset", "426"), ("closed port", "425")])
def test_a_stream_that_failed_while_connecting_gets_the_rfc_959_reply(event, peer, code):
    """A stream the server was connecting, failed before it saw the connect
    end: 425 when it could not be opened (the port closed), 426 when the
    client took it and reset it (RFC 959: the connection closed, the
    transfer aborted), whichever event the poller reports."""
    lst = socket.create_server(("127.0.0.1", 0))
    addr = lst.getsockname()
    if peer == "closed port":
        lst.close()
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(addr)
    if peer == "reset":
        conn, _ = lst.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        lst.close()
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    assert wait_until(lambda: any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0)), 10)
    job = _Job()
    session = SimpleNamespace(h=SimpleNamespace(ioloop=None), limits=Limits(), job=job,
                              stream_closed=lambda s: None)
    stream = Stream(session, sock, Role.SENDER)
    stream.connecting = True
    job.members.add(stream)
    getattr(stream, event)()
    assert len(job.replies) == 1 and job.replies[0][:4] == code + " ", job.replies
    assert stream.closed


def test_retr_to_a_closed_port_answers_425(root):
    lst = socket.create_server(("127.0.0.1", 0))
    p = lst.getsockname()[1]
    lst.close()  # nobody listens there now
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        assert ctl.cmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}")[0] == "200"
        assert ctl.cmd("RETR big.bin")[0] == "150"
        code, text, _ = ctl.final()
        assert code == "425", text
        assert ctl.cmd("NOOP")[0] == "200"


def test_quit_during_a_transfer_waits_for_its_final_reply(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "q.bin", allo=8)
        s = stream(port)
        s.sendall(block(0, b"quit"))
        assert ctl.cmd("QUIT")[0] == "221"
        s.sendall(block(4, b"late") + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "226", text
        assert ctl.f.readline() == b""  # then the session closes
    assert (root / "q.bin").read_bytes() == b"quitlate"


def test_mode_e_under_prot_p_needs_tls_on_the_streams(root, tmp_path):
    """MODE E with PROT P in either order is accepted (its streams run TLS:
    tests/test_modee_tls.py); a clear-text stream a RETR connects gets no
    data (the server waits for a ClientHello), and stream mode under TLS
    still works."""
    import ftplib
    import ssl

    from test_access_fuzz import _self_signed

    pem = _self_signed(tmp_path)
    with running_server(root, "--tls-cert", str(pem), "--data-timeout", "2") as srv:
        ctx = ssl.create_default_context(cafile=str(pem))
        ctx.check_hostname = False
        tls = ftplib.FTP_TLS(context=ctx)
        tls.connect("127.0.0.1", srv.port, timeout=10)
        tls.login(USER, PASSWORD)
        tls.voidcmd("TYPE I")
        assert tls.sendcmd("MODE E").startswith("200")
        tls.prot_p()
        assert tls.sendcmd("MODE E").startswith("200")
        lst = socket.create_server(("127.0.0.1", 0))
        p = lst.getsockname()[1]
        assert tls.sendcmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}").startswith("200")
        assert tls.sendcmd("RETR big.bin").startswith("150")
        s, _ = lst.accept()
        s.settimeout(1)
        with pytest.raises(socket.timeout):
            s.recv(100)  # nothing in clear text: the server waits as TLS server
        with pytest.raises(ftplib.error_temp, match=r"^426 .*timed out"):
            tls.voidresp()
        s.close()
        lst.close()
        assert tls.sendcmd("MODE S").startswith("200")
        got = bytearray()
        tls.retrbinary("RETR big.bin", got.extend)  # stream mode under TLS still works
        assert bytes(got) == (root / "big.bin").read_bytes()
        tls.quit()


def test_markers_during_a_stor(root):
    """112 Perf Marker and 111 Range Marker come while a STOR runs, not
    only before its 226."""
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "m.bin", allo=2000)
        s = stream(port)
        s.sendall(block(1000, b"m" * 1000))
        code, text = ctl.reply()  # the periodic markers, with the transfer still running
        assert code == "112" and "Stripe Bytes Transferred: 1000\r\n" in text, text
        assert ctl.reply() == ("111", "111 Range Marker 1000-2000\r\n")
        s.sendall(block(0, b"n" * 1000) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, markers = ctl.final()
        assert code == "226", text
        assert "111 Range Marker 0-2000\r\n" in markers
    assert (root / "m.bin").read_bytes() == b"n" * 1000 + b"m" * 1000
