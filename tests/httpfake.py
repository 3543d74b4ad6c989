"""A small HTTP/WebDAV server for the client's tests (tests/test_http_client.py):
aiohttp on 127.0.0.1 in a thread, serving a directory with the rules of
docs/HTTP.md that the client relies on (ranges, Want-Digest, partial PUT,
DRS-Part, PROPFIND Depth 1, the DRS header), and knobs to misbehave."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import hashlib
import os
import ssl
import threading
import urllib.parse
from xml.sax.saxutils import escape

from aiohttp import web

from drsftp.http.digest import Digester, want_digest
from drsftp.http.ranges import Unsatisfiable, parse_range

USER, PASSWORD = "tester", "s3cret-pw"


class FakeServer:
    def __init__(self, root: str, cert: str | None = None) -> None:
        self.root = root
        self.cert = cert  # PEM of certificate and key: HTTPS
        self.auth = True
        self.ranges = True  # False: Accept-Ranges none, every GET whole
        self.announce_ranges = True  # False: no Accept-Ranges at all (XRootD's HEAD), whatever ranges says
        self.cut_after: int | None = None  # a GET's body ends (connection dropped) after this many bytes
        self.bad_digest = False
        self.no_digest = False
        self.offered: tuple[str, ...] | None = None  # the digest algorithms answered (None: all)
        self.drs = True  # answer DRS headers
        self.drs_value = "rtt=1000 rate=5000"  # what they say
        self.fail_next: list[int] = []  # statuses the next requests get instead of an answer
        self.evil_hrefs = False  # listings also name entries outside the directory asked
        self.stall_after: int | None = None  # a GET's body stops (the connection held open) after this many bytes
        self.shift_range = 0  # a 206 names a span this many bytes off the one it carries
        self.head_extra = 0  # HEAD claims this many bytes more than the file holds (a file that shrank)
        self.slow_from: int | None = None  # a GET of a range from this offset sends 64 KiB each 10 ms
        self.seen: list[tuple[str, str, dict[str, str]]] = []  # method, path, headers
        self.peers: set[object] = set()  # the client ends (host, port) of the connections requests came on
        self.gets_whole = 0  # GET bodies sent to their end (the others the client cut)
        self.parts: dict[str, list[tuple[int, int]]] = {}  # partial PUTs held: path -> [a, b)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    # -- life ------------------------------------------------------------------
    def start(self) -> FakeServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test server did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        if self._thread.is_alive():
            raise RuntimeError("the test server did not stop")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)  # (handlers cut short by the client)
        await runner.setup()
        context = None
        if self.cert:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.cert)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = runner.addresses[0][1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def url(self, path: str = "/", user: str | None = USER, password: str | None = PASSWORD) -> str:
        cred = f"{user}:{password}@" if user and password else f"{user}@" if user else ""
        return f"{'https' if self.cert else 'http'}://{cred}127.0.0.1:{self.port}{path}"

    # -- requests --------------------------------------------------------------
    def _file(self, request: web.Request) -> str:
        rel = urllib.parse.unquote(request.path).lstrip("/")
        return os.path.join(self.root, rel)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path, dict(request.headers)))
        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        if self.auth and request.headers.get("Authorization") != "Basic " + base64.b64encode(
                f"{USER}:{PASSWORD}".encode()).decode():
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="drsftp"'})
        if "forbidden" in request.path:
            return web.Response(status=403)
        if self.fail_next:
            await request.read()
            return web.Response(status=self.fail_next.pop(0))
        headers = {}
        if self.drs and "DRS" in request.headers:
            headers["DRS"] = self.drs_value
        handler = {"GET": self._get, "HEAD": self._get, "PUT": self._put, "PROPFIND": self._propfind,
                   "MKCOL": self._mkcol}.get(
            request.method)
        if handler is None:
            return web.Response(status=405, headers=headers)
        return await handler(request, headers)

    async def _get(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        path = self._file(request)
        if request.method == "HEAD" and request.headers.get("DRS-Part") == "ranges":
            held = self.parts.get(request.path, [])
            headers["DRS-Part-Ranges"] = ",".join(f"{a}-{b - 1}" for a, b in held)
            if not os.path.isfile(path):
                return web.Response(status=404 if not held else 200, headers=headers)
        if not os.path.isfile(path):
            return web.Response(status=404, headers=headers)
        size = os.path.getsize(path)
        headers["Last-Modified"] = email.utils.formatdate(os.path.getmtime(path), usegmt=True)
        headers["ETag"] = f'"{size:x}-{int(os.path.getmtime(path) * 1e6):x}"'
        if self.announce_ranges:
            headers["Accept-Ranges"] = "bytes" if self.ranges else "none"
        wanted = request.headers.get("Want-Digest")
        if wanted and self.offered is not None:
            wanted = ",".join(w for w in wanted.split(",") if w.split(";")[0].strip() in self.offered)
        algorithm = want_digest(wanted)
        if algorithm and not self.no_digest:
            d = Digester(algorithm)
            with open(path, "rb") as f:
                d.update(f.read() + (b"x" if self.bad_digest else b""))
            headers["Digest"] = f"{algorithm}={d.value()}"
        first, last, status = 0, size - 1, 200
        if self.ranges:
            try:
                ranges = parse_range(request.headers.get("Range"), size)
            except Unsatisfiable as exc:
                headers["Content-Range"] = exc.content_range
                return web.Response(status=416, headers=headers)
            if ranges:
                first, last, status = ranges[0].first, ranges[0].last, 206
                headers["Content-Range"] = ranges[0].content_range(size)
                if self.shift_range:
                    headers["Content-Range"] = f"bytes {first + self.shift_range}-{last + self.shift_range}/{size}"
        headers["Content-Length"] = str(last - first + 1 + (self.head_extra if request.method == "HEAD" else 0))
        resp = web.StreamResponse(status=status, headers=headers)
        await resp.prepare(request)
        if request.method == "HEAD":
            return resp
        with open(path, "rb") as f:
            f.seek(first)
            left, sent = last - first + 1, 0
            while left:
                chunk = f.read(min(left, 1 << 16))
                if self.stall_after is not None and sent + len(chunk) > self.stall_after:
                    await resp.write(chunk[:self.stall_after - sent])
                    await asyncio.sleep(30)  # (until the client gives up: the test stops it first)
                    return resp
                if self.cut_after is not None and sent + len(chunk) > self.cut_after:
                    await resp.write(chunk[:self.cut_after - sent])
                    request.transport.close()  # (the client sees the body end early)
                    return resp
                await resp.write(chunk)
                left, sent = left - len(chunk), sent + len(chunk)
                if self.slow_from == first:
                    await asyncio.sleep(0.01)
        await resp.write_eof()
        self.gets_whole += 1
        return resp

    async def _put(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        path = self._file(request)
        if not os.path.isdir(os.path.dirname(path)):
            return web.Response(status=409, headers=headers)
        part = path + ".part"
        span = request.headers.get("Content-Range")
        if span is None:
            with open(part, "wb") as f:
                async for chunk in request.content.iter_any():
                    f.write(chunk)
            os.replace(part, path)
            return web.Response(status=201, headers=headers)
        _, _, rest = span.partition(" ")
        ab, _, total_text = rest.partition("/")
        a, b, total = int(ab.split("-")[0]), int(ab.split("-")[1]) + 1, int(total_text)
        mode = "r+b" if os.path.exists(part) else "wb"
        with open(part, mode) as f:
            f.seek(a)
            async for chunk in request.content.iter_any():
                f.write(chunk)
        held = sorted(self.parts.get(request.path, []) + [(a, b)])
        merged: list[tuple[int, int]] = []
        for x, y in held:
            if merged and x <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], y))
            else:
                merged.append((x, y))
        self.parts[request.path] = merged
        if merged == [(0, total)]:
            os.truncate(part, total)
            os.replace(part, path)
            del self.parts[request.path]
            return web.Response(status=201, headers=headers)
        return web.Response(status=202, headers=headers)

    async def _mkcol(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        path = self._file(request).rstrip("/")
        if os.path.exists(path):
            return web.Response(status=405, headers=headers)
        if not os.path.isdir(os.path.dirname(path)):
            return web.Response(status=409, headers=headers)
        os.mkdir(path)
        return web.Response(status=201, headers=headers)

    async def _propfind(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        await request.read()
        path = self._file(request)
        if not os.path.exists(path):
            return web.Response(status=404, headers=headers)
        items = [(request.path, path)]
        if os.path.isdir(path) and request.headers.get("Depth") == "1":
            base = request.path.rstrip("/")
            items += [(f"{base}/{urllib.parse.quote(n)}", os.path.join(path, n)) for n in sorted(os.listdir(path))]
        if self.evil_hrefs:
            items += [("/elsewhere/x.bin", os.path.join(self.root, "big.bin")), (request.path + "/..", path)]
        out = ['<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">']
        for href, p in items:
            is_dir = os.path.isdir(p)
            kind = "<D:collection/>" if is_dir else ""
            length = "" if is_dir else f"<D:getcontentlength>{os.path.getsize(p)}</D:getcontentlength>"
            when = email.utils.formatdate(os.path.getmtime(p), usegmt=True)
            out.append(f"<D:response><D:href>{escape(href)}{'/' if is_dir and not href.endswith('/') else ''}"
                       f"</D:href><D:propstat><D:prop><D:resourcetype>{kind}</D:resourcetype>{length}"
                       f"<D:getlastmodified>{when}</D:getlastmodified></D:prop>"
                       "<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>")
        out.append("</D:multistatus>")
        return web.Response(status=207, body="".join(out).encode(), headers=headers,
                            content_type="application/xml")


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
