"""drsftp serve's part-file names (server/ftp/partfile.py; docs/SECURITY.md,
"No data lost"): no command makes a ``.NAME.part`` (553), none takes away
one an upload writes (450), and an upload whose part file was replaced
under it is not moved into place (451), in stream mode and MODE E."""

from __future__ import annotations

import ftplib
import io
import os

import pytest
from conftest import PASSWORD, USER, running_server, wait_until
from test_eblock_server import Ctl, block, put_mode_e, stream

from drsftp.ftp.eblock import Desc, header


def login(port):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=20)
    f.login(USER, PASSWORD)
    f.voidcmd("TYPE I")
    return f


def quit_all(*sessions):
    for f in sessions:
        try:
            f.quit()
        except (OSError, ftplib.Error):
            f.close()


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    return d


def test_no_command_makes_a_part_name_and_a_running_upload_lands_whole(root):
    (root / ".old.part").write_bytes(b"abandoned")
    with running_server(root) as srv:
        a, b = login(srv.port), login(srv.port)
        try:
            conn = a.transfercmd("STOR x")  # a stock client's upload of x, under way
            conn.sendall(b"A" * 100)
            assert wait_until(lambda: (root / ".x.part").exists())
            for cmd in ("STOR .x.part", "APPE .x.part", "STOR sub/../.x.part"):
                with pytest.raises(ftplib.error_perm, match=r"^553 .*part file"):
                    b.storbinary(cmd, io.BytesIO(b"EVIL"))
            with pytest.raises(ftplib.error_perm, match=r"^553"):
                b.mkd(".y.part")
            b.storbinary("STOR y", io.BytesIO(b"why"))
            b.sendcmd("RNFR y")
            with pytest.raises(ftplib.error_perm, match=r"^553"):
                b.sendcmd("RNTO .x.part")
            for cmd in ("DELE .x.part", "RNFR .x.part"):  # the running upload's: busy
                with pytest.raises(ftplib.error_temp, match=r"^450"):
                    b.sendcmd(cmd)
            conn.sendall(b"A" * 100)
            conn.close()
            assert a.voidresp().startswith("226")
            assert b.delete(".old.part").startswith("250")  # an abandoned part file may go
        finally:
            quit_all(a, b)
    assert (root / "x").read_bytes() == b"A" * 200
    assert sorted(p.name for p in root.iterdir()) == ["x", "y"]


def test_a_part_file_replaced_under_a_stream_upload_is_not_moved(root):
    with running_server(root) as srv:
        a = login(srv.port)
        try:
            conn = a.transfercmd("STOR x")
            conn.sendall(b"A" * 100)
            assert wait_until(lambda: (root / ".x.part").exists())
            (root / "other").write_bytes(b"OTHER")
            os.replace(root / "other", root / ".x.part")  # (as a local process could)
            conn.sendall(b"A" * 100)
            conn.close()
            with pytest.raises(ftplib.error_temp, match=r"^451 The part file was removed or replaced"):
                a.voidresp()
        finally:
            quit_all(a)
    assert not (root / "x").exists()
    assert (root / ".x.part").read_bytes() == b"OTHER"


def test_a_part_file_replaced_under_a_mode_e_upload_is_not_moved(root):
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "x", allo=200)
        s = stream(port)
        s.sendall(block(0, b"A" * 100))
        assert wait_until(lambda: (root / ".x.part").exists() and (root / ".x.part").stat().st_size == 100)
        (root / "other").write_bytes(b"")
        os.replace(root / "other", root / ".x.part")
        s.sendall(block(100, b"A" * 100) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "451" and "removed or replaced" in text, text
        assert ctl.cmd("STOR .x.part")[0] == "553"
        ctl.close()
        s.close()
    assert not (root / "x").exists()
    assert (root / ".x.part").read_bytes() == b""  # the other file, kept even empty
