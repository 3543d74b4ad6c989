"""Access control and a property-based fuzz of the control channel."""

import os
import re
import socket
import subprocess
import time

import psutil
import pytest
from conftest import PY, ServerProcess, drsftp, make_file, running_server, sha256_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drsftp.server.ops.users import check_password, hash_password, read_users


def test_password_hashing():
    h = hash_password("correct horse")
    assert h.startswith("scrypt$") and "correct" not in h
    assert check_password(h, "correct horse") and not check_password(h, "correct hors")
    assert not check_password("scrypt$garbage", "x") and not check_password("plain", "plain")


@pytest.fixture
def users_server(tmp_path):
    root = tmp_path / "root"
    (root / "alice").mkdir(parents=True)
    (root / "fuzz").mkdir()
    users = tmp_path / "users"
    for name, home, extra in (("alice", "alice", []), ("fuzz", "fuzz", ["--read-only"])):
        r = subprocess.run([PY, "-m", "drsftp", "passwd", str(users), name, "--home", home, "--password-stdin",
                            *extra], check=False, input=f"{name}-password\n", capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    assert "alice-password" not in users.read_text()
    assert oct(os.stat(users).st_mode & 0o777) == "0o600"
    assert [(u.name, u.home) for u in read_users(str(users), str(root))] == [
        ("alice", str(root / "alice")), ("fuzz", str(root / "fuzz"))]  # relative homes: below --root
    srv = ServerProcess(root, cmd=[PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0",
                                   "--users", str(users)])
    yield srv, root
    srv.stop()


def _login(port, user, password):
    import ftplib

    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=10)
    ftp.login(user, password)
    return ftp


def test_users_file_homes_permissions_and_no_anonymous(users_server):
    import ftplib
    import io

    srv, root = users_server
    ftp = _login(srv.port, "alice", "alice-password")
    ftp.storbinary("STOR mine.bin", io.BytesIO(b"x" * 100))
    assert os.path.exists(root / "alice" / "mine.bin")  # her home, not the root
    ftp.quit()
    ro = _login(srv.port, "fuzz", "fuzz-password")
    with pytest.raises(ftplib.error_perm, match="550"):
        ro.storbinary("STOR x.bin", io.BytesIO(b"x"))
    with pytest.raises(ftplib.error_perm, match="550"):
        ro.sendcmd("RETR ../alice/mine.bin")
    ro.quit()
    for user, pw in (("alice", "wrong"), ("anonymous", "guest@"), ("nobody", "x")):
        with pytest.raises(ftplib.error_perm, match="530"):
            _login(srv.port, user, pw)


# -- fuzzing ---------------------------------------------------------------
VERBS = ["USER", "PASS", "DRS", "RETR", "STOR", "APPE", "LIST", "NLST", "MLSD", "MLST", "SIZE", "MDTM",
         "PASV", "EPSV", "PORT", "EPRT", "REST", "TYPE", "MODE", "STRU", "CWD", "CDUP", "PWD", "MKD",
         "RMD", "DELE", "RNFR", "RNTO", "SITE", "STAT", "HELP", "NOOP", "FEAT", "OPTS", "HASH", "ABOR",
         "ALLO", "SYST", "REIN", "XYZZY", "drs", "Retr"]
numbers = st.one_of(st.integers(-10**30, 10**30).map(str), st.sampled_from(["1e9", "nan", "-0", "", "0x10"]))
drs_args = st.lists(st.builds(lambda k, v: f"{k}={v}",
                              st.sampled_from(["rtt_us", "cwnd", "wnd", "rate", "bytes", "inflight", "x", "A"]),
                              numbers), max_size=20).map(" ".join)
lines = st.one_of(
    st.builds(lambda v, a: f"{v} {a}".rstrip().encode("utf-8", "surrogatepass"),
              st.sampled_from(VERBS), st.one_of(st.text(max_size=60), drs_args, numbers)),
    st.binary(max_size=200),  # non-UTF-8 and control bytes
    st.integers(2000, 9000).map(lambda n: b"DRS " + b"9" * n),  # over-long
).filter(lambda b: b"\r\n" not in b)  # one line is one command (and one reply)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        assert self.reply().startswith(b"220")

    def reply(self) -> bytes:
        """One complete reply (RFC 959 4.2); fails the test on garbage."""
        first = None
        while True:
            while b"\r\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return b"<closed>"
                self.buf += chunk
            line, self.buf = self.buf.split(b"\r\n", 1)
            m = re.match(rb"^([1-5]\d\d)([ -])", line)
            if first is None:
                assert m, line
                first = m.group(1)
                if m.group(2) == b" ":
                    return line
            elif m and m.group(1) == first and m.group(2) == b" ":
                return line

    def send(self, data: bytes) -> bytes:
        self.sock.sendall(data + b"\r\n")
        return self.reply()


@pytest.mark.slow
def test_fuzz_control_channel_while_an_honest_transfer_completes(users_server, tmp_path):
    srv, root = users_server
    src = make_file(root / "alice" / "honest.bin", 96 << 20, seed=40)
    make_file(root / "fuzz" / "f.bin", 8 << 20, seed=41)
    proc = psutil.Process(srv.proc.pid)
    rss0 = proc.memory_info().rss
    # the honest client, slowed (64 KiB buffers) so it runs through the fuzzing
    honest = subprocess.Popen([PY, "-m", "drsftp", "get", f"ftp://alice:alice-password@127.0.0.1:{srv.port}/honest.bin",
                               str(tmp_path / "honest.bin"), "--tuning", "fixed:64k"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stalled = Conn(srv.port)  # a session in the middle of a transfer
    stalled.send(b"USER fuzz")
    stalled.send(b"PASS fuzz-password")
    stalled.send(b"TYPE I")
    port = int(re.search(rb"\|\|\|(\d+)\|", stalled.send(b"EPSV")).group(1))
    data = socket.create_connection(("127.0.0.1", port))
    data.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    assert stalled.send(b"RETR f.bin")[:1] == b"1"
    seen = set()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(lines, min_size=1, max_size=6), st.sampled_from(["anonymous", "idle", "transfer"]))
    def fuzz(cmds, state):
        """Not logged in; logged in and idle; in the middle of a transfer."""
        if state == "transfer":
            c = stalled
        else:
            c = Conn(srv.port)
            if state == "idle":
                c.send(b"USER fuzz")
                assert c.send(b"PASS fuzz-password").startswith(b"230")
        try:
            last = None
            for cmd in cmds:
                if cmd.upper().startswith((b"QUIT", b"REIN", b"ABOR", b"USER", b"PASS")) and c is stalled:
                    continue  # keep the transfer session alive
                r = c.send(cmd)
                if r == b"<closed>":
                    # only a session told so may end: 221 (QUIT), 421, or the
                    # 530 after too many failed logins; never the transfer's
                    assert c is not stalled, f"the transfer's session was dropped after {cmd!r}"
                    assert last is not None and (last.startswith((b"221", b"421")) or (
                        last.startswith(b"530") and b"Disconnecting" in last)), (
                        f"session dropped after {cmd!r} without a closing reply (last: {last!r})")
                    return
                last = r
                seen.add(r[:3])
                if len(cmd) > 2048:
                    assert r.startswith(b"500"), r
        finally:
            if c is not stalled:
                c.sock.close()

    deadline = time.monotonic() + 240
    fuzz()
    assert time.monotonic() < deadline
    assert srv.proc.poll() is None, "the server died"
    assert b"501" in seen and b"530" in seen and (b"503" in seen or b"200" in seen)
    # the stalled transfer is intact after all of it
    got = bytearray()
    while chunk := data.recv(1 << 20):
        got += chunk
    data.close()
    with open(root / "fuzz" / "f.bin", "rb") as f:
        assert bytes(got) == f.read()
    assert stalled.reply().startswith(b"226")
    _, err = honest.communicate(timeout=300)
    assert honest.returncode == 0, err
    assert sha256_file(tmp_path / "honest.bin") == sha256_file(src)
    assert proc.memory_info().rss - rss0 < 64 << 20  # no unbounded allocation


def _self_signed(tmp_path):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    pem = tmp_path / "cert.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return pem


def test_ftps_with_require_tls(tmp_path):
    import ftplib
    import ssl

    from conftest import PASSWORD, USER

    root = tmp_path / "root"
    root.mkdir()
    src = make_file(root / "t.bin", 6 << 20, seed=42)
    pem = _self_signed(tmp_path)
    with running_server(root, "--tls-cert", str(pem), "--require-tls") as srv:
        plain = ftplib.FTP()
        plain.connect("127.0.0.1", srv.port, timeout=10)
        with pytest.raises(ftplib.error_perm, match="SSL/TLS required"):
            plain.login(USER, PASSWORD)
        plain.close()
        ctx = ssl.create_default_context(cafile=str(pem))
        ctx.check_hostname = False
        tls = ftplib.FTP_TLS(context=ctx)
        tls.connect("127.0.0.1", srv.port, timeout=10)
        tls.login(USER, PASSWORD)  # AUTH TLS first
        assert " DRS" in tls.sendcmd("FEAT")
        with pytest.raises(ftplib.error_perm, match="SSL/TLS required on the data channel"):
            tls.retrbinary("RETR t.bin", lambda b: None)  # data in clear refused
        tls.prot_p()
        got = bytearray()
        tls.retrbinary("RETR t.bin", got.extend, blocksize=1 << 20)
        import io

        tls.storbinary("STOR back.bin", io.BytesIO(bytes(got)), blocksize=1 << 20)
        tls.quit()
        assert hashlib_sha(bytes(got)) == sha256_file(src) == sha256_file(root / "back.bin")
    r = drsftp("serve", "--root", str(root), "--user", "a", "--password", "b", "--require-tls")
    assert r.returncode == 2 and "--tls-cert" in r.stderr


def hashlib_sha(b):
    import hashlib

    return hashlib.sha256(b).hexdigest()


def test_a_nul_byte_in_an_argument_is_a_501_not_a_lost_session(users_server):
    """pyftpdlib hands path arguments to os.path.realpath, whose ValueError
    on a NUL byte closed the session (the fuzzer found it mid-transfer)."""
    srv, _root = users_server
    c = Conn(srv.port)
    c.send(b"USER fuzz")
    assert c.send(b"PASS fuzz-password").startswith(b"230")
    for cmd in (b"CWD a\x00b", b"RETR f\x00.bin", b"SIZE \x00", b"DRS rtt_us=1\x00"):
        assert c.send(cmd).startswith(b"501"), cmd
    assert c.send(b"NOOP").startswith(b"200")
    c.sock.close()
