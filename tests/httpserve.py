"""The HTTPS/WebDAV front of `drsftp serve` for tests: in this process (the
front's own thread, fast) or as a `drsftp serve --http-port 0` process."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import socket
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from conftest import PASSWORD, PY, USER

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


@dataclass
class Front:
    port: int
    tls: ssl.SSLContext | None = None  # a client context trusting the test CA (None: plain HTTP)
    ca: Path | None = None
    proc: subprocess.Popen | None = None
    server: object = None  # in_process: the FTP server whose handler class the front shares
    log: list = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def connect(self) -> socket.socket:
        """A raw connection (wrapped in TLS when the front speaks it)."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname="127.0.0.1")
        return sock


def raw(front: Front, data: bytes, timeout: float = 10.0, until_close: bool = False) -> bytes:
    """Send ``data`` on a fresh connection; what comes back: the first
    response (``until_close``: all until the server closes or goes quiet)."""
    with front.connect() as sock:
        sock.settimeout(timeout)
        sock.sendall(data)
        out = b""
        with contextlib.suppress(socket.timeout, ConnectionError, ssl.SSLError):
            while chunk := sock.recv(65536):
                out += chunk
                if not until_close and b"\r\n\r\n" in out and _whole(out):
                    break
        return out


def _whole(out: bytes) -> bool:
    head, _, body = out.partition(b"\r\n\r\n")
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return m is not None and len(body) >= int(m.group(1))


def status(resp: bytes) -> int:
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)  # (aiohttp answers a request it cannot parse as 1.0)
    assert m, resp[:200]
    return int(m.group(1))


def client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


@contextlib.contextmanager
def threaded(handler):
    """A threaded ``http.server`` of ``handler`` on 127.0.0.1 (a scripted peer): its port."""
    import http.server

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)


@contextlib.contextmanager
def in_process(root: Path, *, certs=None, **cfg):
    """The front of a server built in this process (its FTP side idle): a Front."""
    from drsftp.server.app import ServerConfig, build_server
    from drsftp.server.http import front as http_front

    tls = {} if certs is None else {"tls_cert": str(certs.good)}
    config = ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0, http_port=0,
                          http_plain=certs is None, **tls, **cfg)
    server = build_server(config)
    front = http_front.build(server.handler, config)
    try:
        front.start()
        yield Front(front.address[1], None if certs is None else client_context(certs.ca),
                    None if certs is None else certs.ca, server=server)
    finally:
        front.close()
        server.close_all()


@contextlib.contextmanager
def serve_process(root: Path, *extra: str, certs=None):
    """`drsftp serve --http-port 0` (HTTPS with ``certs``, else --http-plain): a Front."""
    tls = ["--http-plain"] if certs is None else ["--tls-cert", str(certs.good)]
    argv = [PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0", "--user", USER, "--password",
            PASSWORD, "--http-port", "0", *tls, *extra]
    err = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        port = None
        for _ in range(5):
            line = proc.stdout.readline()
            m = re.search(r"HTTP\S* .*on 127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
            if not line:
                break
        if port is None:
            err.seek(0)
            raise RuntimeError(f"drsftp serve gave no HTTP line: {err.read()}")
        yield Front(port, None if certs is None else client_context(certs.ca), None if certs is None else certs.ca,
                    proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        proc.stdout.close()
        err.close()


def run(coro):
    """An aiohttp coroutine of a test, bounded."""
    return asyncio.run(asyncio.wait_for(coro, 60))


async def fetch(front: Front, method: str, path: str, headers=None, data=None, *, auth: bool = True):
    """(status, headers, body) of one request to ``front``."""
    import aiohttp

    hdrs = {**(AUTH if auth else {}), **(headers or {})}
    async with aiohttp.ClientSession() as s, s.request(method, front.url(path), headers=hdrs, data=data,
                                                       ssl=front.tls or False) as r:
        return r.status, r.headers, await r.read()
