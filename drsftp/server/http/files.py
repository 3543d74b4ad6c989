"""GET and HEAD: a file, whole or by ranges, with its instance digest.

Ranges are RFC 9110 sec. 14 (http/ranges.py): one range is a 206 with
Content-Range, several a multipart/byteranges body, none within the file
416 with ``Content-Range: bytes */SIZE``.  A collection is a 301 to its
slash form, 405 in it.  ``Want-Digest`` is answered
with ``Digest`` for the whole file (RFC 3230, http/digest.py), computed
once per file version: the cache is keyed by (path, size, mtime_ns), so a
changed file is read afresh.  The body is read in CHUNK pieces in the
loop's executor and written as the connection takes it.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import secrets
import stat
from email.utils import formatdate
from urllib.parse import urlsplit

from aiohttp import web

from ...http import digest, ranges
from ...io import fileio
from ..ops.digests import SHARED, Digests, Key, version_key
from .drs import Exchange
from .paths import Target
from .problem import Problem

CHUNK = 1 << 20  # bytes read and written at once


def etag(st: os.stat_result) -> str:
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


def last_modified(st: os.stat_result) -> str:
    return formatdate(st.st_mtime, usegmt=True)


def content_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class DigestCache:
    """Whole-file digests by file version (server/ops/digests.py, shared
    with FTP's HASH and CKSM); requests for one version while it is
    computed share the computation."""

    def __init__(self, shared: Digests = SHARED) -> None:
        self._shared = shared
        self._running: dict[Key, asyncio.Future[str]] = {}

    async def value(self, fd: int, path: str, st: os.stat_result, algorithm: str) -> str:
        """The Digest header's value of the file open as ``fd`` (``path``)."""
        table = digest.BY_HTTP[algorithm]
        key = version_key(st, table.cksm)
        hexdigest = self._shared.get(key)
        if hexdigest is None:
            running = self._running.get(key)
            if running is None:
                loop = asyncio.get_running_loop()
                running = self._running[key] = loop.run_in_executor(None, _compute, fd, st.st_size, table.new)
                running.add_done_callback(lambda _f: self._running.pop(key, None))
            hexdigest = await asyncio.shield(running)
            self._shared.put(key, hexdigest)
        return digest.http_value(algorithm, hexdigest)


def _compute(fd: int, size: int, new) -> str:
    h = new()
    fileio.feed(fd, h.update, 0, size)
    return h.hexdigest()


async def get(ex: Exchange, target: Target, digests: DigestCache, headers: dict[str, str]) -> web.StreamResponse:
    """Answer GET/HEAD for ``target`` (``headers``: the driver's, such as DRS)."""
    try:
        fd = os.open(target.fs, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Problem(404, "no such file.") from None
    except IsADirectoryError:
        return _collection(ex, target, headers)
    except PermissionError:
        raise Problem(403, "the file cannot be read.") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return _collection(ex, target, headers)
        if not stat.S_ISREG(st.st_mode):
            raise Problem(403, "not a regular file.")
        os.set_blocking(fd, True)
        return await _answer(ex, target, fd, st, digests, headers)
    finally:
        os.close(fd)


def _collection(ex: Exchange, target: Target, headers: dict[str, str]) -> web.Response:
    """GET or HEAD of a collection (RFC 9110 sec. 9.1: every resource's
    methods; RFC 4918 sec. 9.4 leaves the body to the server): named
    without its trailing slash, a 301 to the slash form, as Apache's and
    nginx's WebDAV servers answer (a client tells a directory by it);
    with it, 405 (its entries: PROPFIND; a body here would be stored as a
    file by a client or a COPY pull that asked for one)."""
    path, _, query = ex.request.raw_path.partition("?")
    if not urlsplit(path).path.endswith("/"):
        headers["Location"] = target.quoted(collection=True) + (f"?{query}" if query else "")
        return web.Response(status=301, headers=headers, text="A collection: its URL ends in /.\n")
    raise Problem(405, "a collection: list it with PROPFIND.", {"Allow": "HEAD, OPTIONS, PROPFIND"})


async def _answer(ex: Exchange, target: Target, fd: int, st: os.stat_result, digests: DigestCache,
                  headers: dict[str, str]) -> web.StreamResponse:
    request = ex.request
    size, ctype = st.st_size, content_type(target.parts[-1] if target.parts else "")
    headers.update({"Accept-Ranges": "bytes", "ETag": etag(st), "Last-Modified": last_modified(st)})
    asked = digest.wanted(request.headers.get("Want-Digest"))
    if asked:
        algorithm, name = asked
        headers["Digest"] = digest.digest_header(name, await digests.value(fd, target.fs, st, algorithm))
    try:
        parts = ranges.parse_range(request.headers.get("Range"), size)
    except ranges.Unsatisfiable as exc:
        raise Problem(416, f"no requested range lies within the file's {size} bytes.",
                      {"Content-Range": exc.content_range}) from None
    if parts is not None and request.headers.get("If-Range", etag(st)) != etag(st):
        parts = None  # RFC 9110 sec. 13.1.5: the file changed, send it whole
    resp = web.StreamResponse(status=200 if parts is None else 206, headers=headers)
    boundary = ""
    pieces: list[tuple[bytes | None, int, int]]
    if parts is None:
        resp.content_type, resp.content_length = ctype, size
        pieces = [(None, 0, size)]
    elif len(parts) == 1:
        resp.content_type, resp.content_length = ctype, parts[0].length
        resp.headers["Content-Range"] = parts[0].content_range(size)
        pieces = [(None, parts[0].first, parts[0].length)]
    else:
        boundary = secrets.token_hex(12)
        resp.headers["Content-Type"] = f"multipart/byteranges; boundary={boundary}"
        resp.content_length = ranges.multipart_length(boundary, parts, size, ctype)
        pieces = [(ranges.multipart_head(boundary, p, size, ctype), p.first, p.length) for p in parts]

    async def body() -> None:
        for head, first, length in pieces:
            if head:
                await ex.write(resp, head)
            await _copy(ex, fd, first, length, resp)
        if boundary:
            await ex.write(resp, ranges.multipart_tail(boundary))

    if request.method == "HEAD":
        await resp.prepare(request)
    else:
        await ex.send(resp, body)
    await resp.write_eof()
    ex.complete = True
    return resp


async def _copy(ex: Exchange, fd: int, first: int, length: int, resp: web.StreamResponse) -> None:
    loop = asyncio.get_running_loop()
    at, end = first, first + length
    while at < end:
        data = await loop.run_in_executor(None, os.pread, fd, min(CHUNK, end - at), at)
        if not data:  # the file shrank under us: the response cannot be whole
            raise ConnectionAbortedError("the file shrank while it was sent")
        await ex.write(resp, data)
        at += len(data)
