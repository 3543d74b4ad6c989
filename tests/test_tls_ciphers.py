"""drsftp's one TLS policy (drsftp.io.tlspolicy: Mozilla's intermediate
profile, TLS 1.2 with ECDHE AEAD suites only, and TLS 1.3) on every
connection: `drsftp serve`'s control connection, its stream-mode data
channels after PROT P and its MODE E streams refuse a client that offers
CBC suites only and serve one that offers an AEAD suite under TLS 1.2;
the drsftp client offers the same suites and refuses a CBC-only server."""

from __future__ import annotations

import contextlib
import ftplib
import socket
import ssl
import threading
from pathlib import Path

import pytest
from conftest import PASSWORD, USER, make_file
from test_eblock_server import block
from test_modee_tls import _final
from test_tls import certs  # noqa: F401 (a fixture)
from test_tls_paths import _serve

from drsftp.client.session.tls import client_tls
from drsftp.ftp.eblock import Desc, header
from drsftp.io import tlspolicy
from drsftp.io.tlsbio import TLSPipe
from drsftp.server import tlsfiles
from drsftp.server.app import ServerConfig, build_server
from drsftp.server.ftp.eblock import tls as etls

# CBC suites (SHA-2 and SHA-1 MACs) for both certificate kinds: what testssl
# reports as "obsolete CBC ciphers" (LUCKY13)
CBC_ONLY = "ECDHE-ECDSA-AES128-SHA256:ECDHE-RSA-AES128-SHA256:ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA"
AEAD_TLS12 = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"
POLICY = set(tlspolicy.TLS12_CIPHERS.split(":"))


def _tls12_client(ca, ciphers):
    """A TLS 1.2 client offering ``ciphers`` only."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    return ctx


# -- the contexts themselves ------------------------------------------------------------------

def _tls12_names(ctx):
    return {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}


def test_every_context_offers_the_policy_and_nothing_else(certs):  # noqa: F811
    """The client's and the MODE E streams' contexts (the standard
    library's), and the control connection's (pyOpenSSL's): TLS 1.2
    suites exactly the policy's, all AEAD, and TLS 1.2 at least."""
    from OpenSSL import SSL

    for ctx in (client_tls(insecure=True).context, etls.server_context(str(certs.good), None)):
        assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
        assert _tls12_names(ctx) == POLICY
        assert all(c["aead"] for c in ctx.get_ciphers())  # TLS 1.3's too

    class Handler:
        certfile = keyfile = str(certs.good)
        ssl_options = 0

    names = set(SSL.Connection(tlsfiles.control_context(Handler), None).get_cipher_list())
    assert {n for n in names if not n.startswith("TLS_")} == POLICY
    assert {n for n in names if n.startswith("TLS_")} <= {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                                         "TLS_CHACHA20_POLY1305_SHA256"}


def _handshake(client_ctx, server_ctx):
    """Both ends of one TLS connection in memory: the cipher agreed."""
    client = TLSPipe(client_ctx, server_side=False, server_hostname="127.0.0.1")
    server = TLSPipe(server_ctx, server_side=True)
    for _ in range(10):
        client_done = client.handshake()
        server.feed(client.take())
        server_done = server.handshake()
        client.feed(server.take())
        if client_done and server_done:
            return client.obj.cipher()[0]
    raise AssertionError("the handshake did not end")


def test_the_drsftp_client_refuses_a_cbc_only_server_and_takes_an_aead_one(certs):  # noqa: F811
    def server(ciphers):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(ciphers)
        ctx.load_cert_chain(str(certs.good))
        return ctx

    client = client_tls(str(certs.ca)).context
    with pytest.raises(ssl.SSLError):
        _handshake(client, server(CBC_ONLY))
    assert _handshake(client, server(AEAD_TLS12)) in POLICY


# -- drsftp serve, live -------------------------------------------------------------------------

@pytest.fixture
def tls_server(tmp_path, certs):  # noqa: F811 (the imported fixture)
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "x.bin", 1 << 20, seed=71)
    srv = _serve(root, certs)
    try:
        yield srv
    finally:
        srv.stop()


def test_the_control_connection_refuses_cbc_suites(tls_server, certs):  # noqa: F811
    for ciphers, accepted in ((CBC_ONLY, False), (AEAD_TLS12, True)):
        with socket.create_connection(("127.0.0.1", tls_server.port), timeout=20) as s:
            f = s.makefile("rb")
            assert f.readline().startswith(b"220 ")
            s.sendall(b"AUTH TLS\r\n")
            assert f.readline().startswith(b"234 ")
            ctx = _tls12_client(certs.ca, ciphers)
            if not accepted:
                with pytest.raises(ssl.SSLError, match="HANDSHAKE_FAILURE"):
                    ctx.wrap_socket(s, server_hostname="127.0.0.1")
                continue
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as tls:
                assert tls.version() == "TLSv1.2" and tls.cipher()[0] in POLICY


def _control(port, ca):
    """A logged-in control connection (AEAD, TLS 1.2), PBSZ 0, PROT P, TYPE I."""
    ftp = ftplib.FTP_TLS(context=_tls12_client(ca, AEAD_TLS12))
    ftp.connect("127.0.0.1", port, timeout=20)
    ftp.login(USER, PASSWORD)
    ftp.prot_p()
    ftp.voidcmd("TYPE I")
    return ftp


def test_a_stream_mode_data_channel_refuses_cbc_suites(tls_server, certs):  # noqa: F811
    """PASV data channel after PROT P (RFC 4217 sec. 10.2: a failed data
    handshake is 522 on the control connection); an AEAD one carries the file."""
    expected = Path(tls_server.root, "x.bin").read_bytes()
    ftp = _control(tls_server.port, certs.ca)
    try:
        for ciphers, accepted in ((CBC_ONLY, False), (AEAD_TLS12, True)):
            port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
            data = socket.create_connection(("127.0.0.1", port), timeout=20)
            ftp.putcmd("RETR x.bin")
            assert ftp.getline()[:3] in ("125", "150")  # (125: the connection came first)
            ctx = _tls12_client(certs.ca, ciphers)
            if not accepted:
                with pytest.raises(ssl.SSLError, match="HANDSHAKE_FAILURE"):
                    ctx.wrap_socket(data, server_hostname="127.0.0.1")
                data.close()
                assert _final(ftp).startswith("522"), "the failed data handshake is answered 522"
                continue
            with ctx.wrap_socket(data, server_hostname="127.0.0.1") as tls:
                assert tls.cipher()[0] in POLICY
                got = b"".join(iter(lambda: tls.recv(1 << 20), b""))
            assert _final(ftp).startswith("226") and got == expected
        assert ftp.sendcmd("NOOP").startswith("200")
    finally:
        ftp.close()


@contextlib.contextmanager
def _server_in_a_thread(root, certs_):
    """drsftp serve (PROT P required) run by a thread of this process;
    yields its port and ``pause``: while it is held, the server's ioloop
    runs no step."""
    server = build_server(ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0,
                                       tls_cert=str(certs_.good), require_tls=True))
    step, stop = threading.Lock(), threading.Event()

    def run():
        while not stop.is_set():
            with step:
                server.ioloop.loop(timeout=0.02, blocking=False)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield server.socket.getsockname()[1], step
    finally:
        stop.set()
        t.join(10)
        server.close_all()


def test_a_data_handshake_failing_in_the_first_send_is_answered_522(tmp_path, certs):  # noqa: F811
    """RETR waits for its connection; the connection and its ClientHello
    (CBC suites only) come while the server is paused, so the transfer's
    first send runs the handshake and fails there: still 522, and the
    session goes on."""
    make_file(tmp_path / "x.bin", 1 << 20, seed=72)
    with _server_in_a_thread(tmp_path, certs) as (port, pause):
        ftp = _control(port, certs.ca)
        try:
            data_port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
            ftp.putcmd("RETR x.bin")
            assert ftp.getline().startswith("150")  # queued: no connection yet
            hello = TLSPipe(_tls12_client(certs.ca, CBC_ONLY), server_side=False, server_hostname="127.0.0.1")
            hello.handshake()
            with pause:
                data = socket.create_connection(("127.0.0.1", data_port), timeout=20)
                data.sendall(hello.take())
            final = _final(ftp)
            data.close()
            assert final.startswith("522"), final
            assert ftp.sendcmd("NOOP").startswith("200")
        finally:
            ftp.close()


def _pipe_handshake(pipe, sock):
    """A TLSPipe's handshake over a blocking socket."""
    for _ in range(20):
        done = pipe.handshake()
        sock.sendall(pipe.take())
        if done:
            return
        pipe.feed(sock.recv(1 << 16))
    raise AssertionError("the handshake did not end")


def test_a_tls_error_after_the_data_handshake_is_answered_426(tls_server, certs):  # noqa: F811
    """A STOR's data connection sends a record that fails its check (a
    forged or corrupted record): 426, the session goes on, no file."""
    ftp = _control(tls_server.port, certs.ca)
    try:
        port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
        ftp.putcmd("STOR forged.bin")
        data = socket.create_connection(("127.0.0.1", port), timeout=20)
        assert ftp.getline()[:3] in ("125", "150")
        pipe = TLSPipe(_tls12_client(certs.ca, AEAD_TLS12), server_side=False, server_hostname="127.0.0.1")
        _pipe_handshake(pipe, data)
        data.sendall(b"\x17\x03\x03\x00\x40" + bytes(range(64)))  # application data no key made
        final = _final(ftp)
        data.close()
        assert final.startswith("426"), final
        assert ftp.sendcmd("NOOP").startswith("200")
    finally:
        ftp.close()
    assert not Path(tls_server.root, "forged.bin").exists()


def test_a_mode_e_stream_refuses_cbc_suites(tls_server, certs):  # noqa: F811
    """A MODE E stream under PROT P (its own context, drsftp.server.ftp.eblock.tls):
    a CBC-only stream is refused and the STOR fails with 425; an AEAD one
    carries the blocks."""
    payload = b"sent over an AEAD suite\n" * 100
    ftp = _control(tls_server.port, certs.ca)
    try:
        assert ftp.sendcmd("MODE E").startswith("200")
        for ciphers, accepted in ((CBC_ONLY, False), (AEAD_TLS12, True)):
            port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
            assert ftp.sendcmd(f"ALLO {len(payload)}").startswith("200")
            ftp.putcmd("STOR up.bin")
            assert ftp.getline().startswith("150")
            raw = socket.create_connection(("127.0.0.1", port), timeout=20)
            ctx = _tls12_client(certs.ca, ciphers)
            if not accepted:
                with pytest.raises(ssl.SSLError, match="HANDSHAKE_FAILURE"):
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                raw.close()
                final = _final(ftp)
                assert final.startswith("425 TLS negotiation failed on a data connection"), final
                continue
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.cipher()[0] in POLICY
                tls.sendall(block(0, payload) + header(Desc.EOD | Desc.EOF, 0, 1))
                final = _final(ftp)
            assert final.startswith("226"), final
        assert Path(tls_server.root, "up.bin").read_bytes() == payload
    finally:
        ftp.close()
