"""`drsftp put FILE https://...` (docs/HTTP.md, "Client").

One ``PUT`` streams the file with its ``Content-Length``.  With ``-P N``,
or to resume, the file goes as partial PUTs (RFC 9110 sec. 14.5):
``Content-Range: bytes A-B/TOTAL`` pieces of at most 64 MiB on N
connections, each answered ``202`` until the server's part file holds
every byte, then ``201`` or ``204`` (the last piece goes alone, after
the others: one request completes the file).  ``--continue`` first asks ``HEAD``
with ``DRS-Part: ranges`` which ranges the part file holds
(drsftp/http/drsheader.py) and sends only the others.

A server may ignore Content-Range and store a partial PUT's body as the
whole file (RFC 9110 sec. 14.5): a done status to a piece before the last
says so, and the file then goes again in one whole PUT (the pieces were
lost, not the file: nothing else makes it whole on such a server).  After
partial PUTs the server's size (``HEAD`` Content-Length) must be the
file's before the put is reported done.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from ...ftp.eblock import RangeSet
from ...http import drsheader, spans
from ...http.url import HTTPLocation
from ...tuning import Role
from ...tuning.count.streams import StreamSample
from ..result import TransferResult
from ..streams.monitor import watch
from ..transfer.attempts import already_complete
from ..transfer.options import TransferOptions
from ..transfer.progress import ProgressView
from . import auto
from .errors import HTTPError
from .pool import Pool, Slot, on_pool, together
from .preconnect import Early

log = logging.getLogger("drsftp.client")
READ_CHUNK = 1 << 20
DONE = (200, 201, 204)  # the whole file is in place
PARTIAL = (202,)  # a part taken; the server waits for the rest
PIECE_MIN = 1 << 20  # -P N cuts a file into N pieces, none below this (but the last)
# The last piece goes alone once every other was answered 202: exactly one
# PUT completes the file, so one answer says 201/204 (a server need not
# settle two PUTs that complete it at once), and the wait costs this much.
LAST_PIECE = 1 << 18


class Upload:
    """The PUTs of one file: one whole, or partial ones on N connections."""

    def __init__(self, pool: Pool, path: str, fd: int, total: int, pieces: list[tuple[int, int]] | None,
                 connections: int) -> None:
        self.pool, self.path, self.fd, self.total = pool, path, fd, total
        self.pieces = pieces  # None: one PUT of the whole file
        self.connections = connections
        self.moved = 0
        self.finished = False  # a DONE status came back
        self.ignored = False  # a piece before the last was answered DONE: the server ignores Content-Range
        self.slots: list[Slot] = []
        self.requests = 0

    def left(self) -> int:
        return max(0, self.total - self.moved)

    def samples(self) -> list[StreamSample]:
        return [StreamSample(s.link.tuner.ctl.last_rtt, s.link.tuner.ctl.stats.rtt_min)
                for s in self.slots[-self.connections:] if s.link is not None]

    async def run(self) -> None:
        if self.pieces is None:
            await self._put(0, self.total, None)
            return
        *rest, (a, b) = self.pieces
        if rest and b - a > LAST_PIECE:  # (the last piece, cut short: its wait is brief)
            rest, (a, b) = [*rest, (a, b - LAST_PIECE)], (b - LAST_PIECE, b)
        queue = list(reversed(rest))

        async def worker() -> None:
            while queue and not self.ignored:
                x, y = queue.pop()
                await self._put(x, y, spans.content_range(x, y, self.total), last=False)

        await together(*(worker() for _ in range(min(self.connections, len(queue)))))
        if self.ignored:
            log.warning("PUT %s: the server took a piece as the whole file (it ignores Content-Range,"
                        " RFC 9110 sec. 14.5): sending the file in one PUT", self.path)
            self.finished = False
            await self._put(0, self.total, None)
            return
        await self._put(a, b, spans.content_range(a, b, self.total))

    async def _put(self, start: int, end: int, content_range: str | None, last: bool = True) -> None:
        headers = {"Content-Length": str(end - start), "Content-Type": "application/octet-stream"}
        if content_range is not None:
            headers["Content-Range"] = content_range
        self.requests += 1
        ok = DONE + PARTIAL if content_range is not None else DONE
        async with self.pool.request("PUT", self.path, ok=ok, headers=headers,
                                     body=lambda slot: self._body(slot, start, end)) as (resp, _):
            if resp.status in DONE:
                self.finished = True
                self.ignored = self.ignored or not last  # (before the last piece: it cannot be whole)

    async def _body(self, slot: Slot, start: int, end: int) -> AsyncIterator[bytes]:
        self.slots.append(slot)
        pos = start
        while pos < end:
            chunk = os.pread(self.fd, min(READ_CHUNK, end - pos), pos)
            if not chunk:
                raise HTTPError(f"the local file ended at {pos} bytes of {self.total} (did it change?)",
                                transient=False)
            yield chunk
            pos += len(chunk)
            self.moved += len(chunk)
            if slot.link is not None:
                slot.link.moved(len(chunk))


async def put(src: str, loc: HTTPLocation, opts: TransferOptions, streams: int | None,
              early: Early | None = None) -> TransferResult:
    """``early``: the first connection, begun by the command line (preconnect.py)."""
    return await on_pool("put", loc, opts, Role.SENDER, auto.pool_size(streams),
                         lambda pool, o: put_with(pool, src, loc, o, streams), early)


async def put_with(pool: Pool, src: str, loc: HTTPLocation, opts: TransferOptions,
                   streams: int | None) -> TransferResult:
    """One file's put on ``pool``'s connections (a tree's files share them)."""
    fd = os.open(src, os.O_RDONLY)
    try:
        total = os.fstat(fd).st_size
        held = RangeSet()
        if opts.resume:
            held, complete = await _server_holds(pool, loc, total)
            if complete:
                return already_complete("put", loc.path, total)
        n = streams or auto.first_connections(None, opts)
        parallel = n > 1 and total > 0
        gaps = held.missing(total)
        share = -(-sum(b - a for a, b in gaps) // n)  # (each connection a piece at least)
        limit = min(spans.MAX_REQUEST, max(PIECE_MIN, share))
        pieces = spans.spans(gaps, limit) if held.total or parallel else None
        up = Upload(pool, loc.path, fd, total, pieces, n)
        view = ProgressView(os.path.basename(src), total, opts.progress)
        try:
            out = await watch(up, opts, view, held.total, None)
        finally:
            view.close()
        if not out.timed_out and not up.finished:
            raise HTTPError(f"PUT {loc.shown}: the server took every part but did not say the file is"
                            " whole (202 to the last one); --continue resends what it lacks", transient=False)
        if pieces is not None and not out.timed_out:
            await _check_size(pool, loc, total)
        result = TransferResult(direction="put", path=loc.path, bytes=up.moved, seconds=out.seconds,
                                total_size=total, resumed_from=held.total, complete=not out.timed_out,
                                timeline=out.timeline)
        extra: dict[str, Any] = {"mode": "http", "parallel": "auto" if streams is None else streams,
                                 "streams": n if pieces else 1, "requests": up.requests}
        result.update(pool.summary(), **extra)
        if opts.verify and not out.timed_out:
            from .verify import verify

            result.update(await verify(pool, loc.path, src))
        return result
    finally:
        os.close(fd)


async def _check_size(pool: Pool, loc: HTTPLocation, total: int) -> None:
    """After partial PUTs: the server's file has the local file's size
    (a server that ignores Content-Range keeps one piece: RFC 9110 sec. 14.5)."""
    async with pool.request("HEAD", loc.path, ok=(200, 204)) as (resp, _):
        size = resp.content_length
    if size is None:
        log.info("PUT %s: the server's HEAD gives no Content-Length; its size is not checked", loc.shown)
    elif size != total:
        raise HTTPError(f"PUT {loc.shown}: the server holds {size} bytes of {total} after the partial PUTs"
                        " (does it ignore Content-Range? RFC 9110 sec. 14.5); put it again with -P 1",
                        transient=False)


async def _server_holds(pool: Pool, loc: HTTPLocation, total: int) -> tuple[RangeSet, bool]:
    """What the server's part file holds of this upload (``DRS-Part: ranges``),
    and whether the target is already whole (its size, no part file)."""
    async with pool.request("HEAD", loc.path, ok=(200, 204, 404),
                            headers={drsheader.PART_QUERY: "ranges"}) as (resp, _):
        value = resp.headers.get(drsheader.PART_RANGES)
        target = resp.content_length if resp.status == 200 else None
    try:
        ranges = drsheader.parse_ranges(value)
    except ValueError as exc:
        log.warning("the server's %s is not usable (%s): sending the whole file", drsheader.PART_RANGES, exc)
        ranges = []
    held = RangeSet()
    for first, last in ranges:
        if last < total:
            held.add(first, last + 1)
    complete = not held.total and not value and target == total
    return held, complete
