"""drsftp serve, MODE E receiving on cached streams: a stream that delivered
its EOD is not read again until the next STOR takes it (GFD.20: EOD ends
the stream's data for this transfer; the stream stays cached for the
next).  Blocks of the next file that come before its STOR wait (what one
read took past the EOD kept, the rest in the kernel) and go to that STOR;
a third-party source pipelining RETRs sends them so (docs/EBLOCK.md,
"Pipelined transfers"; globus-url-copy -pp between two drsftp serves:
tests/test_third_party_interop.py)."""

import os

import pytest
from conftest import running_server, tcp_entry
from test_eblock_server import Ctl, block, closed_by_peer, put_mode_e, stream

from drsftp.ftp.eblock import Desc, header

EOD = header(Desc.EOD, 0, 0)


def eof(streams):
    return header(Desc.EOD | Desc.EOF, 0, streams)


def halves(data, n):
    """``data`` as ``n`` streams' parts: each stream's blocks and its EOD,
    the last with the EOF and the EOD count."""
    step = -(-len(data) // n) if data else 0
    parts = []
    for i in range(n):
        a, b = i * step, min((i + 1) * step, len(data))
        body = block(a, data[a:b]) if b > a else b""
        parts.append(body + (eof(n) if i == n - 1 else EOD))
    return parts


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "srv"
    r.mkdir()
    return r


@pytest.mark.parametrize("second", [300_000, 6 << 20])
def test_next_files_blocks_before_its_stor_are_kept_for_it(root, second):
    """File 1's blocks, its EODs and file 2's blocks in one write on each of
    two cached streams, STOR 2 sent only after STOR 1's 226 (the small
    file 2 lies whole in the read that ended file 1; the large one mostly
    in the kernel): both files byte-identical."""
    one, two = os.urandom(1 << 20), os.urandom(second)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "one.bin", allo=len(one))
        socks = [stream(port), stream(port)]
        for s, a, b in zip(socks, halves(one, 2), halves(two, 2), strict=True):
            s.setblocking(False)
            s.send(a + b)  # as much as the kernel takes now; the rest after STOR 2
            s.setblocking(True)
        code, text, _ = ctl.final()
        assert code == "226", text
        assert ctl.cmd(f"ALLO {len(two)}")[0] == "200"
        assert ctl.cmd("STOR two.bin")[0] == "125"
        code, text, _ = ctl.final()
        assert code == "226", text
        assert (root / "one.bin").read_bytes() == one
        assert (root / "two.bin").read_bytes() == two
        ctl.close()
        for s in socks:
            s.close()


def test_early_blocks_of_three_files_each_go_to_their_own_stor(root):
    """Three files back to back on one stream before the first STOR: each
    STOR takes its own, in order, and the replies keep the commands' order."""
    files = [os.urandom(n) for n in (200_000, 1, 1 << 20)]
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        port = ctl.pasv()
        s = stream(port)
        s.sendall(b"".join(block(0, f) + eof(1) for f in files))
        ctl.sock.sendall(b"".join(f"ALLO {len(f)}\r\nSTOR f{i}\r\n".encode() for i, f in enumerate(files)))
        codes = []
        while codes.count("226") < len(files):
            code = ctl.reply()[0]
            if code not in ("111", "112"):  # (STOR's markers)
                codes.append(code)
        ctl.close()
        s.close()
    # ALLO's 200 each; the first STOR 150, the later ones 125 (reusing); each 226
    assert codes == ["200", "150", "226", "200", "125", "226", "200", "125", "226"], codes
    for i, f in enumerate(files):
        assert (root / f"f{i}").read_bytes() == f


def test_data_after_eod_with_no_next_transfer_waits_unread_and_goes_with_the_session(root):
    """A peer that keeps sending after its EOD with no STOR to take it: the
    server reads none of it past one read (the kernel's buffers and TCP's
    flow control bound it); the stream closes when the session ends."""
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "a.bin")
        s = stream(port)
        s.sendall(block(0, b"a" * 1000) + eof(1))
        code, text, _ = ctl.final()
        assert code == "226", text
        s.settimeout(0.5)
        sent = 0
        try:
            for _ in range(4096):  # bounded: 1 GiB at most
                sent += s.send(b"x" * (256 << 10))
        except (TimeoutError, BlockingIOError):
            pass
        assert sent < 1 << 30  # the sender was stopped by flow control
        local, remote = s.getsockname(), s.getpeername()
        waiting = tcp_entry(remote, local)
        assert waiting is not None and waiting[1] > 0  # unread at the server
        assert (root / "a.bin").read_bytes() == b"a" * 1000
        assert ctl.cmd("NOOP")[0] == "200"  # the session goes on
        assert ctl.cmd("QUIT")[0] == "221"
        assert closed_by_peer(s)
        ctl.close()


def test_garbage_after_eod_fails_the_next_stor_not_the_one_before(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "a.bin")
        s = stream(port)
        s.sendall(block(0, b"a" * 1000) + eof(1) + header(0x01, 0, 0))
        code, text, _ = ctl.final()
        assert code == "226", text
        assert ctl.cmd("STOR b.bin")[0] == "125"
        code, text, _ = ctl.final()
        assert code == "451" and "unknown descriptor" in text, text
        assert closed_by_peer(s)
        ctl.close()
    assert (root / "a.bin").read_bytes() == b"a" * 1000
    assert not (root / "b.bin").exists()


def test_more_eods_than_the_eod_count_is_refused(root):
    """Two streams' EODs where the EOF counts one: 451, nothing renamed.
    (On one stream a second EOD is the next transfer's.)"""
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "evil.bin")
        a, b = stream(port), stream(port)
        a.sendall(block(0, b"a" * 10) + EOD)
        # the server has read a's EOD once its marker counts a's bytes
        seen = []
        while not any("Stripe Bytes Transferred: 10" in m for m in seen):
            seen.append(ctl.reply()[1])
        b.sendall(block(10, b"b" * 10) + eof(1))
        code, text, _ = ctl.final()
        assert code == "451" and "EOD count" in text, text
        ctl.close()
    assert not (root / "evil.bin").exists()
