"""Symlinks below a `drsftp serve` home (docs/SECURITY.md, "Symlinks"): a
link leading outside the home is listed as a link and nothing more (MLSD
``type=OS.unix=symlink``, LIST an ``l`` line without its target), with
none of the outside's path, size or time; a refused RETR or CWD of it
names the path asked for; links inside the home work as before."""

from __future__ import annotations

import ftplib
import os

import pytest
from conftest import PASSWORD, USER, running_server

from drsftp.ftp import listing

OUTSIDE_SIZE = 12345


@pytest.fixture
def linked(tmp_path):
    outside = tmp_path / "drs-outside-secret"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"s" * OUTSIDE_SIZE)
    os.utime(outside / "secret.bin", (1_000_000_000, 1_000_000_000))
    root = tmp_path / "srv"
    (root / "sub").mkdir(parents=True)
    (root / "inside.txt").write_bytes(b"inside!")
    (root / "sub" / "deep.txt").write_bytes(b"deep")
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret.bin", root / "link_file")
    os.symlink(tmp_path / "drs-nowhere" / "x", root / "dangling_out")
    os.symlink("inside.txt", root / "rel_in")
    os.symlink(root / "sub", root / "abs_in")
    return root, outside


def _session(port):
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=30)
    ftp.login(USER, PASSWORD)
    return ftp


def _data(ftp, cmd):
    chunks: list[bytes] = []
    ftp.retrbinary(cmd, chunks.append)
    return b"".join(chunks).decode()


def test_links_leading_out_are_listed_as_links_without_the_outside(linked):
    root, outside = linked
    with running_server(root) as srv:
        ftp = _session(srv.port)
        mlsd, lst = _data(ftp, "MLSD"), _data(ftp, "LIST")
        ftp.quit()
    for text in (mlsd, lst):
        assert str(outside) not in text and "drs-outside" not in text and "drs-nowhere" not in text, text
        assert str(root) not in text, text
    entries = {e.name: e for e in listing.parse_mlsd(mlsd.encode())}
    for name in ("link_dir", "link_file", "dangling_out"):
        e = entries[name]
        assert (e.type, e.size) == (listing.LINK, None), mlsd
        assert e.mtime != 1_000_000_000  # the link's own time, not the target's
    assert (entries["rel_in"].type, entries["rel_in"].size) == (listing.FILE, 7)  # inside: as before
    assert entries["abs_in"].type == listing.DIR
    ls = {e.name: e for e in listing.parse_list(lst.encode())}
    for name in ("link_dir", "link_file", "dangling_out"):
        assert (ls[name].type, ls[name].target, ls[name].size) == (listing.LINK, None, 0), lst
    assert ls["rel_in"].target == "inside.txt"
    assert ls["abs_in"].target == "/sub"  # an absolute target inside, as the client names it


def test_a_refused_retr_or_cwd_names_the_path_asked_for_and_inside_links_work(linked):
    root, _ = linked
    with running_server(root) as srv:
        ftp = _session(srv.port)
        for cmd in ("RETR link_file", "CWD /link_dir", "SIZE link_file", "MLST /link_dir/secret.bin"):
            with pytest.raises(ftplib.error_perm) as err:
                if cmd.startswith("RETR"):
                    _data(ftp, cmd)
                else:
                    ftp.sendcmd(cmd)
            text = str(err.value)
            assert text.startswith("550") and "outside the user's root" in text, text
            asked = "/" + cmd.split(" ", 1)[1].lstrip("/")
            assert repr(asked) in text and "'/' " not in text, text
        assert _data(ftp, "RETR rel_in") == "inside!"
        assert ftp.cwd("/abs_in").startswith("250")
        assert _data(ftp, "RETR deep.txt") == "deep"
        ftp.quit()
