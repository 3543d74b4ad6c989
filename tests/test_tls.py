"""FTPS with real peers: drsftp's client against `drsftp serve
--require-tls` and vsftpd (ssl_enable, require_ssl_reuse), curl and lftp
against `drsftp serve --require-tls`, and every refusal the client must
make (wrong CA, expired certificate, name mismatch, a server without
AUTH TLS).  Missing programs fail the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess

import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    ServerProcess,
    drsftp,
    make_file,
    running_server,
    sha256_file,
    wait_until,
)
from tlscerts import make_certs

from drsftp.client import FTPError, TransferOptions, get
from drsftp.client.session.tls import ClientTLS
from drsftp.ftp.url import parse_url

VSFTPD = "/usr/sbin/vsftpd"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def vsftpd(tmp_path, cert, *extra, implicit=False):
    """An anonymous vsftpd with TLS forced for login and data and session
    reuse required on data connections; run as the launching user (no
    chroot: paths in URLs are absolute); ``extra``: more vsftpd.conf lines.
    Yields (port, root)."""
    assert os.path.exists(VSFTPD), "vsftpd is installed by .ci/run"
    root = tmp_path / "vroot"
    (root / "pub").mkdir(parents=True)
    os.chmod(root / "pub", 0o777)
    empty = tmp_path / "vempty"
    empty.mkdir()
    port = _free_port()
    conf = tmp_path / "vsftpd.conf"
    conf.write_text("\n".join([
        "listen=YES", "listen_ipv6=NO", "listen_address=127.0.0.1", f"listen_port={port}",
        "background=NO", "run_as_launching_user=YES", "anonymous_enable=YES", "local_enable=NO",
        "no_anon_password=YES", f"anon_root={root}", "write_enable=YES", "anon_upload_enable=YES",
        "anon_other_write_enable=YES", "anon_umask=022", f"secure_chroot_dir={empty}",
        "seccomp_sandbox=NO", "pasv_enable=YES", "connect_from_port_20=NO", "xferlog_enable=NO",
        "vsftpd_log_file=/dev/null", "dual_log_enable=NO", "syslog_enable=NO",
        "ssl_enable=YES", "allow_anon_ssl=YES", "force_anon_logins_ssl=YES", "force_anon_data_ssl=YES",
        "require_ssl_reuse=YES", "ssl_ciphers=HIGH", f"rsa_cert_file={cert}", f"rsa_private_key_file={cert}",
        f"implicit_ssl={'YES' if implicit else 'NO'}", *extra, "",
    ]))
    proc = subprocess.Popen([VSFTPD, str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def up():
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
            return False
        assert wait_until(up, 10), f"vsftpd did not start: {proc.poll()}"
        yield port, root
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def _json(path):
    with open(path) as f:
        return json.load(f)


def test_get_and_put_over_tls_against_drsftp_serve_with_drs_and_resume(tmp_path, certs):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "big.bin", 32 << 20, seed=7)
    with running_server(root, "--tls-cert", str(certs.good), "--require-tls") as srv:
        tls = ("--tls", "--ca-file", str(certs.ca))
        out = tmp_path / "got.bin"
        r = drsftp("get", *tls, "--json", str(tmp_path / "g.json"), srv.url("big.bin"), str(out))
        assert r.returncode == 0, r.stderr
        assert sha256_file(out) == sha256_file(src)
        g = _json(tmp_path / "g.json")
        assert g["drs_peer"] and g["drs_replies"] >= 1  # DRS commands answered over the encrypted control

        r = drsftp("put", *tls, "--json", str(tmp_path / "p.json"), str(out), srv.url("up.bin"))
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "up.bin") == sha256_file(src)

        # resume a download: the first 5 MiB are already here
        part = tmp_path / "again.bin.part"
        with open(src, "rb") as f:
            part.write_bytes(f.read(5 << 20))
        r = drsftp("get", *tls, "--continue", "--json", str(tmp_path / "r.json"), srv.url("big.bin"),
                   str(tmp_path / "again.bin"))
        assert r.returncode == 0, r.stderr
        assert _json(tmp_path / "r.json")["resumed_from"] == 5 << 20
        assert sha256_file(tmp_path / "again.bin") == sha256_file(src)

        # resume an upload: the server holds the first 3 MiB under its temporary name
        with open(src, "rb") as f:
            (root / ".up2.bin.part").write_bytes(f.read(3 << 20))
        r = drsftp("put", *tls, "--continue", "--json", str(tmp_path / "u.json"), str(src), srv.url("up2.bin"))
        assert r.returncode == 0, r.stderr
        assert _json(tmp_path / "u.json")["resumed_from"] == 3 << 20
        assert sha256_file(root / "up2.bin") == sha256_file(src)


def test_get_and_put_over_tls_against_vsftpd_which_requires_session_reuse(tmp_path, certs):
    with vsftpd(tmp_path, certs.good) as (port, root):
        src = make_file(root / "v.bin", 12 << 20, seed=3)
        base = f"ftp://127.0.0.1:{port}"
        out = tmp_path / "v-got.bin"
        r = drsftp("get", "--tls", "--ca-file", str(certs.ca), f"{base}{src}", str(out))
        assert r.returncode == 0, r.stderr
        assert sha256_file(out) == sha256_file(src)
        r = drsftp("put", "--tls", "--ca-file", str(certs.ca), str(out), f"{base}{root}/pub/v-up.bin")
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "pub" / "v-up.bin") == sha256_file(src)
        # without resuming the control connection's session vsftpd refuses
        # the data connection: the reuse above was real
        loc = parse_url(f"{base}{src}")
        opts = TransferOptions(tls=True, ca_file=str(certs.ca), progress=False, idle_timeout=10)
        orig = ClientTLS.reuse_sessions_of
        ClientTLS.reuse_sessions_of = lambda self, source: None
        try:
            with pytest.raises(FTPError):
                asyncio.run(get(loc, str(tmp_path / "noreuse.bin"), opts))
        finally:
            ClientTLS.reuse_sessions_of = orig


def test_ftps_url_is_implicit_tls(tmp_path, certs):
    with vsftpd(tmp_path, certs.good, implicit=True) as (port, root):
        src = make_file(root / "i.bin", 3 << 20, seed=4)
        out = tmp_path / "i-got.bin"
        r = drsftp("get", "--ca-file", str(certs.ca), f"ftps://127.0.0.1:{port}{src}", str(out))
        assert r.returncode == 0, r.stderr
        assert sha256_file(out) == sha256_file(src)


def test_curl_and_lftp_with_forced_tls_against_drsftp_serve(tmp_path, certs):
    curl, lftp = shutil.which("curl"), shutil.which("lftp")
    assert curl and lftp, "curl and lftp are installed by .ci/run"
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "c.bin", 8 << 20, seed=5)
    with running_server(root, "--tls-cert", str(certs.good), "--require-tls") as srv:
        out = tmp_path / "curl.bin"
        base = ["--ssl-reqd", "--cacert", str(certs.ca), "-sS"]
        r = subprocess.run([curl, *base, "-o", str(out), srv.url("c.bin")], check=False, capture_output=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert sha256_file(out) == sha256_file(src)
        r = subprocess.run([curl, *base, "-T", str(out), srv.url("curl-up.bin")], check=False, capture_output=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "curl-up.bin") == sha256_file(src)

        script = "; ".join([
            "set ftp:ssl-force true", "set ftp:ssl-protect-data true", f"set ssl:ca-file {certs.ca}",
            "set ssl:verify-certificate true", "set net:max-retries 1", "set net:timeout 20",
            f"open -u {USER},{PASSWORD} -p {srv.port} 127.0.0.1",
            f"get c.bin -o {tmp_path / 'lftp.bin'}", f"put {out} -o lftp-up.bin", "bye",
        ])
        env = dict(os.environ, HOME=str(tmp_path))  # no user lftp rc
        r = subprocess.run([lftp, "-c", script], check=False, capture_output=True, timeout=120, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert sha256_file(tmp_path / "lftp.bin") == sha256_file(src)
        assert sha256_file(root / "lftp-up.bin") == sha256_file(src)


@pytest.mark.parametrize("case", ["wrong CA", "expired", "name mismatch"])
def test_an_untrusted_certificate_is_one_sentence_and_exit_1(tmp_path, certs, case):
    cert, ca = {"wrong CA": (certs.good, certs.other_ca), "expired": (certs.expired, certs.ca),
                "name mismatch": (certs.wrong_name, certs.ca)}[case]
    why = {"wrong CA": "unable to get local issuer certificate", "expired": "certificate has expired",
           "name mismatch": "not valid for the name 127.0.0.1"}[case]
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "x.bin", 1 << 20)
    with running_server(root, "--tls-cert", str(cert), "--require-tls") as srv:
        r = drsftp("get", "--tls", "--ca-file", str(ca), srv.url("x.bin"), str(tmp_path / "x.bin"))
        assert r.returncode == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert lines[0].startswith("drsftp: error: TLS certificate of 127.0.0.1 not trusted: "), lines
        assert why in lines[0]
        assert not (tmp_path / "x.bin").exists() and not (tmp_path / "x.bin.part").exists()
        # the same server with --insecure: accepted, and said so
        r = drsftp("get", "--tls", "--insecure", srv.url("x.bin"), str(tmp_path / "x.bin"))
        assert r.returncode == 0, r.stderr
        assert "--insecure" in r.stderr


def test_a_server_without_auth_tls_is_refused_before_the_password(tmp_path):
    """A downgrade: the server (or a man in the middle) does not offer AUTH
    TLS.  --tls ends there; no USER/PASS goes out in clear text."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "x.bin", 1 << 20)
    srv = ServerProcess(root, cmd=[PY, "-m", "drsftp", "-vv", "serve", "--root", str(root), "--port", "0",
                                   "--user", USER, "--password", PASSWORD])
    try:
        r = drsftp("put", "--tls", str(root / "x.bin"), srv.url("y.bin"))
        srv.proc.terminate()
        srv.proc.wait(10)
        server_log = srv.stderr_text()
    finally:
        srv.stop()
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused AUTH TLS" in lines[0] and "without encryption" in lines[0], r.stderr
    assert "<- AUTH TLS" in server_log and "<- USER" not in server_log and "<- PASS" not in server_log
    assert not (root / "y.bin").exists()


def test_bad_ca_file_is_one_sentence(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    r = drsftp("get", "--tls", "--ca-file", str(bad), "ftp://127.0.0.1:9/x.bin", str(tmp_path / "x"))
    assert r.returncode == 1
    assert r.stderr.strip() == f"drsftp: error: cannot load --ca-file {bad}: not a PEM certificate file"
