"""Interop with stock peers, and the CLI's handling of bad input."""

import ftplib
import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import PASSWORD, USER, drsftp, make_file, running_server, sha256_file


def test_python_ftplib_client_against_drsftp_server(server, tmp_path):
    src = make_file(tmp_path / "a.bin", 20 << 20, seed=10)
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", server.port, timeout=30)
    ftp.login(USER, PASSWORD)
    with open(src, "rb") as f:
        ftp.storbinary("STOR a.bin", f, blocksize=1 << 20)
    out = tmp_path / "back.bin"
    with open(out, "wb") as f:
        ftp.retrbinary("RETR a.bin", f.write, blocksize=1 << 20)
    assert ftp.size("a.bin") == 20 << 20
    ftp.quit()
    assert sha256_file(out) == sha256_file(src) == sha256_file(os.path.join(server.root, "a.bin"))


def test_curl_client_against_drsftp_server(server, tmp_path):
    curl = shutil.which("curl")
    assert curl, "curl is installed by .ci/run"
    src = make_file(tmp_path / "c.bin", 24 << 20, seed=11)
    r = subprocess.run([curl, "-sS", "-T", str(src), server.url("c.bin")], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "c.out"
    r = subprocess.run([curl, "-sS", "-o", str(out), server.url("c.bin")], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sha256_file(out) == sha256_file(src)


def test_drsftp_client_against_stock_pyftpdlib(stock_server, tmp_path):
    root, port = stock_server
    src = make_file(root / "s.bin", 32 << 20, seed=12)
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/s.bin"
    r = drsftp("get", url, str(tmp_path / "s.bin"), "--json", str(tmp_path / "j"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(tmp_path / "s.bin") == sha256_file(src)
    report = json.loads((tmp_path / "j").read_text())
    assert report["drs_peer"] is False and report["drs_replies"] == 0
    assert r.stderr.count("does not offer DRS") == 1  # said once
    r = drsftp("put", str(src), url.replace("s.bin", "s2.bin"))
    assert r.returncode == 0, r.stderr
    assert sha256_file(root / "s2.bin") == sha256_file(src)


def _one_clean_line(r, code, pattern):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines and re.search(pattern, lines[-1]), r.stderr


def test_cli_errors_are_one_line_and_non_zero(server, tmp_path):
    url = f"ftp://{USER}:wrong@127.0.0.1:{server.port}/x"
    _one_clean_line(drsftp("get", url, str(tmp_path / "x")), 1, "login refused")
    _one_clean_line(drsftp("get", server.url("missing.bin"), str(tmp_path / "m")), 1, "550")
    assert not os.path.exists(tmp_path / "m") and not os.path.exists(str(tmp_path / "m") + ".part")
    with socketclosed_port() as port:
        _one_clean_line(drsftp("get", f"ftp://a:b@127.0.0.1:{port}/f", str(tmp_path / "u")), 1,
                        "cannot connect")
    _one_clean_line(drsftp("put", str(tmp_path / "nope"), server.url("n")), 1, "cannot read")
    _one_clean_line(drsftp("get", "gopher://x/y"), 2, "not an ftp:// URL")
    _one_clean_line(drsftp("get", server.url("x"), "--tuning", "warp"), 2, "unknown tuning")
    _one_clean_line(drsftp("serve", "--root", str(tmp_path / "none"), "--user", "a", "--password", "b"),
                    2, "root directory does not exist")
    _one_clean_line(drsftp("serve", "--root", str(tmp_path)), 2, "--user")


class socketclosed_port:
    """A loopback port nobody listens on."""

    def __enter__(self):
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        return self.port

    def __exit__(self, *exc):
        return False


def test_fixed_tuning_at_both_ends_reproduces_stock_buffers(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    make_file(root / "f.bin", 8 << 20, seed=13)
    with running_server(root, "--tuning", "fixed:64k") as srv:
        r = drsftp("get", srv.url("f.bin"), str(tmp_path / "f"), "--tuning", "fixed:64k",
                   "--json", str(tmp_path / "j"))
        assert r.returncode == 0, r.stderr
        report = json.loads((tmp_path / "j").read_text())
        assert report["peak_rcvbuf"] == 2 * 65536  # set once, before the handshake, never grown
        assert report["tuning"] == "fixed:65536"


def test_buffer_budget_argument_takes_a_size_or_off():
    from drsftp.server.cli import budget_arg as _budget_arg
    from drsftp.server.config import ConfigError as UsageError

    assert _budget_arg("16MiB") == 16 << 20
    assert _budget_arg("off") is None and _budget_arg("OFF") is None
    for bad in ("lots", "0"):
        with pytest.raises(UsageError, match="--buffer-budget"):
            _budget_arg(bad)
