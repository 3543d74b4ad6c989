"""Mistyped and unusable command lines: one plain sentence on stderr, a
non-zero exit, no traceback, no password shown, nothing written or lost
(README, "Errors")."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import PY, drsftp
from httpfake import FakeServer

SECRET = "pw12345678"


def _refused(r, rc=2):
    err = r.stderr.strip()
    assert r.returncode == rc, r.stderr
    assert err.count("\n") == 0 and "Traceback" not in err and SECRET not in err, r.stderr
    return err


def test_a_url_with_one_slash_is_refused_in_copy_and_put_without_its_password(tmp_path):
    good = f"ftp://u:{SECRET}@127.0.0.1:1/small.txt"
    typo = f"ftp:/u:{SECRET}@127.0.0.1:1/z.txt"
    (tmp_path / "small.txt").write_text("x")
    for argv in (("copy", good, typo), ("copy", typo, good), ("copy", typo, "local.txt"),
                 ("put", typo, good), ("put", "small.txt", typo), ("get", typo, "d.txt"),
                 ("copy", f"http:/u:{SECRET}@127.0.0.1:1/a", "local.txt")):
        err = _refused(drsftp(*argv, cwd=tmp_path))
        assert "URL has no host" in err and ":***@" in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.txt"]  # no ftp:/... directory made


def test_put_refuses_a_url_as_its_source(tmp_path):
    err = _refused(drsftp("put", f"ftp://alice:{SECRET}@127.0.0.1:1/a.txt", f"ftp://alice:{SECRET}@127.0.0.1:1/b",
                          cwd=tmp_path))
    assert "is a URL" in err and "copy" in err
    assert list(tmp_path.iterdir()) == []


def test_an_ftp_url_with_a_query_or_fragment_is_refused(server, tmp_path):
    (Path(server.root) / "we").write_text("not this one")
    for tail in ("we#ird.txt", "small.txt?x=1", "we?"):
        err = _refused(drsftp("get", server.url(tail), str(tmp_path / "out")))
        assert "query or fragment" in err and "%23" in err
    assert not (tmp_path / "out").exists()
    (Path(server.root) / "we#ird.txt").write_text("wanted")
    r = drsftp("get", server.url("we%23ird.txt"), str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_text() == "wanted"


# The child says "ready" from inside drsftp (a signal before is Python's
# start, or this harness's code): `python -m drsftp` as drsftp/__main__.py
# imports drsftp.cli, the installed `drsftp` script (pyproject.toml: cli.main)
# as main builds its parser.
_AS_MODULE = """
import runpy, sys
class Ready:
    def find_spec(self, name, path, target=None):
        if name == "drsftp.cli":
            print("ready", flush=True)
sys.meta_path.insert(0, Ready())
runpy.run_module("drsftp", run_name="__main__", alter_sys=True)
"""
_AS_SCRIPT = """
import sys
import drsftp.cli as cli
parse_args = cli.parse_args
cli.parse_args = lambda argv: print("ready", flush=True) or parse_args(argv)
sys.exit(cli.main())
"""


@pytest.mark.parametrize("start", [_AS_MODULE, _AS_SCRIPT], ids=["module", "script"])
def test_ctrl_c_while_drsftp_starts_is_one_line_and_130(tmp_path, start):
    """SIGINT from drsftp's first instruction on (imports, the parser's
    making): "interrupted", never a traceback."""
    for _ in range(3):
        for delay in (0, 0.02, 0.05):
            p = subprocess.Popen([PY, "-c", start, "get", "ftp://127.0.0.1:1/x", str(tmp_path / "x")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
            try:
                assert p.stdout.readline() == "ready\n"
                time.sleep(delay)
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
            # 130; -SIGINT: the signal came as the interpreter exited; 1: the get had
            # already failed (port 1 is closed), a clean exit before the signal
            assert p.returncode in (130, -signal.SIGINT, 1), (delay, p.returncode, err)
            assert p.returncode == 1 or err.strip() in ("", "drsftp: interrupted"), err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def web(tmp_path):
    root = tmp_path / "web"
    (root / "sub").mkdir(parents=True)
    (root / "small.txt").write_text("small")
    (root / "sub" / "a.txt").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    s = FakeServer(str(root)).start()
    yield s
    s.stop()


def test_an_empty_dest_or_a_directory_in_the_way_is_said_before_anything_moves(web, server, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for url in (web.url("/small.txt"), server.url("small.txt")):
        assert _refused(drsftp("get", url, "", cwd=work)) == "drsftp: error: DEST is empty"
    assert _refused(drsftp("put", "", server.url("x"), cwd=work)) == "drsftp: error: SRC is empty"
    (work / "tr2" / "a.txt").mkdir(parents=True)
    err = _refused(drsftp("get", "-r", web.url("/sub/"), "tr2", cwd=work), rc=1)
    assert "tr2/a.txt: a directory is in the way of this file" in err
    assert sorted(os.listdir(work)) == ["tr2"]
    assert sorted(os.listdir(work / "tr2")) == ["a.txt", "b.txt"]  # (the rest copied, no part file left)
    assert os.listdir(work / "tr2" / "a.txt") == []


class Canned:
    """A loopback TCP server answering every connection with ``reply``
    (after reading what the client sends first, unless ``greet``), then
    closing it: a server that answers as no HTTP server should."""

    def __init__(self, reply: bytes, greet: bool = False) -> None:
        self.reply, self.greet = reply, greet
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + 120
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    if not self.greet:
                        conn.recv(65536)
                    conn.sendall(self.reply)
                    conn.shutdown(socket.SHUT_WR)
                    conn.recv(65536)
                except OSError:
                    pass

    def stop(self) -> None:
        self.done.set()
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def canned():
    made = []

    def make(reply: bytes, greet: bool = False) -> Canned:
        made.append(Canned(reply, greet))
        return made[-1]

    yield make
    for c in made:
        c.stop()


def test_a_redirect_names_where_it_points_without_credentials(canned, tmp_path):
    for location, shown in ((f"http://bob:{SECRET}@127.0.0.1:1/other/x.txt", "http://127.0.0.1:1/other/x.txt"),
                            ("/moved/x.txt", "/moved/x.txt"), ("", "naming no Location")):
        head = f"Location: {location}\r\n" if location else ""
        c = canned(f"HTTP/1.1 302 Found\r\n{head}Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
        err = _refused(drsftp("get", f"http://u:{SECRET}@127.0.0.1:{c.port}/x.txt", str(tmp_path / "x")), rc=1)
        assert "HTTP 302" in err and shown in err, err
        assert "bob" not in err
    assert list(tmp_path.iterdir()) == []


def test_an_answer_that_is_not_http_or_not_tls_is_one_short_sentence(canned, server, web, tmp_path):
    junk = canned(b"\x16\x03\x01garbage\x00\xff" * 800 + b"\r\n\r\n" + b"more junk\n" * 500)
    err = _refused(drsftp("get", f"http://127.0.0.1:{junk.port}/x.txt", str(tmp_path / "x")), rc=1)
    assert "not valid HTTP" in err and len(err) < 240, err
    ftp_port = server.port
    err = _refused(drsftp("get", f"http://127.0.0.1:{ftp_port}/small.txt", str(tmp_path / "x")), rc=1)
    assert "answered like an FTP server ('220 " in err and "use ftp://" in err, err
    web_port = web.port
    for url, plain in ((f"https://127.0.0.1:{web_port}/small.txt", "http://"),
                       (f"ftps://127.0.0.1:{ftp_port}/small.txt", "ftp://")):
        err = _refused(drsftp("get", url, str(tmp_path / "x")), rc=1)
        assert f"is it a plain-text port? use {plain}" in err, err
    assert not (tmp_path / "x").exists()


def test_a_job_says_a_local_error_in_words(server, tmp_path):
    """A name the local file system cannot hold with ".part" after it: the
    file fails in words, not as "[Errno 36] ...: '...part'"; the rest is got."""
    tree = Path(server.root) / "t"
    tree.mkdir()
    (tree / ("n" * 252)).write_text("x")
    (tree / "ok.txt").write_text("y")
    r = drsftp("get", "-r", server.url("t/"), str(tmp_path / "d"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "file name too long" in r.stderr and "[Errno" not in r.stderr, r.stderr
    assert os.listdir(tmp_path / "d") == ["ok.txt"]


def test_passwd_refuses_a_home_that_serve_would_refuse(tmp_path):
    users = tmp_path / "users"
    for home, words in (("/srv/a:b", "cannot hold ':'"), ("data:x", "cannot hold ':'"),
                        (str(tmp_path / "missing"), "is not a directory")):
        r = drsftp("passwd", "--password-stdin", "--home", home, str(users), "alice", input="a-long-password\n")
        assert words in _refused(r), r.stderr
    assert not users.exists()
    r = drsftp("passwd", "--password-stdin", "--home", str(tmp_path), str(users), "alice", input="a-long-password\n")
    assert r.returncode == 0, r.stderr
    assert users.read_text().count(":") == 3
