"""FTPS stream-mode uploads and downloads against `drsftp serve`, around
TLS record boundaries (16 KiB), by every TLS client the suite drives: a
raw `ssl` client that ends its data connection each way a client can
(close_notify and wait, close_notify and close at once, close alone, a
TCP FIN alone), lftp (put, get, mirror -R), curl and ftplib.  A stored
file is byte for byte the client's, and the transfer log says
complete=yes, or the upload was cut short (the client reset its
connection: server/tlsdata.py) and the server said 426 and complete=no,
with nothing stored under the name.  globus-url-copy and gfal2 speak GSI
(AUTH GSSAPI), never AUTH TLS, so they have no FTPS to test here.
Missing programs fail the tests."""

from __future__ import annotations

import ftplib
import os
import shutil
import socket
import ssl
import subprocess

import pytest
from conftest import PASSWORD, USER, make_file, running_server, sha256_file, wait_until
from test_tls import certs  # noqa: F401 (a fixture)

SIZES = (0, 1, 16383, 16384, 16385, 114688, 500000)  # 114688: 7 records, where lftp's puts were cut
FEW = (0, 16384, 16385, 500000)


@pytest.fixture(scope="module")
def tls_serve(tmp_path_factory, certs):  # noqa: F811 (the imported fixture)
    root = tmp_path_factory.mktemp("tlsup") / "srv"
    root.mkdir()
    with running_server(root, "--tls-cert", str(certs.good)) as srv:
        yield srv, root


def _log_line(srv, path):
    """The transfer log's last line for ``path`` (waits for it: the server
    logs a transfer after its final reply)."""
    found = []

    def logged():
        found[:] = [line for line in srv.stderr_text().splitlines() if f" path={path} " in line]
        return bool(found)
    assert wait_until(logged, timeout=10), f"no transfer line for {path}"
    return found[-1]


def _stored_or_aborted(srv, root, name, data, final):
    """226, the bytes stored and complete=yes; or 426, complete=no and
    nothing under the name (the temporary name keeps what came)."""
    line = _log_line(srv, f"/{name}")
    if final.startswith("226"):
        assert (root / name).read_bytes() == data, (final, len(data), (root / name).stat().st_size)
        assert "complete=yes" in line, line
    else:
        assert final.startswith("426 Connection lost"), final
        assert "complete=no" in line and not (root / name).exists(), line


# -- a raw TLS client --------------------------------------------------------------------------

def _control(port, ctx):
    """An FTPS control connection (ftplib's), logged in, PROT P, TYPE I."""
    ftp = ftplib.FTP_TLS(context=ctx, timeout=20)
    ftp.connect("127.0.0.1", port)
    ftp.login(USER, PASSWORD)
    ftp.prot_p()
    ftp.voidcmd("TYPE I")
    return ftp


def _raw_upload(port, ctx, name, data, end):
    """STOR ``data`` on a data connection of its own that ``end`` ends
    (it resumes the control connection's session, as clients do); the
    final reply."""
    ftp = _control(port, ctx)
    try:
        host, dport = ftplib.parse227(ftp.sendcmd("PASV"))
        raw = socket.create_connection((host, dport), timeout=20)
        assert ftp.sendcmd(f"STOR {name}")[:3] in ("125", "150")
        conn = ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=ftp.sock.session)
        conn.sendall(data)
        if end == "unwrap":  # close_notify, the server's awaited (ftplib's way)
            conn.unwrap().close()
        elif end == "notify":  # close_notify, then close at once
            conn.setblocking(False)
            try:
                conn.unwrap()
            except (ssl.SSLWantReadError, BlockingIOError):
                pass
            conn.close()
        elif end == "fin":  # a TCP end without close_notify; the socket stays open till the reply
            with socket.socket(fileno=os.dup(conn.fileno())) as dup:
                dup.shutdown(socket.SHUT_WR)
            try:
                return ftp.getresp()
            finally:
                conn.close()
        else:  # "close": no close_notify; the server's session ticket unread, so a reset
            conn.close()
        try:
            return ftp.getresp()
        except ftplib.error_temp as exc:
            return str(exc)
    finally:
        ftp.close()


@pytest.mark.parametrize("end", ["unwrap", "notify", "close", "fin"])
def test_a_raw_tls_upload_is_stored_whole_or_reported_cut(tls_serve, certs, end):  # noqa: F811
    """Each size, each way to end the data connection: what the server
    stored is the client's file when it said 226.  Ended with close_notify
    or a FIN after the last record, every upload is whole; a client that
    closes at once may reset (its unread session ticket), and then the
    upload is 426 (pyftpdlib said 226 and kept the cut file)."""
    srv, root = tls_serve
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    for size in SIZES:
        name = f"raw-{end}-{size}.bin"
        data = os.urandom(size)
        final = _raw_upload(srv.port, ctx, name, data, end)
        if end in ("unwrap", "fin"):
            assert final.startswith("226"), (size, final)
        _stored_or_aborted(srv, root, name, data, final)


# -- lftp, curl, ftplib ------------------------------------------------------------------------

def _lftp(srv, cwd, certs_, script, timeout=180):
    """lftp over TLS 1.2; a 426 is retried at once (net:max-retries), as lftp
    retries an upload the server refused as cut.  Under TLS 1.3 the data
    connection's late session ticket can reset lftp's upload on every retry
    (decision 0032; the raw-client tests here cover that 426)."""
    lftp = shutil.which("lftp")
    assert lftp, "lftp is installed by ./run (Debian package lftp)"
    prelude = ("set cmd:fail-exit yes; set ftp:ssl-force true; set ftp:ssl-protect-data true;"
               f" set ssl:ca-file {certs_.ca}; set ssl:verify-certificate true; set net:timeout 20;"
               " set net:max-retries 8; set net:reconnect-interval-base 1; set net:reconnect-interval-multiplier 1;"
               " set net:reconnect-interval-max 1; set ssl:priority NORMAL:-VERS-TLS1.3; ")
    r = subprocess.run([lftp, "-d", "-u", f"{USER},{PASSWORD}", "-p", str(srv.port), "-e", prelude + script + "; bye",
                        "127.0.0.1"], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, HOME=str(cwd)), check=False)
    dialogue = [line for line in r.stderr.splitlines() if "--->" in line or "<---" in line or "rror" in line]
    transfers = [line for line in srv.stderr_text().splitlines() if " transfer " in line]
    assert r.returncode == 0, "\n".join(dialogue[-60:] + transfers[-20:])


def test_lftp_put_get_and_mirror_over_tls(tls_serve, certs, tmp_path):  # noqa: F811
    srv, root = tls_serve
    local = tmp_path / "l"
    (local / "tree" / "sub").mkdir(parents=True)
    for size in (*SIZES, 1_000_001):
        make_file(local / f"lp-{size}.bin", size, seed=size)
    for i, size in enumerate((0, 16384, 114688, 300_001, 500000, 16385)):
        make_file(local / "tree" / ("sub" if i % 2 else "") / f"t{i}.bin", size, seed=i)
    puts = "; ".join(f"put lp-{size}.bin" for size in (*SIZES, 1_000_001))
    gets = "; ".join(f"get lp-{size}.bin -o back-{size}.bin" for size in (*SIZES, 1_000_001))
    _lftp(srv, local, certs, f"{puts}; mirror -R tree lftp-tree; {gets}")
    for size in (*SIZES, 1_000_001):
        assert sha256_file(root / f"lp-{size}.bin") == sha256_file(local / f"lp-{size}.bin"), size
        assert sha256_file(local / f"back-{size}.bin") == sha256_file(local / f"lp-{size}.bin"), size
        assert "complete=yes" in _log_line(srv, f"/lp-{size}.bin")  # the last try's
    for d, _, files in os.walk(local / "tree"):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), local / "tree")
            assert sha256_file(root / "lftp-tree" / rel) == sha256_file(os.path.join(d, f)), rel


@pytest.mark.parametrize("size", FEW)
def test_curl_put_and_get_over_tls(tls_serve, certs, tmp_path, size):  # noqa: F811
    curl = shutil.which("curl")
    assert curl, "curl is installed by ./run"
    srv, root = tls_serve
    src = make_file(tmp_path / "c.bin", size, seed=size)
    # TLS 1.2: curl does not retry an upload, and under TLS 1.3 a loaded
    # server's late session ticket can reset it into a 426 (decision 0032)
    base = [curl, "-sS", "--ssl-reqd", "--tls-max", "1.2", "--cacert", str(certs.ca)]
    r = subprocess.run([*base, "-T", str(src), srv.url(f"curl-{size}.bin")], capture_output=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert sha256_file(root / f"curl-{size}.bin") == sha256_file(src)
    assert "complete=yes" in _log_line(srv, f"/curl-{size}.bin")
    r = subprocess.run([*base, "-o", str(tmp_path / "back.bin"), srv.url(f"curl-{size}.bin")], capture_output=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert sha256_file(tmp_path / "back.bin") == sha256_file(src)


@pytest.mark.parametrize("size", FEW)
def test_ftplib_put_and_get_over_tls(tls_serve, certs, tmp_path, size):  # noqa: F811
    srv, root = tls_serve
    src = make_file(tmp_path / "f.bin", size, seed=size)
    ftp = ftplib.FTP_TLS(context=ssl.create_default_context(cafile=str(certs.ca)), timeout=30)
    ftp.connect("127.0.0.1", srv.port)
    ftp.login(USER, PASSWORD)
    ftp.prot_p()
    with open(src, "rb") as f:
        ftp.storbinary(f"STOR ftplib-{size}.bin", f)
    with open(tmp_path / "back.bin", "wb") as f:
        ftp.retrbinary(f"RETR ftplib-{size}.bin", f.write)
    ftp.quit()
    assert sha256_file(root / f"ftplib-{size}.bin") == sha256_file(src) == sha256_file(tmp_path / "back.bin")
    assert "complete=yes" in _log_line(srv, f"/ftplib-{size}.bin")

