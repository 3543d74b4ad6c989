"""A directory listing's memory in `drsftp serve` does not grow with the
directory: LIST, NLST and MLSD in stream mode and MLSD in MODE E of 2,000
and of 10,000 entries, the server in this process (its ioloop in a
thread) under tracemalloc.  pyftpdlib read the whole directory (and NLST
joined it into one string) before the first line went out; the names now
come in batches (listings.py, batches made small here), and MODE E's
listing goes through a temporary file past a bound (eblock/send.py)."""

from __future__ import annotations

import contextlib
import ftplib
import os
import socket
import tracemalloc

import pytest
from conftest import PASSWORD, USER, in_thread

from drsftp.ftp.eblock import BlockDecoder, Data, EndOfFile
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ftp import listings
from drsftp.server.ftp.eblock import send

SMALL, BIG = 2_000, 10_000
SLACK = 256 << 10  # what the big listing may hold beyond the small one's (the old code: > 1 MiB more)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setattr(listings, "LISTING_BATCH", 256)
    monkeypatch.setattr(listings, "CHUNK", 4 << 10)
    monkeypatch.setattr(send, "SPOOL_OVER", 64 << 10)
    for n in (SMALL, BIG):
        d = tmp_path / f"d{n}"
        d.mkdir()
        for i in range(n):
            os.close(os.open(d / f"entry-{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    (tmp_path / f"d{SMALL}" / "bad\nname").touch()  # left out (facts.py)
    return tmp_path


@contextlib.contextmanager
def serving(root):
    server = build_server(ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD, tuning="kernel"))
    with in_thread(server, "drs-listing-ftpd", close_ioloop=False) as port:
        yield port


def stream_listing(port, command, path) -> int:
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=60)
    ftp.login(USER, PASSWORD)
    lines = 0

    def count(_line):
        nonlocal lines
        lines += 1

    ftp.retrlines(f"{command} {path}", count)
    ftp.quit()
    return lines


def mode_e_mlsd(port, path) -> int:
    """MLSD in MODE E, the server connecting to our PORT listener: the
    lines its blocks carry."""
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=60)
    ftp.login(USER, PASSWORD)
    ftp.voidcmd("TYPE I")
    ftp.voidcmd("MODE E")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        p = listener.getsockname()[1]
        ftp.voidcmd(f"PORT 127,0,0,1,{p >> 8},{p & 255}")
        ftp.sendcmd(f"MLSD {path}")
        conn, _ = listener.accept()
    decoder, lines, done = BlockDecoder(), 0, False
    with conn:
        conn.settimeout(60)
        while not done:
            buf = conn.recv(1 << 16)
            assert buf, "the stream closed before EOF"
            for ev in decoder.feed(buf):
                if isinstance(ev, Data):
                    lines += bytes(ev.data).count(b"\n")
                done = done or isinstance(ev, EndOfFile)
        assert ftp.voidresp().startswith("226")
    ftp.quit()
    return lines


def held_while_listing(port, command, path) -> tuple[int, int]:
    """(lines listed, the peak of traced memory above where it started)."""
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    lines = mode_e_mlsd(port, path) if command == "MLSD-E" else stream_listing(port, command, path)
    return lines, tracemalloc.get_traced_memory()[1] - start


@pytest.mark.parametrize("command", ["LIST", "NLST", "MLSD", "MLSD-E"])
def test_a_listing_holds_no_more_for_a_directory_ten_times_larger(tree, command):
    with serving(tree) as port:
        stream_listing(port, "NLST", f"d{SMALL}")  # the session's first-time costs, untraced
        tracemalloc.start()
        try:
            small_lines, small = held_while_listing(port, command, f"d{SMALL}")
            big_lines, big = held_while_listing(port, command, f"d{BIG}")
        finally:
            tracemalloc.stop()
    assert (small_lines, big_lines) == (SMALL, BIG)  # every entry once, the bad name left out
    assert big < small + SLACK, f"{command}: {small} bytes for {SMALL} entries, {big} for {BIG}"
