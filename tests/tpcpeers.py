"""Helpers of the HTTP third-party copy tests: two `drsftp serve --http-port`
processes over TLS (the test CA of tests/xrootdserve.py), curl against
them, and a scripted remote (an HTTP server in a thread of the test that
serves, trickles, stalls, dies mid-body or redirects, and counts the
connections it saw)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import PASSWORD, USER, running_server
from xrootdserve import TLSFiles

BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@dataclass
class Peer:
    port: int
    root: Path
    srv: object  # conftest.ServerProcess

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}/{path}"

    def log(self) -> str:
        return self.srv.stderr_text()  # type: ignore[attr-defined]


@contextlib.contextmanager
def drsftp_peer(root: Path, ca: TLSFiles, *extra: str, ns: tuple[str, ...] = ()):
    """``ns``: a prefix the server runs under (a mount namespace of its own)."""
    root.mkdir(parents=True, exist_ok=True)
    with running_server(root, "--http-port", "0", "--tls-cert", str(ca.cert), "--tls-key", str(ca.key),
                        "--tpc-ca-file", str(ca.ca), *extra, ns_prefix=ns) as srv:
        line = srv.proc.stdout.readline()
        m = re.search(r"HTTPS on 127\.0\.0\.1:(\d+)", line)
        assert m, f"no HTTPS port in {line!r}: {srv.stderr_text()}"
        yield Peer(int(m.group(1)), root, srv)


def curl(ca: TLSFiles, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    assert shutil.which("curl"), "curl is missing (Debian: curl)"
    return subprocess.run(["curl", "-sS", "--cacert", str(ca.ca), "--max-time", str(int(timeout)), *args],
                          capture_output=True, text=True, timeout=timeout + 10, check=False)


def copy(ca: TLSFiles, url: str, *headers: str, auth: str = BASIC, timeout: float = 120) -> tuple[int, str]:
    """curl -X COPY: (status, body)."""
    heads = [a for h in (f"Authorization: {auth}", *headers) for a in ("-H", h)]
    r = curl(ca, "-X", "COPY", *heads, "-w", "\n%{http_code}", url, timeout=timeout)
    body, _, code = r.stdout.rpartition("\n")
    assert code.isdigit(), f"curl failed: {r.stderr}"
    return int(code), body


def macaroon(ca: TLSFiles, url: str, caveats: list[str], validity: str = "PT30M", auth: str = BASIC) -> str:
    r = curl(ca, "-X", "POST", "-H", f"Authorization: {auth}", "-H", "Content-Type: application/macaroon-request",
             "--data", json.dumps({"caveats": caveats, "validity": validity}), "-f", url)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["macaroon"]


def last_line(body: str) -> str:
    return body.strip().splitlines()[-1] if body.strip() else ""


@dataclass
class Script:
    """What the scripted remote does with a GET: ``mode`` serve (with
    ``pace`` seconds between 64 KiB pieces), stall (after ``cut`` bytes),
    kill (close after ``cut`` bytes), redirect (to ``location``);
    ``ranges``: a ``Range: bytes=A-B`` is answered 206 with that range."""

    data: bytes = b""
    mode: str = "serve"
    cut: int = 0
    pace: float = 0.0
    location: str = ""
    ranges: bool = False
    busy_after: int = 0  # connections past this many are answered 503 (a source's per-address limit); 0: none
    connections: int = 0
    requests: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def _handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            return None

        def do_HEAD(self) -> None:
            self.do_GET(head=True)

        def setup(self) -> None:
            super().setup()
            self.ordinal = script.connections  # (counted as accepted: _Server.get_request)

        def do_GET(self, head: bool = False) -> None:
            script.requests.append((self.command, self.path, dict(self.headers)))
            data = script.data
            if script.busy_after and self.ordinal > script.busy_after:
                self.send_response(503)
                self.send_header("Connection", "close")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.close_connection = True
                return
            if script.mode == "redirect":
                self.send_response(302)
                self.send_header("Location", script.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", "")) if script.ranges else None
            if m:
                a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
                data = data[a:b + 1]
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if head:
                return
            sent = 0
            while sent < len(data) and not script.stop.is_set():
                if script.mode in ("stall", "kill") and sent >= script.cut:
                    if script.mode == "kill":
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    script.stop.wait(60)
                    return
                piece = data[sent:sent + 65536]
                if script.mode in ("stall", "kill"):
                    piece = piece[:max(script.cut - sent, 0)] or piece
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                if script.pace:
                    time.sleep(script.pace)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script

    def get_request(self):
        got = super().get_request()
        self.script.connections += 1
        return got


@contextlib.contextmanager
def scripted(script: Script, host: str = "127.0.0.1"):
    """A plain-HTTP remote on ``host`` run by ``script``: its port."""
    cls = type("S", (_Server,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
    server = cls((host, 0), _handler(script))
    server.script = script
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        script.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextlib.contextmanager
def listener(host: str = "127.0.0.1"):
    """A port nothing may connect to: (port, a function counting the connections it saw)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, 0))
    sock.listen(8)
    sock.setblocking(False)
    seen = []

    def count() -> int:
        with contextlib.suppress(BlockingIOError):
            while True:
                conn, _ = sock.accept()
                seen.append(conn)
        return len(seen)

    try:
        yield sock.getsockname()[1], count
    finally:
        for c in seen:
            c.close()
        sock.close()
