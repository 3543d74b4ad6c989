"""`drsftp serve --implicit-tls-port`: implicit FTPS (``ftps://``), TLS
before the 220 greeting and PBSZ 0 / PROT P in force without being sent
([MS-FTPS], "Control Connection Negotiation with Implicit FTPS"), beside
the explicit listener.  The drsftp client and curl with ftps:// URLs, a
raw client that sends no PBSZ/PROT, a clear-text client, refusals under
TLS, and the option's and the TOML key's errors.  Missing programs fail
the test."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, drsftp, make_file, sha256_file
from test_tls import certs  # noqa: F401 (a fixture)

MiB = 1 << 20


class ImplicitServer(ServerProcess):
    """drsftp serve --tls-cert --implicit-tls-port 0; ``tls_port`` is the
    port of its second `listening` line."""

    def __init__(self, root, certs_, *extra):
        super().__init__(root, "--tls-cert", str(certs_.good), "--implicit-tls-port", "0", *extra)
        line = self.proc.stdout.readline()
        m = re.fullmatch(r"drsftp serve: implicit FTPS \(ftps://\) on 127\.0\.0\.1:(\d+)\n", line)
        if not m:
            self.stop()
            raise AssertionError(f"no implicit FTPS listening line: {line!r}")
        self.tls_port = int(m.group(1))

    def ftps_url(self, path):
        return f"ftps://{USER}:{PASSWORD}@127.0.0.1:{self.tls_port}/{path}"


@pytest.fixture
def implicit_server(tmp_path, certs):  # noqa: F811 (the imported fixture)
    root = tmp_path / "srv"
    root.mkdir()
    srv = ImplicitServer(root, certs, "--require-tls")
    try:
        yield srv
    finally:
        srv.stop()


def test_drsftp_ftps_urls_get_and_put_stream_mode_and_mode_e(tmp_path, implicit_server, certs):  # noqa: F811
    srv = implicit_server
    src = make_file(tmp_path / "src.bin", 6 * MiB + 7, seed=61)
    ca = ("--ca-file", str(certs.ca), "--progress", "never")
    for extra, name in (((), "one"), (("-P", "3"), "three")):
        r = drsftp("put", *extra, *ca, str(src), srv.ftps_url(f"{name}.bin"), timeout=120)
        assert r.returncode == 0, r.stderr
        assert sha256_file(f"{srv.root}/{name}.bin") == sha256_file(src)
        r = drsftp("get", *extra, *ca, "--json", str(tmp_path / f"{name}.json"), srv.ftps_url(f"{name}.bin"),
                   str(tmp_path / f"{name}-got.bin"), timeout=120)
        assert r.returncode == 0, r.stderr
        assert sha256_file(tmp_path / f"{name}-got.bin") == sha256_file(src)
    assert '"mode": "E"' in (tmp_path / "three.json").read_text()  # MODE E streams under implied PROT P


def test_curl_ftps_get_and_put(tmp_path, implicit_server, certs):  # noqa: F811
    curl = shutil.which("curl")
    assert curl, "curl is installed by ./run"
    srv = implicit_server
    src = make_file(f"{srv.root}/c.bin", 4 * MiB, seed=62)
    base = [curl, "-sS", "--cacert", str(certs.ca)]
    r = subprocess.run([*base, "-o", str(tmp_path / "c.bin"), srv.ftps_url("c.bin")], capture_output=True,
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sha256_file(tmp_path / "c.bin") == sha256_file(src)
    r = subprocess.run([*base, "-T", str(tmp_path / "c.bin"), srv.ftps_url("c-up.bin")], capture_output=True,
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sha256_file(f"{srv.root}/c-up.bin") == sha256_file(src)


class TLSControl:
    """A control connection in TLS from its first byte, as an implicit
    FTPS client opens it."""

    def __init__(self, port, ca):
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.sock = self.ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                                         server_hostname="127.0.0.1")
        self.f = self.sock.makefile("rb")

    def reply(self):
        line = self.f.readline().decode()
        while line[3:4] == "-":  # a multi-line reply: its last line
            nxt = self.f.readline().decode()
            if nxt.startswith(line[:3] + " "):
                return nxt
        return line

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\r\n")
        return self.reply()

    def login(self):
        assert self.cmd(f"USER {USER}").startswith("331")
        assert self.cmd(f"PASS {PASSWORD}").startswith("230")
        assert self.cmd("TYPE I").startswith("200")

    def retr_over_tls(self, name):
        """PASV, RETR, and the data connection's TLS handshake: the bytes."""
        reply = self.cmd("PASV")
        nums = reply[reply.index("(") + 1:reply.index(")")].split(",")
        port = int(nums[4]) * 256 + int(nums[5])
        data = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.sendall(f"RETR {name}\r\n".encode())
        assert self.reply()[:3] in ("125", "150")  # (125: the connection came first)
        with self.ctx.wrap_socket(data, server_hostname="127.0.0.1") as tls:
            got = b"".join(iter(lambda: tls.recv(1 << 20), b""))
        assert self.reply().startswith("226")
        return got

    def close(self):
        self.sock.close()


def test_tls_comes_before_the_greeting_and_data_is_tls_without_pbsz_or_prot(implicit_server, certs):  # noqa: F811
    srv = implicit_server
    payload = make_file(f"{srv.root}/p.bin", 2 * MiB, seed=63)
    ctl = TLSControl(srv.tls_port, certs.ca)
    try:
        assert ctl.reply().startswith("220 ")
        assert ctl.cmd("AUTH TLS").startswith("503")  # TLS is on already
        ctl.login()  # --require-tls: accepted, the control connection is TLS
        expected = Path(payload).read_bytes()
        assert ctl.retr_over_tls("p.bin") == expected  # no PBSZ/PROT sent: PROT P in force
        assert ctl.cmd("REIN").startswith("2")  # a new session on the same connection: still PROT P
        ctl.login()
        assert ctl.retr_over_tls("p.bin") == expected
    finally:
        ctl.close()


def _until_closed(s):
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except ConnectionResetError:  # closed with our line unread
        pass
    return got


def test_a_clear_text_client_gets_no_greeting(implicit_server):
    with socket.create_connection(("127.0.0.1", implicit_server.tls_port), timeout=20) as s:
        s.sendall(b"USER " + USER.encode() + b"\r\n")  # not a ClientHello: the server ends the connection
        got = _until_closed(s)
    assert b"220" not in got and USER.encode() not in got, got


def test_a_refused_session_hears_why_over_tls(tmp_path, certs):  # noqa: F811
    """One session per address (--max-connections-per-ip 1), counted over
    both listeners: a second one gets its 421 after the handshake."""
    root = tmp_path / "srv"
    root.mkdir()
    srv = ImplicitServer(root, certs, "--max-connections-per-ip", "1")
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=20) as plain:
            assert plain.recv(100).startswith(b"220 ")  # the explicit listener's session
            ctl = TLSControl(srv.tls_port, certs.ca)
            try:
                assert ctl.reply().startswith("421 Too many connections from the same IP address")
            finally:
                ctl.close()
    finally:
        srv.stop()


@pytest.mark.parametrize(("args", "toml", "error"), [
    (("--implicit-tls-port", "0"), "", "--implicit-tls-port needs --tls-cert"),
    ((), "implicit_tls_port = 0\n", "{f}: implicit_tls_port needs tls_cert"),
    ((), "implicit_tls_port = 99999\n", "{f}:5: implicit_tls_port must be 0-65535 (0: any free port), not 99999"),
    (("--implicit-tls-port", "-2"), "", "--implicit-tls-port must be 0-65535 (0: any free port), not -2"),
    (("--tls-cert", "c.pem", "--port", "2122", "--implicit-tls-port", "2122"), "",
     "--implicit-tls-port 2122 is --port too: give the implicit FTPS listener a port of its own"),
])
def test_option_and_key_errors_are_one_sentence(tmp_path, args, toml, error):
    f = tmp_path / "drsftp.toml"
    (tmp_path / "srv").mkdir()  # a root that does not hold the config file (docs/SECURITY.md, "Homes")
    f.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n{toml}')
    r = drsftp("serve", "--config", str(f), *args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drsftp: error: " + error.format(f=f)), r.stderr


def test_the_toml_key_opens_the_listener(tmp_path, certs):  # noqa: F811
    (tmp_path / "srv").mkdir()
    payload = make_file(tmp_path / "srv" / "k.bin", MiB, seed=64)
    f = tmp_path / "drsftp.toml"
    f.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                 f'tls_cert = "{certs.good}"\nimplicit_tls_port = 0\n')
    srv = ServerProcess("", cmd=[PY, "-m", "drsftp", "serve", "--config", str(f)])
    try:
        port = int(re.search(r":(\d+)$", srv.proc.stdout.readline().strip()).group(1))
        r = drsftp("get", "--ca-file", str(certs.ca), f"ftps://{USER}:{PASSWORD}@127.0.0.1:{port}/k.bin",
                   str(tmp_path / "k.bin"))
        assert r.returncode == 0, r.stderr
    finally:
        srv.stop()
    assert sha256_file(tmp_path / "k.bin") == sha256_file(payload)
