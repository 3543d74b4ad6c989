"""Names with CR, LF or NUL on `drsftp serve` (docs/SECURITY.md, "Names"):
every command refuses such an argument (553 for one that would create the
name, 501 otherwise) and the session goes on; a name on disk holding one
(made by the server's operator) is left out of MLSD, LIST, NLST and STAT,
so no listing line can be forged."""

from __future__ import annotations

import ftplib
import os
import socket

import pytest
from conftest import PASSWORD, USER, drsftp, running_server
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eblock_server import Ctl

from drsftp.ftp import listing, safepath

FORGED = "modify=20200101000000;perm=r;size=1;type=file; fake.txt"

# Every command that takes a path, with the words before the path; the
# ones that create the name answer 553 (RFC 959 sec. 4.2), the rest 501.
PATH_COMMANDS = [
    ("STOR", "", 553), ("APPE", "", 553), ("STOU", "", 553), ("MKD", "", 553), ("XMKD", "", 553),
    ("RNTO", "", 553), ("RETR", "", 501), ("RMD", "", 501), ("XRMD", "", 501), ("DELE", "", 501),
    ("RNFR", "", 501), ("CWD", "", 501), ("XCWD", "", 501), ("SIZE", "", 501), ("MDTM", "", 501),
    ("MFMT", "20200101000000 ", 501), ("MLST", "", 501), ("MLSD", "", 501), ("LIST", "", 501),
    ("NLST", "", 501), ("STAT", "", 501), ("SITE", "CHMOD 644 ", 501), ("HASH", "", 501),
    ("CKSM", "MD5 0 -1 ", 501),
]
BREAKS = {"LF": "\n", "CR": "\r", "NUL": "\x00", "CR NUL": "\r\x00"}


def _send_raw(ctl, text):
    ctl.sock.sendall(text.encode("utf-8") + b"\r\n")


@pytest.mark.parametrize("mode", ["S", "E"])
def test_every_path_command_refuses_cr_lf_and_nul_and_the_session_goes_on(tmp_path, mode):
    root = tmp_path / "srv"
    (root / "odd").mkdir(parents=True)
    (root / "odd" / "inj").write_bytes(b"x")
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd(f"MODE {mode}")[0] == "200"
        for cmd, words, want in PATH_COMMANDS:
            for what, brk in BREAKS.items():
                _send_raw(ctl, f"{cmd} {words}/odd/inj{brk}{FORGED}")
                code, text = ctl.reply()
                assert code == str(want), (cmd, what, text)
                assert ("File name not allowed" if want == 553 else "in the argument") in text, text
                assert ctl.cmd("NOOP")[0] == "200", (cmd, what)
        ctl.close()
    assert sorted(os.listdir(root / "odd")) == ["inj"]  # nothing created


def test_a_forged_listing_entry_cannot_be_stored_and_ls_shows_none(tmp_path):
    """The attack as reported: STOR of a name holding LF and MLSD facts,
    then another user's `drsftp ls -l` listed a forged ``fake.txt``."""
    root = tmp_path / "srv"
    (root / "odd").mkdir(parents=True)
    with running_server(root) as srv:
        ctl = Ctl(srv.port)
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        _send_raw(ctl, f"STOR /odd/inj\n{FORGED}")
        code, text = ctl.reply()
        data.close()
        ctl.close()
        assert code == "553", text
        r = drsftp("ls", "-l", srv.url("odd/"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "fake.txt" not in r.stdout and os.listdir(root / "odd") == []


@pytest.fixture
def odd_names(tmp_path):
    """A directory holding names with LF, CR and both, made on the server's
    disk (as its operator could), beside an ordinary one."""
    root = tmp_path / "srv"
    (root / "d").mkdir(parents=True)
    for name in ("ok.txt", f"inj\n{FORGED}", "cr\rname", "both\r\nx", "\n"):
        (root / "d" / name).write_bytes(b"data")
    return root


def test_names_on_disk_holding_line_breaks_are_left_out_of_every_listing(odd_names):
    with running_server(odd_names) as srv:
        ftp = ftplib.FTP()
        ftp.connect("127.0.0.1", srv.port, timeout=30)
        ftp.login(USER, PASSWORD)
        got = {}
        for cmd in ("MLSD /d", "LIST /d", "NLST /d"):
            chunks: list[bytes] = []
            ftp.retrbinary(cmd, chunks.append)
            got[cmd] = b"".join(chunks)
        stat = ftp.sendcmd("STAT /d")
        ftp.quit()
    mlsd = got["MLSD /d"].split(b"\r\n")
    assert [line.split(b"; ", 1)[1] for line in mlsd if line] == [b"ok.txt"], got["MLSD /d"]
    assert [e.name for e in listing.parse_list(got["LIST /d"])] == ["ok.txt"], got["LIST /d"]
    assert got["NLST /d"] == b"ok.txt\r\n"
    assert "ok.txt" in stat and "fake" not in stat and "name" not in stat


def test_the_rule_is_one_place_and_sans_io():
    assert safepath.line_break_refusal("STOR", "a\nb").startswith("553 ")
    assert safepath.line_break_refusal("stor", "a\rb").startswith("553 ")
    assert safepath.line_break_refusal("RETR", "a\x00b").startswith("501 ")
    assert safepath.line_break_refusal("RETR", "a b;c=d") is None
    assert safepath.line_break_refusal("NOOP", "") is None
    assert not safepath.listable("a\nb") and not safepath.listable("a\rb") and safepath.listable("a b")
    assert safepath.client_path("/srv/home", "/srv/home/a/b") == "/a/b"
    assert safepath.client_path("/srv/home/", "/srv/home") == "/"
    assert safepath.client_path("/srv/home", "/srv/homes/x") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", " ", ";", "=", "/", "\r", "\n", "\x00", "é"]), max_size=12),
       st.sampled_from(["STOR", "RETR", "MKD", "CWD", "SITE", "RNTO", "MLSD"]))
def test_the_refusal_is_exactly_the_names_a_listing_could_not_carry(arg, cmd):
    """Refused exactly when the argument holds CR, LF or NUL; what is
    accepted as a name is listable, and a listing line of it is one line."""
    reply = safepath.line_break_refusal(cmd, arg)
    broken = any(ch in arg for ch in "\r\n\x00")
    assert (reply is not None) == broken
    assert safepath.listable(arg) == (not broken)
    if reply is not None:
        assert reply[:3] in ("501", "553") and "\n" not in reply and "\r" not in reply
    elif arg:
        line = f"type=file;size=1; {arg}\r\n"
        assert line.count("\r\n") == 1 and "\n" not in line[:-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab.-_ ", min_size=1, max_size=4).filter(lambda p: p not in (".", "..")),
                max_size=4))
def test_client_path_names_what_is_below_the_home_as_the_client_does(parts):
    home = "/srv/home"
    assert safepath.client_path(home, os.path.join(home, *parts)) == "/" + "/".join(parts)
    assert safepath.client_path(home, "/srv/homeX/" + "/".join(parts)) is None
