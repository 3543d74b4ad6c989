"""Hostile input, integrity and shutdown against a live server (loopback)."""

import ftplib
import hashlib
import json
import os
import signal
import socket
import time

import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    drsftp,
    ftp_session,
    make_file,
    reply_of,
    running_server,
    sha256_file,
    start_stalled_retr,
)


def test_hash_command_and_verify(server, tmp_path):
    src = make_file(os.path.join(server.root, "h.bin"), 9_000_001, seed=30)
    ftp = ftp_session(server.port)
    assert "HASH SHA-256*" in ftp.sendcmd("FEAT")
    reply = ftp.sendcmd("HASH h.bin")
    assert reply == f"213 SHA-256 0-9000000 {sha256_file(src)} /h.bin"
    assert ftp.sendcmd("OPTS HASH MD5") == "200 MD5"
    with open(src, "rb") as f:
        md5 = hashlib.md5(f.read()).hexdigest()
    assert ftp.sendcmd("HASH h.bin").split()[3] == md5
    assert reply_of(ftp, "HASH missing.bin").startswith("550")
    assert reply_of(ftp, "HASH ../../etc/passwd").startswith("550")
    assert reply_of(ftp, "OPTS HASH CRC-99").startswith("501")
    ftp.quit()
    r = drsftp("get", server.url("h.bin"), str(tmp_path / "h"), "--verify", "--json", str(tmp_path / "j"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "j").read_text())["sha256"] == sha256_file(src)
    r = drsftp("put", str(src), server.url("h2.bin"), "--verify")
    assert r.returncode == 0, r.stderr


def test_verify_fails_loudly_when_the_server_has_no_hash(stock_server, tmp_path):
    root, port = stock_server
    make_file(root / "s.bin", 1 << 20, seed=31)
    r = drsftp("get", f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/s.bin", str(tmp_path / "s"), "--verify")
    assert r.returncode == 1 and "not verified" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s").exists()  # not presented as complete


def test_drs_command_is_rate_limited(server):
    make_file(os.path.join(server.root, "r.bin"), 32 << 20, seed=32)
    ftp = ftp_session(server.port)
    data, _ = start_stalled_retr(ftp, "r.bin")
    replies = [reply_of(ftp, "DRS rtt_us=1000") for _ in range(60)]
    assert any(r.startswith("200 DRS") for r in replies)
    limited = [r for r in replies if r.startswith("503 DRS rate limit")]
    assert 20 <= len(limited) <= 45, len(limited)
    time.sleep(0.3)
    assert reply_of(ftp, "DRS").startswith("200 DRS")  # the bucket refills
    data.close()
    ftp.close()


def test_paths_stay_inside_the_root(server, tmp_path):
    """Every path resolves inside the root (RFC 959 paths under the user's
    home): '..' stops at it, absolute paths start from it, a symlink out of
    it is refused.  Where the path names a file inside the root, that file
    is served; the host's own file never is."""
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(str(tmp_path), os.path.join(server.root, "escape"))
    os.mkdir(os.path.join(server.root, "etc"))
    inside_passwd, inside_secret = b"the root's own etc/passwd\n", b"the root's own secret\n"
    with open(os.path.join(server.root, "etc", "passwd"), "wb") as f:
        f.write(inside_passwd)
    with open(os.path.join(server.root, "secret.txt"), "wb") as f:
        f.write(inside_secret)
    with open("/etc/passwd", "rb") as f:
        host_files = {f.read(), b"secret"}
    ftp = ftp_session(server.port)
    for path, inside in (("../secret.txt", inside_secret), ("/../secret.txt", inside_secret),
                         ("../../../../etc/passwd", inside_passwd), ("/etc/passwd", inside_passwd),
                         ("escape/secret.txt", None), (str(outside), None)):
        got = []
        try:
            ftp.retrbinary(f"RETR {path}", got.append)
        except ftplib.error_perm as exc:
            assert inside is None and str(exc).startswith("550"), (path, exc)
        served = b"".join(got)
        assert served not in host_files, path
        assert served == (inside or b""), path  # the file inside the root, or nothing
        size = reply_of(ftp, f"SIZE {path}")
        assert size == f"213 {len(inside)}" if inside else size.startswith("550"), (path, size)
    assert reply_of(ftp, "CWD escape").startswith("550")
    ftp.quit()


def test_sigterm_lets_a_running_transfer_finish_then_exits_0(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    src = make_file(root / "g.bin", 24 << 20, seed=33)
    with running_server(root, "--grace", "20") as srv:
        ftp = ftp_session(srv.port)
        idle = ftp_session(srv.port)
        data, head = start_stalled_retr(ftp, "g.bin")
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert srv.proc.poll() is None  # waiting for the transfer
        try:  # no new sessions
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
            refused = False
        except OSError:
            refused = True
        assert refused
        assert idle.getline().startswith("421")  # idle sessions are told
        got = bytearray()
        while chunk := data.recv(1 << 20):
            got += chunk
        data.close()
        assert ftp.getresp().startswith("226")
        with open(src, "rb") as f:
            assert head + bytes(got) == f.read()  # the whole file, intact
        assert srv.proc.wait(15) == 0


def test_sigterm_aborts_with_426_after_the_grace_period(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    make_file(root / "g.bin", 24 << 20, seed=34)
    with running_server(root, "--grace", "1") as srv:
        ftp = ftp_session(srv.port)
        data, _ = start_stalled_retr(ftp, "g.bin")
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(15) == 0
        assert ftp.getline().startswith("426")
        data.close()


def test_over_long_line_is_one_500_and_its_tail_never_runs(server):
    """pyftpdlib ran the tail of an over-long line as a command."""
    victim = os.path.join(server.root, "victim.bin")
    make_file(victim, 1000, seed=35)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    f = s.makefile("rb")
    f.readline()
    s.sendall(f"USER {USER}\r\nPASS {PASSWORD}\r\n".encode())
    f.readline(), f.readline()
    for pad in (2049, 4096 - len("DELE victim.bin"), 6000):
        s.sendall(b"NOOP " + b"x" * pad + b"DELE victim.bin\r\n")
        assert f.readline().startswith(b"500")
        s.sendall(b"NOOP\r\n")
        assert f.readline().startswith(b"200")  # in step: exactly one reply each
    assert os.path.exists(victim)
    s.close()


def test_connection_limits_passive_ports_and_timeouts(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    make_file(root / "t.bin", 16 << 20, seed=36)
    with running_server(root, "--max-connections-per-ip", "2", "--passive-ports", "61000-61010",
                        "--idle-timeout", "1", "--data-timeout", "1") as srv:
        a, b = ftp_session(srv.port), ftp_session(srv.port)
        third = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        assert third.makefile("rb").readline().startswith(b"421")  # too many from this address
        third.close()
        assert 61000 <= a.makepasv()[1] <= 61010
        a.close()
        # a session idle past --idle-timeout is closed with 421
        time.sleep(2.0)
        assert b.getline().startswith("421")
        b.close()
        # a transfer stalled past --data-timeout is ended
        ftp = ftp_session(srv.port)
        data, _ = start_stalled_retr(ftp, "t.bin")
        t0 = time.monotonic()
        reply = ftp.getline()
        assert reply[:3] in ("421", "426") and time.monotonic() - t0 < 10, reply
        data.close()
        ftp.close()


# A drsftp server whose HASH reports a digest of the right form that disagrees
# with the file (a corrupted store, a lying peer): the client's only defence.
_LYING_HASH = """
import sys
from drsftp.server import app
from drsftp.server.ftp import handler

def ftp_HASH(self, path):
    self.respond("213 SHA-256 0-%d %s %s" % (max(self.fs.getsize(path) - 1, 0), "ab" * 32, self.fs.fs2ftp(path)))

handler.DRSControlMixin.ftp_HASH = ftp_HASH
sys.exit(app.serve(app.ServerConfig(root=sys.argv[1], user=sys.argv[2], password=sys.argv[3], port=0)))
"""


@pytest.mark.parametrize("resume", [False, True])
def test_verify_against_a_disagreeing_hash_keeps_the_part_file(tmp_path, resume):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "v.bin", 3_000_001, seed=33)
    dest = tmp_path / "v.bin"
    part = tmp_path / "v.bin.part"
    if resume:  # a partial download resumed with --continue is checked whole
        with open(src, "rb") as f:
            part.write_bytes(f.read(1_000_000))
    cmd = [PY, "-c", _LYING_HASH, str(root), USER, PASSWORD]
    with running_server(root, cmd=cmd) as srv:
        flags = ["--verify", "--retries", "3", *(["--continue"] if resume else [])]
        r = drsftp("get", srv.url("v.bin"), str(dest), *flags, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "verification failed" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # one sentence, no retries of a sure failure
        assert not dest.exists()  # never renamed into place
        assert sha256_file(part) == sha256_file(src)  # all the bytes kept, for a look or a resume
        up = make_file(tmp_path / "u.bin", 1_000_000, seed=34)
        r = drsftp("put", str(up), srv.url("u.bin"), "--verify", timeout=60)
        assert r.returncode == 1 and "verification failed" in r.stderr and "Traceback" not in r.stderr, r.stderr
