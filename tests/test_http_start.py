"""A command's start over HTTP (decision 0045): the first connection's
handshake begun before aiohttp is imported (client/http/preconnect.py), and
aiohttp imported without its default trust store (client/http/aiolib.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import pytest
from httpfake import FakeServer

from drsftp.client.http.pool import Pool
from drsftp.client.http.preconnect import begin
from drsftp.client.transfer.options import TransferOptions
from drsftp.http.url import parse_http_url
from drsftp.tuning import Role


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "f.bin").write_bytes(os.urandom(1000))
    s = FakeServer(str(root)).start()
    yield s
    s.stop()


async def _head(pool: Pool) -> int:
    async with pool.request("HEAD", "/f.bin", ok=(200,)) as (resp, _):
        return resp.content_length or 0


def test_the_connection_begun_before_the_import_carries_the_first_request(server):
    loc = parse_http_url(server.url("/f.bin"))
    opts = TransferOptions()
    early = begin(loc, opts, Role.RECEIVER, 4)
    assert early is not None and early.sock is not None
    port = early.sock.getsockname()[1]

    async def go() -> int:
        async with Pool(loc, opts, Role.RECEIVER, 4, early=early) as pool:
            size = await _head(pool)
            assert pool.handshake_rtt() is not None  # (-P auto's first count reads the early socket)
            return size

    assert asyncio.run(go()) == 1000
    assert early.sock is None  # taken by the pool
    assert server.peers == {("127.0.0.1", port)}  # one connection: the early one


def test_an_early_connection_the_pool_does_not_take_is_closed(server):
    """Begun to another address than the pool connects to (a name that
    resolved elsewhere): the pool makes its own and closes the early one."""
    other = socket.create_server(("127.0.0.1", 0))
    try:
        loc = parse_http_url(server.url("/f.bin"))
        elsewhere = parse_http_url(f"http://127.0.0.1:{other.getsockname()[1]}/f.bin")
        early = begin(elsewhere, TransferOptions(), Role.RECEIVER, 1)
        assert early is not None

        async def go() -> int:
            async with Pool(loc, TransferOptions(), Role.RECEIVER, 1, early=early) as pool:
                return await _head(pool)

        assert asyncio.run(go()) == 1000
        assert early.sock is None
        conn, _ = other.accept()
        with conn:
            conn.settimeout(5)
            assert conn.recv(1) == b""  # closed, nothing sent
    finally:
        other.close()


def test_an_early_connection_refused_is_the_error_a_fresh_one_gives(tmp_path, capsys):
    from drsftp.cli import main

    with socket.socket() as s:  # a closed port on 127.0.0.1
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["get", "-q", f"http://127.0.0.1:{port}/f.bin", str(tmp_path / "f.bin")]) == 1
    err = capsys.readouterr().err
    assert f"cannot connect to 127.0.0.1:{port}: connection refused" in err and "Traceback" not in err


def test_aiohttp_imported_by_the_client_leaves_the_ssl_module_as_it_was():
    """In a process of one thread the import skips aiohttp's default trust
    store; afterwards a default context loads the system's again, and
    aiohttp's own default (never used by the client) trusts nothing."""
    code = (
        "import ssl\n"
        "from drsftp.client.http import aiolib\n"
        "aiolib.load()\n"
        "import aiohttp.connector as c\n"
        "assert 'set_default_verify_paths' not in vars(ssl.SSLContext)\n"
        "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
        "ctx.set_default_verify_paths()\n"
        "print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_the_handshake_rtt_is_awaited_until_known_or_told_to_stop():
    """io/handshake.wait_rtt: the RTT once a look finds it; None at once
    when ``until`` says the wait is over (the HEAD answered first)."""
    import asyncio

    from drsftp.io.handshake import wait_rtt

    looks = []

    def rtt():
        looks.append(1)
        return 0.1 if len(looks) >= 3 else None

    assert asyncio.run(wait_rtt(rtt)) == 0.1 and len(looks) == 3
    assert asyncio.run(wait_rtt(lambda: None, lambda: True)) is None
