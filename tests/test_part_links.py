"""Uploads and listings against symlinks already on disk in the served
tree (docs/SECURITY.md): a `.NAME.part` symlink is never written through,
a link's target never forges a LIST line, and MODE E's `REST 0` starts a
fresh upload rather than one into the existing file."""

from __future__ import annotations

import ftplib
import io
import os
import time
import types

from conftest import PASSWORD, USER, running_server, wait_until
from test_eblock_server import Ctl, block, stream

from drsftp.server.ftp.facts import MlsxFilesystem


def test_a_stor_does_not_write_through_a_part_file_symlink(tmp_path):
    root, out = tmp_path / "srv", tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    victim = out / "victim"
    victim.write_bytes(b"PRECIOUS" * 100)
    os.symlink(victim, root / ".x.part")
    with running_server(root) as srv:
        f = ftplib.FTP()
        f.connect("127.0.0.1", srv.port, timeout=20)
        f.login(USER, PASSWORD)
        try:
            f.storbinary("STOR x", io.BytesIO(b"EVIL"))
            refused = None
        except ftplib.error_perm as exc:
            refused = str(exc)
        f.quit()
    assert refused is not None and refused.startswith("553") and "symbolic link" in refused
    assert victim.read_bytes() == b"PRECIOUS" * 100 and not (root / "x").exists()


def test_a_link_target_with_a_line_break_forges_no_list_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "real").write_text("x")
    os.symlink("real\r\n-rw-r--r--   1 root root 999 Jan 01 00:00 FORGED", home / "link")
    fs = MlsxFilesystem(str(home), types.SimpleNamespace(use_gmt_times=True, encoding="utf8", unicode_errors="replace"))
    lines = b"".join(fs.format_list(str(home), fs.listdir(str(home)))).split(b"\r\n")
    assert not any(b"FORGED" in line for line in lines)
    assert any(line.endswith(b" link") for line in lines)  # (listed, without its target)


def test_mode_e_rest_0_is_a_fresh_upload_not_one_into_the_file(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    (root / "x").write_bytes(b"O" * 1000)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        port = ctl.pasv()
        assert ctl.cmd("REST 0")[0] == "350"
        assert ctl.cmd("STOR x")[0] == "150"
        s = stream(port)
        s.sendall(block(0, b"N" * 300))
        part = root / ".x.part"
        assert wait_until(lambda: part.exists() and part.stat().st_size == 300, 10)
        s.close()  # (cut: no EOD)
        ctl.close()
        time.sleep(0.5)
    assert (root / "x").read_bytes() == b"O" * 1000  # (the cut upload left its part file, not a spliced x)
