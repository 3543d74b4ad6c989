"""An ABOR the client sends before it closes an upload's data connection
aborts the upload (426, then 226; the part file kept for REST), whichever
socket the server reads first: here the server is held while both arrive
and its data channel is made to read the close first, the order a loaded
server can pick (finalreply.abort_is_next)."""

from __future__ import annotations

import contextlib
import ftplib
import socket
import threading
import time

import pytest
from conftest import PASSWORD, USER, wait_until
from pyftpdlib.handlers import DTPHandler
from pyftpdlib.ioloop import IOLoop
from pyftpdlib.servers import FTPServer

from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ftp.stream.finalreply import abort_is_next


@contextlib.contextmanager
def held_server(root, cfg=None, **attrs):
    """`drsftp serve`'s handler (``cfg``'s, or a user's of ``root``) on an
    ioloop in a thread that runs only while ``gate`` is free: (port,
    ioloop, gate, server)."""
    served = build_server(cfg or ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD))
    served.close()
    ioloop = IOLoop()
    server = FTPServer(("127.0.0.1", 0), type("Held", (served.handler,), attrs), ioloop=ioloop)
    gate, stop = threading.Lock(), threading.Event()

    def run():
        while not stop.is_set():
            with gate:
                ioloop.loop(timeout=0.02, blocking=False)

    thread = threading.Thread(target=run, name="drs-held-ftpd")
    thread.start()
    try:
        yield server.socket.getsockname()[1], ioloop, gate, server
    finally:
        stop.set()
        thread.join(10)
        server.close_all()
        ioloop.close()


def _data_channel(ioloop):
    return next(h for h in list(ioloop.socket_map.values()) if isinstance(h, DTPHandler))


def _in_band(ftp):
    ftp.putcmd("ABOR")


def _urgent_line(ftp):  # ftplib's FTP.abort(): the whole line as urgent data
    ftp.sock.sendall(b"ABOR\r\n", socket.MSG_OOB)


def _telnet_synch(ftp):  # BSD and inetutils ftp: IAC IP in band, IAC DM urgent, then the line (RFC 959 4.1.3)
    ftp.sock.sendall(b"\xff\xf4\xff")
    ftp.sock.sendall(b"\xf2", socket.MSG_OOB)
    ftp.sock.sendall(b"ABOR\r\n")


@pytest.mark.parametrize("send_abor", [_in_band, _urgent_line, _telnet_synch])
def test_abor_sent_before_the_close_aborts_the_upload_even_when_the_close_is_read_first(tmp_path, send_abor):
    seen = []
    hooks = {"on_file_received": lambda self, f: seen.append("complete"),
             "on_incomplete_file_received": lambda self, f: seen.append("incomplete")}
    with held_server(tmp_path, **hooks) as (port, ioloop, gate, _):
        ftp = ftplib.FTP()
        ftp.connect("127.0.0.1", port, timeout=10)
        ftp.login(USER, PASSWORD)
        ftp.voidcmd("TYPE I")
        conn = ftp.transfercmd("STOR cut.bin")
        conn.sendall(b"c" * 32768)
        with gate:  # the server is still: both the ABOR and the close wait in its sockets
            send_abor(ftp)
            conn.close()
            time.sleep(0.05)  # (loopback: the segments are in the server's sockets at once; a margin)
            dtp = _data_channel(ioloop)
            while not dtp._closed:  # the data channel first: its bytes, then the close
                dtp.handle_read()
        assert ftp.getline().startswith("426")
        assert ftp.getline().startswith("226")
        assert ftp.voidcmd("NOOP").startswith("200")  # no stray reply left behind
        ftp.quit()
    assert wait_until(lambda: seen == ["incomplete"])
    assert not (tmp_path / "cut.bin").exists()
    assert (tmp_path / ".cut.bin.part").stat().st_size == 32768  # kept for REST


@pytest.mark.parametrize(("pending", "expected"), [
    (b"ABOR\r\n", True), (b"abor\r\n", True), (b"\xff\xf4\xff\xf2ABOR\r\n", True),
    (b"ABOR\r\nNOOP\r\n", True), (b"ABOR\n", False), (b"ABOR\nNOOP\r\n", False),  # CRLF alone ends a line
    (b"ABOR", False), (b"", False), (b"NOOP\r\nABOR\r\n", False), (b"STOR ABOR\r\n", False),
    (b"XABORT\r\n", False),
])
def test_abort_is_next_reads_a_whole_first_line(pending, expected):
    assert abort_is_next(pending) is expected
