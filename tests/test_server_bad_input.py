"""`drsftp serve` against bad input: option values out of range, TLS
files that do not load, commands before login, commands pipelined after
QUIT, a STOR onto a directory and STORs that fail before writing a byte."""

from __future__ import annotations

import os
import socket

import pytest
from conftest import PASSWORD, USER, drsftp, running_server, wait_until
from test_eblock_server import Ctl as EblockCtl
from tlscerts import make_certs

from drsftp.ftp.eblock import Desc, header
from drsftp.server import config as server_config


def _refused(args, want, tmp_path):
    """`drsftp serve ARGS` stops before it listens: exit 2, one line."""
    r = drsftp("serve", "--root", str(tmp_path), "--user", USER, "--password", PASSWORD, "--port", "0", *args,
               timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == "drsftp: error: " + want, r.stderr
    return r


# -- option values ---------------------------------------------------------------------------

PORT = "must be 0-65535 (0: any free port), not "
HOST = ("must name an address: 127.0.0.1 (this host only), or 0.0.0.0 or :: to listen on every"
        " interface")


@pytest.mark.parametrize(("args", "want"), [
    (["--port", "70000"], "--port " + PORT + "70000"),
    (["--port", "65536"], "--port " + PORT + "65536"),
    (["--port", "-1"], "--port " + PORT + "-1"),
    (["--host", ""], "--host " + HOST),
    (["--host", " "], "--host " + HOST),
    (["--idle-timeout", "-1"], "--idle-timeout must be a number of seconds, 0 or more, not -1.0"),
    (["--idle-timeout", "nan"], "--idle-timeout must be a number of seconds, 0 or more, not nan"),
    (["--data-timeout", "-3"], "--data-timeout must be a number of seconds, 0 or more, not -3.0"),
    (["--data-timeout", "inf"], "--data-timeout must be a number of seconds, 0 or more, not inf"),
    (["--grace", "nan"], "--grace must be a number of seconds, 0 or more, not nan"),
    (["--grace", "-1"], "--grace must be a number of seconds, 0 or more, not -1.0"),
    (["--grace", "inf"], "--grace must be a number of seconds, 0 or more, not inf"),
    (["--max-connections", "-5"], "--max-connections must be 0 (no limit) or more, not -5"),
    (["--max-connections-per-ip", "-1"], "--max-connections-per-ip must be 0 (no limit) or more, not -1"),
    (["--max-streams", "0"], "--max-streams must be 1 or more, not 0"),
    (["--max-streams-total", "-1"], "--max-streams-total must be 1 or more, not -1"),
    (["--buffer-budget", "-5"], "--buffer-budget must be a size such as \"256MiB\" or \"off\": not a size: '-5'"
                                " (examples: 65536, 64k, 4MiB)"),
    (["--passive-ports", "0-70000"], "--passive-ports must be LO-HI with 1024 <= LO <= HI <= 65535,"
                                     " not '0-70000'"),
    (["--passive-ports", "61000-60000"], "--passive-ports must be LO-HI with 1024 <= LO <= HI <= 65535,"
                                         " not '61000-60000'"),
    (["--passive-ports", "61000"], "--passive-ports must look like 60000-60100 (LO-HI), not '61000'"),
])
def test_an_option_out_of_range_is_one_sentence_and_exit_2(tmp_path, args, want):
    _refused(args, want, tmp_path)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "127.0.0.1", "localhost"])
def test_every_interface_is_there_when_asked_for(host):
    merged = server_config.merge({}, {"root": ".", "host": host}, None)
    assert merged["host"] == host


def test_the_limits_that_mean_something_at_their_edge_are_accepted():
    merged = server_config.merge({}, {"root": ".", "port": 65535, "grace": 0.0, "max_streams": 1,
                                      "buffer_budget": "off", "passive_ports": "1024-65535"}, None)
    assert (merged["port"], merged["grace"], merged["max_streams"]) == (65535, 0.0, 1)
    # 0 is no limit, as pyftpdlib reads timeouts and connection limits (they worked before the checks)
    merged = server_config.merge({}, {"root": ".", "idle_timeout": 0.0, "data_timeout": 0.0, "max_connections": 0,
                                      "max_connections_per_ip": 0, "buffer_budget": 0}, None)
    assert (merged["idle_timeout"], merged["max_connections_per_ip"], merged["buffer_budget"]) == (0.0, 0, 0)
    assert server_config.parse_port_range("1024-65535") == (1024, 65535)


def test_a_server_config_built_in_code_is_checked_too(tmp_path):
    from drsftp.server import ServerConfig, build_server

    for bad, want in (({"port": 70000}, "--port must be 0-65535"), ({"host": ""}, "--host must name"),
                      ({"data_timeout": float("nan")}, "--data-timeout must be"),
                      ({"max_cons": -5}, "--max-connections must be 0 \\(no limit\\) or more")):
        cfg = ServerConfig(root=str(tmp_path), user=USER, password=PASSWORD, **{"port": 0, **bad})
        with pytest.raises(server_config.ConfigError, match=want):
            build_server(cfg)


# -- TLS files ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pems(tmp_path_factory):
    d = tmp_path_factory.mktemp("pems")
    certs = make_certs(d)
    good = certs.good.read_text()
    cut = good.index("-----BEGIN PRIVATE KEY-----")
    (d / "cert.pem").write_text(good[:cut])
    (d / "key.pem").write_text(good[cut:])
    other = certs.expired.read_text()
    (d / "other-key.pem").write_text(other[other.index("-----BEGIN PRIVATE KEY-----"):])
    (d / "garbage.pem").write_text("garbage\n")
    (d / "bad-key.pem").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    (d / "a-dir").mkdir()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    (d / "encrypted-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    return d


@pytest.mark.parametrize(("cert", "key", "want"), [
    ("cert.pem", None, "the TLS certificate {d}/cert.pem holds no private key: give the key's PEM file with"
                       " --tls-key"),
    ("cert.pem", "missing.pem", "the TLS key {d}/missing.pem does not exist: give the PEM file's path with"
                                " --tls-key"),
    ("missing.pem", None, "the TLS certificate {d}/missing.pem does not exist: give the PEM file's path with"
                          " --tls-cert"),
    ("a-dir", None, "the TLS certificate {d}/a-dir is a directory: give the PEM file in it with --tls-cert"),
    ("garbage.pem", None, "the TLS certificate {d}/garbage.pem holds no PEM certificate"
                          " (-----BEGIN CERTIFICATE-----): give the certificate chain's PEM file with --tls-cert"),
    ("key.pem", None, "the TLS certificate {d}/key.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----):"
                      " give the certificate chain's PEM file with --tls-cert"),
    ("cert.pem", "garbage.pem", "the TLS key {d}/garbage.pem holds no PEM private key"
                                " (-----BEGIN PRIVATE KEY-----): give the certificate's key file with --tls-key"),
    ("cert.pem", "other-key.pem", "the TLS key {d}/other-key.pem is not the key of the certificate"
                                  " {d}/cert.pem: give the certificate's own key"),
    ("cert.pem", "encrypted-key.pem", "the TLS key in {d}/encrypted-key.pem is encrypted: give it decrypted"
                                      " (the server starts unattended), e.g. from openssl pkey -in KEY"
                                      " -out PLAIN.pem"),
    ("cert.pem", "bad-key.pem", "cannot load the TLS certificate {d}/cert.pem with the key {d}/bad-key.pem:"
                                " check that they are the PEM files of one certificate and its key"
                                " (OpenSSL: PEM lib)"),
    (None, "key.pem", "--tls-key needs --tls-cert (the certificate the key belongs to)"),
])
def test_a_tls_file_that_does_not_load_is_one_sentence_saying_what_to_do(tmp_path, pems, cert, key, want):
    args = (["--tls-cert", str(pems / cert)] if cert else []) + (["--tls-key", str(pems / key)] if key else [])
    _refused(args, want.format(d=pems), tmp_path)


def test_a_config_file_key_without_its_certificate_is_refused(tmp_path, pems):
    conf = tmp_path / "drsftp.toml"
    conf.write_text(f'root = "."\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\ntls_key = "{pems}/key.pem"\n')
    r = drsftp("serve", "--config", str(conf), timeout=60)
    assert r.returncode == 2 and "listening" not in r.stdout
    assert r.stderr.strip() == f"drsftp: error: {conf}: tls_key needs tls_cert (the certificate the key belongs to)"


def test_a_certificate_and_its_key_in_two_files_serve_tls(tmp_path, pems):
    from drsftp.server import ServerConfig, build_server

    cfg = ServerConfig(root=str(tmp_path), user=USER, password=PASSWORD, host="127.0.0.1", port=0,
                       tls_cert=str(pems / "cert.pem"), tls_key=str(pems / "key.pem"))
    server = build_server(cfg)
    try:
        assert server.handler.ssl_context is not None and server.handler.etls_context is not None
    finally:
        server.close_all()


# -- a raw control connection ----------------------------------------------------------------


class Ctl(EblockCtl):
    """test_eblock_server's raw control connection, its final() without the
    markers, and what the server sends until it closes."""

    def final(self):
        code, text, _ = super().final()
        return code, text

    def rest_of_session(self):
        """Every line the server still sends before it closes."""
        self.sock.settimeout(10)
        return self.f.read().decode()

    def close(self):
        self.f.close()
        super().close()


def _no_traceback(srv):
    srv.proc.terminate()
    srv.proc.wait(10)
    err = srv.stderr_text()
    assert "Traceback" not in err and "unhandled exception" not in err, err


# -- before login ---------------------------------------------------------------------------


def test_before_login_a_command_that_needs_it_is_530_with_or_without_its_argument(tmp_path):
    """530 says the one thing wrong (RFC 959): not logged in; what the
    argument lacks is for after login.  Commands open before login keep
    their own replies."""
    with running_server(tmp_path) as srv, socket.create_connection(("127.0.0.1", srv.port), timeout=20) as sock:
        f = sock.makefile("rb")
        assert f.readline().startswith(b"220")
        want = [(line, "530") for line in ("HASH", "SBUF", "CKSM", "DCAU", "RETR", "RETR x", "SITE CHMOD",
                                           "STAT /", "DRS")]
        want += [("USER", "501"), ("NOOP", "200"), ("XYZZY", "500")]
        for line, code in want:
            sock.sendall(line.encode() + b"\r\n")
            reply = f.readline().decode()
            assert reply.startswith(code + " "), (line, reply)
            if code == "530":
                assert reply.rstrip() == "530 Log in with USER and PASS first.", line
        f.close()


# -- QUIT ends the session (RFC 959 4.1.1) ---------------------------------------------------


def test_commands_pipelined_after_quit_are_not_run(tmp_path):
    (tmp_path / "small.txt").write_bytes(b"small\n")
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        ctl.sock.sendall(b"QUIT\r\nSIZE small.txt\r\nNOOP\r\nDELE small.txt\r\n")
        assert ctl.rest_of_session().splitlines() == ["221 Goodbye."]
        ctl.close()
        assert (tmp_path / "small.txt").exists()
        _no_traceback(srv)


def test_commands_after_quit_during_a_transfer_are_not_run(tmp_path):
    """QUIT while a RETR runs: its final reply comes, then the session
    closes; what followed QUIT in the same write is not run."""
    (tmp_path / "big.bin").write_bytes(os.urandom(8 << 20))
    (tmp_path / "keep.txt").write_bytes(b"keep\n")
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        data.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        ctl.sock.sendall(b"RETR big.bin\r\n")
        assert ctl.reply()[0] in ("125", "150")  # 125: the data connection was accepted first
        assert data.recv(65536)
        ctl.sock.sendall(b"QUIT\r\nDELE keep.txt\r\nNOOP\r\n")
        got = 0
        while chunk := data.recv(1 << 20):
            got += len(chunk)
        data.close()
        replies = [ln[:3] for ln in ctl.rest_of_session().splitlines()]
        ctl.close()
        assert replies == ["221", "226"], replies
        assert (tmp_path / "keep.txt").exists()
        _no_traceback(srv)


def test_commands_after_quit_during_a_mode_e_transfer_are_not_run(tmp_path):
    (tmp_path / "keep.txt").write_bytes(b"keep\n")
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        port = ctl.pasv()
        assert ctl.cmd("ALLO 8")[0] == "200"
        assert ctl.cmd("STOR q.bin")[0] == "150"
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(header(0, 4, 0) + b"quit")
        ctl.sock.sendall(b"QUIT\r\nNOOP\r\nDELE keep.txt\r\nSTAT\r\n")
        assert ctl.reply()[0] == "221"
        s.sendall(header(0, 4, 4) + b"late" + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text = ctl.final()
        assert code == "226", text
        assert ctl.rest_of_session() == ""
        ctl.close()
        s.close()
        assert (tmp_path / "q.bin").read_bytes() == b"quitlate" and (tmp_path / "keep.txt").exists()
        _no_traceback(srv)


# -- STOR onto a directory; part files of STORs that wrote nothing ----------------------------


def _parts(root):
    return sorted(p.name for p in root.rglob("*.part"))


def test_put_onto_a_directory_is_550_and_leaves_no_part_file(tmp_path):
    root = tmp_path / "srv"
    (root / "sub").mkdir(parents=True)
    src = tmp_path / "local.txt"
    src.write_bytes(b"local\n")
    with running_server(root) as srv:
        r = drsftp("put", str(src), srv.url("sub"))
        assert r.returncode == 1
        assert r.stderr.strip().splitlines()[-1].endswith("550 Is a directory: a file cannot be stored over it."), \
            r.stderr
        ctl = Ctl(srv.port)
        assert ctl.cmd("STOR sub")[0] == "550"  # without a data connection: 550 too, not 425
        ctl.pasv()
        assert ctl.cmd("STOR sub")[0] == "550"
        assert ctl.cmd("REST 3")[0] == "350"
        assert ctl.cmd("STOR sub")[0] == "550"
        assert ctl.cmd("MODE E")[0] == "200"
        ctl.pasv()
        assert ctl.cmd("STOR sub")[0] == "550"
        ctl.close()
    assert _parts(root) == [] and (root / "sub").is_dir() and os.listdir(root / "sub") == []


def test_a_stor_that_wrote_nothing_leaves_no_part_file(tmp_path):
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        # queued for its data connection, then ABOR
        ctl.pasv()
        assert ctl.cmd("STOR a.bin")[0] == "150"
        assert ctl.cmd("ABOR")[0] == "426"
        assert ctl.reply()[0] == "226"
        # connected, nothing sent, then ABOR
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        assert ctl.cmd("STOR b.bin")[0] in ("125", "150")  # 150: not yet accepted
        assert ctl.cmd("ABOR")[0] == "426"
        assert ctl.reply()[0] == "226"
        data.close()
        # ALLO announced bytes that never came
        assert ctl.cmd("ALLO 10")[0] == "200"
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        assert ctl.cmd("STOR c.bin")[0] in ("125", "150")
        data.close()
        code, text = ctl.final()
        assert (code, text.strip()) == ("451", "451 Upload incomplete: 0 of 10 bytes."), text
        # MODE E: queued then ABOR; and an EOF with no data short of ALLO
        assert ctl.cmd("MODE E")[0] == "200"
        port = ctl.pasv()
        assert ctl.cmd("STOR d.bin")[0] == "150"
        assert ctl.cmd("ABOR")[0] == "426"
        assert ctl.reply()[0] == "226"
        assert ctl.cmd("ALLO 100")[0] == "200"
        assert ctl.cmd("STOR e.bin")[0] == "150"
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(header(Desc.EOD | Desc.EOF, 0, 1))
        code, text = ctl.final()
        assert (code, text.strip()) == ("451", "451 Upload incomplete: 0 of 100 bytes."), text
        s.close()
        # the session ends while a STOR waits for its data connection
        assert ctl.cmd("MODE S")[0] == "200"
        ctl.pasv()
        assert ctl.cmd("STOR f.bin")[0] == "150"
        ctl.close()
        ctl = Ctl(srv.port)
        assert ctl.cmd("MODE E")[0] == "200"
        ctl.pasv()
        assert ctl.cmd("STOR g.bin")[0] == "150"
        ctl.close()
        assert wait_until(lambda: os.listdir(tmp_path) == [], 10), os.listdir(tmp_path)


def test_a_part_file_with_bytes_in_it_is_kept_for_rest(tmp_path):
    """What a failed STOR did write stays (REST resumes it), and a REST
    STOR that fails before writing keeps the part file it continues."""
    with running_server(tmp_path) as srv:
        ctl = Ctl(srv.port)
        assert ctl.cmd("ALLO 10")[0] == "200"
        data = socket.create_connection(("127.0.0.1", ctl.pasv()), timeout=20)
        assert ctl.cmd("STOR h.bin")[0] in ("125", "150")
        data.sendall(b"12345")
        data.close()
        code, text = ctl.final()
        assert code == "451" and "5 of 10 bytes; kept for REST to resume" in text, text
        assert (tmp_path / ".h.bin.part").read_bytes() == b"12345"
        ctl.pasv()
        assert ctl.cmd("REST 5")[0] == "350"
        assert ctl.cmd("STOR h.bin")[0] == "150"
        assert ctl.cmd("ABOR")[0] == "426"
        assert ctl.reply()[0] == "226"
        ctl.close()
    assert (tmp_path / ".h.bin.part").read_bytes() == b"12345"

