"""drsftp's handler classes embedded in a pyftpdlib server: pyftpdlib's
hooks get the names an embedder expects, and a data handler class of the
embedder's own (pyftpdlib's ThrottledDTPHandler), alone or combined with
drsftp's, gets the DRS data path mixed in, so an upload is still renamed
into place, and the class's own recv (the read limit) still runs.
pyftpdlib's own suite runs against the handlers in tests/pyftpdlib_suite."""

from __future__ import annotations

import contextlib
import ftplib
import io
import os

import pytest
from conftest import PASSWORD, USER, in_thread, wait_until
from pyftpdlib.handlers import ThrottledDTPHandler
from pyftpdlib.ioloop import IOLoop
from pyftpdlib.servers import FTPServer

from drsftp.server.app import ServerConfig, build_server

SLEEPS: list[int] = []  # bytes counted when the read limit put the channel to sleep


class WakingThrottle(ThrottledDTPHandler):
    """Throttles on recv (64 KiB/s) and wakes at once, as pyftpdlib's own
    test does, so the upload takes no longer for it."""

    read_limit = 64 << 10

    def _throttle_bandwidth(self, len_chunk, max_speed):
        super()._throttle_bandwidth(len_chunk, max_speed)
        if self._throttler is not None and not self._throttler.cancelled:
            SLEEPS.append(len_chunk)
            self._throttler.call()
            self._throttler = None


@contextlib.contextmanager
def serving(root, **attrs):
    """The port of a pyftpdlib server on its own ioloop, in a thread, with
    `drsftp serve`'s handler class, ``attrs`` set on a subclass of it."""
    served = build_server(ServerConfig(root=str(root), port=0, user=USER, password=PASSWORD))
    served.close()
    handler = type("Embedded", (served.handler,), attrs)
    server = FTPServer(("127.0.0.1", 0), handler, ioloop=IOLoop())
    with in_thread(server, "drs-embedded-ftpd") as port:
        yield port


def login(port):
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=30)
    ftp.login(USER, PASSWORD)
    ftp.voidcmd("TYPE I")
    return ftp


@pytest.mark.parametrize("combined", [False, True], ids=["throttle alone", "drsftp's and throttle"])
def test_an_embedders_throttled_data_handler_throttles_receives_and_stores(tmp_path, combined):
    dtp = WakingThrottle
    if combined:
        dtp = type("DRSThrottle", (build_server(ServerConfig(root=str(tmp_path), port=0, anonymous_read=True))
                                   .handler.dtp_handler, WakingThrottle), {})
    SLEEPS.clear()
    data = os.urandom(1 << 20)
    with serving(tmp_path, dtp_handler=dtp) as port:
        ftp = login(port)
        assert ftp.storbinary("STOR up.bin", io.BytesIO(data)).startswith("226")
        ftp.quit()
    assert (tmp_path / "up.bin").read_bytes() == data  # renamed into place: the DRS data path is there
    assert not (tmp_path / ".up.bin.part").exists()
    assert SLEEPS, "ThrottledDTPHandler.recv never ran: the read limit was not applied"


def test_on_file_received_gets_the_final_name_and_an_incomplete_upload_its_part_file(tmp_path):
    """The complete upload is at its name when the hook runs; the incomplete
    one is in .NAME.part, kept for REST (docs/PROTOCOL.md, deviations)."""
    seen = []

    def on_file_received(self, file):
        seen.append(("done", file, os.path.exists(file)))

    def on_incomplete_file_received(self, file):
        seen.append(("incomplete", file, os.path.exists(file)))

    with serving(tmp_path, on_file_received=on_file_received,
                 on_incomplete_file_received=on_incomplete_file_received) as port:
        ftp = login(port)
        ftp.storbinary("STOR whole.bin", io.BytesIO(b"w" * 100_000))
        conn = ftp.transfercmd("STOR cut.bin")
        conn.sendall(b"c" * 100_000)
        part = tmp_path / ".cut.bin.part"
        assert wait_until(lambda: part.exists() and part.stat().st_size > 0)  # bytes in it: kept for REST
        ftp.putcmd("ABOR")  # with the data connection still open: 426, then 226
        assert ftp.getline().startswith("426")
        assert ftp.getline().startswith("226")
        conn.close()
        ftp.quit()
        assert wait_until(lambda: len(seen) == 2)
    assert seen == [("done", str(tmp_path / "whole.bin"), True),
                    ("incomplete", str(part), True)]


def test_an_embedders_listdir_still_decides_what_a_listing_shows(tmp_path):
    """drsftp streams a directory's names itself; a filesystem class whose
    listdir is the embedder's own keeps deciding them (LIST, NLST, MLSD)."""
    from drsftp.server.ftp.facts import MlsxFilesystem

    class Hiding(MlsxFilesystem):
        def listdir(self, path):
            return [n for n in super().listdir(path) if not n.startswith("hidden")]

    (tmp_path / "shown.txt").write_text("a")
    (tmp_path / "hidden.txt").write_text("b")
    with serving(tmp_path, abstracted_fs=Hiding) as port:
        ftp = ftplib.FTP()
        ftp.connect("127.0.0.1", port, timeout=30)
        ftp.login(USER, PASSWORD)
        assert ftp.nlst() == ["shown.txt"]
        assert [name for name, _ in ftp.mlsd()] == ["shown.txt"]
        lines: list[str] = []
        ftp.retrlines("LIST", lines.append)
        assert len(lines) == 1 and lines[0].endswith(" shown.txt")
        ftp.quit()
