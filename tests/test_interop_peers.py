"""Interop with the peers README names, as real processes on loopback: lftp
against `drsftp serve`, and the drsftp client against vsftpd.  A missing
program fails the test (`./run` installs both)."""

import json
import os
import re
import shutil
import socket
import subprocess

import pytest
from conftest import (
    PASSWORD,
    USER,
    drsftp,
    make_file,
    running_server,
    sha256_file,
    wait_until,
)


def _lftp(port, cwd, script, timeout=120):
    """Run an lftp script against 127.0.0.1:port with debug output (the FTP
    commands it sent); HOME is the test's, so no user rc file takes part."""
    lftp = shutil.which("lftp")
    assert lftp, "lftp is installed by ./run (Debian package lftp)"
    prelude = "set cmd:fail-exit yes; set ftp:ssl-allow no; set net:max-retries 1; set net:timeout 20; "
    r = subprocess.run([lftp, "-d", "-u", f"{USER},{PASSWORD}", "-p", str(port), "-e", prelude + script + "; bye",
                        "127.0.0.1"], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, HOME=str(cwd)), check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stderr  # lftp -d writes the dialogue to stderr


def _tree(top):
    """{relative path: sha256} of the files under top."""
    out = {}
    for d, _, files in os.walk(top):
        for name in files:
            path = os.path.join(d, name)
            out[os.path.relpath(path, top)] = sha256_file(path)
    return out


@pytest.fixture
def lftp_case(tmp_path):
    root, local = tmp_path / "srv", tmp_path / "local"
    (root / "d" / "sub").mkdir(parents=True)
    local.mkdir()
    make_file(root / "f.bin", 6 << 20, seed=70)
    make_file(root / "d" / "a.bin", 300_001, seed=71)
    make_file(root / "d" / "sub" / "b.bin", 1 << 20, seed=72)
    (root / "d" / "empty.txt").write_bytes(b"")
    with running_server(root) as srv:
        yield srv, root, local


def test_lftp_get_and_put_against_drsftp_serve(lftp_case):
    srv, root, local = lftp_case
    _lftp(srv.port, local, "get f.bin -o g.bin; put g.bin -o up.bin")
    assert sha256_file(local / "g.bin") == sha256_file(root / "f.bin") == sha256_file(root / "up.bin")
    assert not list(root.glob(".*.part"))  # the upload's temporary name is gone


def test_lftp_pget_uses_several_ranges(lftp_case):
    _, root, local = lftp_case
    # 8 KiB buffers at the server: the first connection must not finish
    # the file before pget opens the others
    with running_server(root, "--tuning", "fixed:8k") as slow:
        log = _lftp(slow.port, local, "set pget:min-chunk-size 512k; pget -n 4 f.bin -o p.bin")
    assert sha256_file(local / "p.bin") == sha256_file(root / "f.bin")
    offsets = {int(m) for m in re.findall(r"---> REST (\d+)", log)}
    assert len(offsets - {0}) >= 3, log[-2000:]  # four connections, each from its own offset


def test_lftp_mirror_both_ways(lftp_case):
    srv, root, local = lftp_case
    _lftp(srv.port, local, "mirror d m; mirror -R m back")
    assert _tree(local / "m") == _tree(root / "d") == _tree(root / "back")
    assert len(_tree(root / "d")) == 3


def test_lftp_resumes_a_partial_get(lftp_case):
    srv, root, local = lftp_case
    with open(root / "f.bin", "rb") as f:
        (local / "r.bin").write_bytes(f.read(2_000_000))
    log = _lftp(srv.port, local, "get -c f.bin -o r.bin")
    assert "---> REST 2000000" in log  # resumed, not fetched again
    assert sha256_file(local / "r.bin") == sha256_file(root / "f.bin")


# -- drsftp client against vsftpd ------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def vsftpd(tmp_path):
    """vsftpd on 127.0.0.1 for anonymous users with upload, overwrite and
    resume rights in pub/ (vsftpd refuses a writable anonymous root).
    Yields (pub directory, URL prefix); ended by PID."""
    binary = shutil.which("vsftpd") or ("/usr/sbin/vsftpd" if os.path.exists("/usr/sbin/vsftpd") else None)
    assert binary, "vsftpd is installed by ./run (Debian package vsftpd)"
    if os.geteuid() != 0:
        pytest.fail("vsftpd needs root (it chroots and changes to the ftp user)")
    root = tmp_path / "vsroot"
    pub = root / "pub"
    pub.mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(root, 0o755)
    ftp_uid = int(subprocess.run(["id", "-u", "ftp"], capture_output=True, text=True, check=True).stdout)
    os.chown(pub, ftp_uid, -1)
    empty = tmp_path / "empty"
    empty.mkdir()
    port = _free_port()
    conf = tmp_path / "vsftpd.conf"
    conf.write_text("\n".join([
        "listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", f"listen_port={port}", "background=NO",
        "anonymous_enable=YES", "local_enable=NO", "no_anon_password=YES", f"anon_root={root}",
        "write_enable=YES", "anon_upload_enable=YES", "anon_other_write_enable=YES", "anon_umask=022",
        f"secure_chroot_dir={empty}", "seccomp_sandbox=NO", "isolate=NO", "isolate_network=NO",
        "xferlog_enable=NO", "pasv_enable=YES", ""]))
    proc = subprocess.Popen([binary, str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return proc.poll() is not None
    try:
        assert wait_until(up, timeout=10) and proc.poll() is None, proc.stdout.read() if proc.poll() else ""
        yield pub, f"ftp://anonymous:x@127.0.0.1:{port}/pub/", ftp_uid
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


@pytest.mark.root
def test_drsftp_get_put_and_resume_against_vsftpd(vsftpd, tmp_path):
    pub, url, ftp_uid = vsftpd
    src = make_file(pub / "v.bin", 5 << 20, seed=73)
    r = drsftp("get", url + "v.bin", str(tmp_path / "v.bin"), "--progress", "never", timeout=60)
    assert r.returncode == 0, r.stderr
    assert sha256_file(tmp_path / "v.bin") == sha256_file(src)
    r = drsftp("put", str(src), url + "up.bin", "--progress", "never", timeout=60)
    assert r.returncode == 0, r.stderr
    assert sha256_file(pub / "up.bin") == sha256_file(src)
    # resume a get from a local .part, and a put from what the server holds
    with open(src, "rb") as f:
        head = f.read(2_000_000)
    (tmp_path / "g.bin.part").write_bytes(head)
    r = drsftp("get", url + "v.bin", str(tmp_path / "g.bin"), "--continue", "--progress", "never",
               "--json", str(tmp_path / "g.json"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert sha256_file(tmp_path / "g.bin") == sha256_file(src)
    (pub / "p.bin").write_bytes(head)
    os.chown(pub / "p.bin", ftp_uid, -1)
    r = drsftp("put", str(src), url + "p.bin", "--continue", "--progress", "never",
               "--json", str(tmp_path / "p.json"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert sha256_file(pub / "p.bin") == sha256_file(src)

    for name in ("g.json", "p.json"):
        report = json.loads((tmp_path / name).read_text())
        assert report["resumed_from"] == 2_000_000 and report["bytes"] == (5 << 20) - 2_000_000, report


@pytest.mark.root
def test_a_put_whose_file_shrinks_fails_though_vsftpd_says_226(vsftpd, tmp_path, monkeypatch):
    """vsftpd takes a short upload as whole (no ALLO check): the client
    counts what went."""
    from test_bad_input import shrinking_put

    pub, url, _ = vsftpd
    src = make_file(tmp_path / "src.bin", 4 << 20, seed=5)
    exc = shrinking_put(monkeypatch, src, url + "short.bin")
    assert "shrank during the upload: 1048576 of 4194304 bytes went" in str(exc) and not exc.transient
    assert os.path.getsize(pub / "short.bin") == 1 << 20  # (what the server kept; the client said so)


@pytest.mark.root
def test_drsftp_verify_against_vsftpd_without_hash_is_a_clear_error(vsftpd, tmp_path):
    pub, url, _ = vsftpd
    make_file(pub / "h.bin", 1 << 20, seed=74)
    r = drsftp("get", url + "h.bin", str(tmp_path / "h.bin"), "--verify", "--progress", "never", timeout=60)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "drsftp: error: --verify: the server does not offer HASH; the file was not verified")
    assert not (tmp_path / "h.bin").exists()  # not presented as complete
    r = drsftp("put", str(pub / "h.bin"), url + "h2.bin", "--verify", "--progress", "never", timeout=60)
    assert r.returncode == 1 and "does not offer HASH" in r.stderr and "Traceback" not in r.stderr, r.stderr
