"""A COPY's pull (``Source:``): the remote file into the target, through
its part file (server/ftp/partfile.py's rule: the target is replaced only
once the whole file arrived, and a pull cut short keeps what came).

The file comes in ranged GETs (ranges.py: at most copyreq.CHUNK bytes,
tapering toward the end), on ``X-Number-Of-Streams`` connections at once,
or on as many as the server chooses without it (auto.py): one stripe
each, each stripe taking the next range as it finishes one; many requests
on a connection let two drsftp servers exchange their DRS reports all
along (remote.py).  The first request learns the size from its
``Content-Range``, and the other streams start at once while its body
comes; a source that ignores ranges (200) sends the whole file on that
one connection; one that answers the first range past the file's end
with that whole range (XRootD 5.5) is asked again for the range cut to
the size.
``RequireChecksumVerification: true``: once the file is whole, a HEAD
with ``Want-Digest`` asks the source's digest, compared with the part
file's before it is renamed (a source that offers none: not compared).
What a pull refuses of its source's answers: answers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re

import aiohttp

from ....http import copyreq, digest
from ....http.steal import MIN_TAIL, Plan, Span
from ....io import fileio
from ....tuning.count.streams import Action
from ....tuning.drs import DRSConfig
from ...ftp import partfile
from . import answers
from .auto import AutoStreams, rtt_of
from .copy import CopyFailed, Job, Settings4Copy
from .ranges import COLD_TAIL, DEFAULT_RTT, MIN_RANGE, first_range, streams_for
from .remote import Stripe
from .warm import Warm

log = logging.getLogger("drsftp.server")

CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19}|\*)")
WANT = "adler32, md5;q=0.8, sha-256;q=0.5"  # the digests asked of a source (cheapest first)
WRITE_BATCH = 4 << 20  # bytes gathered before one pwritev (a thread hop each)
MAX_IOV = 512  # buffers gathered at most (IOV_MAX is 1024 on Linux)
WHOLE = 1 << 62  # the end of a body of unknown length
WAKE = 1.0  # s between looks at a pull's streams (a stream added meanwhile)
FIRST_DEMAND = DRSConfig.demand_max  # bytes of the first range the window opens for (one stream: no joint overshoot)


async def pull(job: Job, cfg: Settings4Copy) -> None:
    path = job.part
    if not partfile.claim(path):
        raise CopyFailed("another upload is writing this file")
    if cfg.ledger is not None:
        cfg.ledger.forget(path)  # (O_TRUNC below: the ranges partial PUTs wrote there are gone, uploads.py)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        partfile.release(path)
        raise CopyFailed(f"the part file cannot be written: {exc.strerror}") from None
    try:
        await _fill(job, fd, cfg)
        if job.verify:
            await _verify(job, fd)
        os.ftruncate(fd, job.total or 0)  # (the file's size, whatever a write past it left)
        os.replace(path, job.target.fs)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise CopyFailed(f"no space left on the device: the copy stopped after {job.moved} bytes; the part"
                             " file keeps what arrived") from None
        raise CopyFailed(f"the target cannot be written: {exc.strerror or exc}") from None
    finally:
        try:
            await _settled(job.threads)
        finally:
            os.close(fd)
            partfile.release(path)


async def _threaded(job: Job, fn, *args):
    """``fn(*args)`` on a thread (a write of the part file, a read of it),
    counted in ``job.threads`` until it returns: a task cancelled meanwhile
    leaves the thread running (it cannot be stopped)."""
    fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    job.threads.add(fut)
    fut.add_done_callback(job.threads.discard)
    return await asyncio.shield(fut)


async def _settled(threads: set[asyncio.Future]) -> None:
    """Every thread of ``threads`` returned, however often the caller is
    cancelled meanwhile: until then the part file stays open and claimed
    (a next COPY's O_TRUNC would else take a late write of this one)."""
    cancelled = False
    while pending := {t for t in threads if not t.done()}:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


async def _fill(job: Job, fd: int, cfg: Settings4Copy) -> None:
    first = job.stripes[0]
    auto = AutoStreams(cfg.max_streams, cfg.drs) if job.auto else None
    step = first_range(job.streams, job.auto)
    fresh = first.take_link(job.remote).fresh  # (a new connection: then warm-ups, warm.py)
    loop = asyncio.get_running_loop()
    began = answered = loop.time()
    asking = asyncio.ensure_future(_get(job, first, 0, step))
    warming = Warm(job, cfg)
    try:
        resp = await asking
        answered = loop.time()
        await _sized(job, fd, cfg, auto, step, resp, warming)
    finally:
        await warming.settle()
        log.debug("http: COPY %s: on %s connection, the first answer in %.3f s, the rest in %.3f s",
                  job.target.href, "a new" if fresh else "a kept", answered - began, loop.time() - answered)


async def _sized(job: Job, fd: int, cfg: Settings4Copy, auto: AutoStreams | None, step: int,
                 resp: aiohttp.ClientResponse, warming: Warm) -> None:
    first = job.stripes[0]
    handed = False
    try:
        job.validator = answers.validator(resp)
        if resp.status == 200:  # no ranges: the whole body on this connection
            job.total = resp.content_length
            if job.total is None and not answers.chunked(resp):
                raise CopyFailed(answers.NO_LENGTH)
            room = _room(job, cfg, job.total)
            whole = Span(0, WHOLE if job.total is None else job.total)
            await _body(job, first, resp, fd, whole, whole.end if job.total is not None else room,
                        exact=job.total is not None)
            if job.total is None:
                job.total = whole.at
            return
        total = _first_total(resp)
        job.total = total
        if _overstated(resp, total):  # XRootD 5.5: the range past the end is not cut to the file (RFC 9110 14.4)
            resp.close()  # (its body falls short of its Content-Length: the connection is unusable)
            resp = await _get(job, first, 0, min(step, total))
            if resp.status != 206 or _first_total(resp) != total or _overstated(resp, total):
                raise CopyFailed("the source's answer to the range 0- has no usable Content-Range")
            answers.same_file(job.validator, resp)
        if total == 0:
            return
        _room(job, cfg, total)
        handed = True
    finally:
        if not handed:
            resp.release()
    plan = Plan(min(step, total), total, copyreq.CHUNK)
    await _Pull(job, fd, cfg, plan, auto, warming).run(resp, plan.open(0, min(step, total)))


def _room(job: Job, cfg: Settings4Copy, total: int | None) -> int:
    """The bytes the part file may take: a file of ``total`` bytes past
    --http-max-body (as a PUT, uploads.py) or the disk's room fails before
    a byte is written; one of unknown size stops there (:func:`_body`)."""
    if cfg.max_body is not None and total is not None and total > cfg.max_body:
        raise CopyFailed(f"the file's {total} bytes are more than this server's limit of {cfg.max_body}"
                         " (--http-max-body)")
    free = os.statvfs(os.path.dirname(job.part))
    disk = free.f_bavail * free.f_frsize
    if total is not None and total > disk:
        raise OSError(errno.ENOSPC, f"the disk has no room for {total} bytes")
    return disk if cfg.max_body is None else min(disk, cfg.max_body)


class SourceBusy(CopyFailed):
    """The source answered 503: it takes no more connections from here (a stream's: it ends, _Pull._worker)."""


class _Pull:
    """The streams of a pull once the size is known: the first reads its
    answer while the others start, each asking for its share, then
    stealing tails (http/steal.py)."""

    def __init__(self, job: Job, fd: int, cfg: Settings4Copy, plan: Plan, auto: AutoStreams | None,
                 warming: Warm) -> None:
        self.job, self.fd, self.cfg, self.plan, self.auto = job, fd, cfg, plan, auto
        self.warming = warming  # (warm.py: a stripe's connection being made)
        self.work: list[asyncio.Future[None]] = []
        self.spans: dict[int, Span] = {}  # each stripe's running span
        self.active = 0  # workers running
        self.began = asyncio.get_running_loop().time()
        self.asked = self.stolen = self.cut = 0  # requests, tails taken, responses cut short (the debug log)
        self.source_cap: int | None = None  # streams the source took when it refused one (503)
        self.ended = asyncio.Event()  # a stream ended (it wakes _steer)

    def running(self) -> list[Stripe]:
        return [s for s in self.job.stripes if not s.done and not s.ending]

    def spawn(self, stripe: Stripe, resp: aiohttp.ClientResponse | None = None, span: Span | None = None) -> None:
        self.active += 1
        self.work.append(asyncio.ensure_future(self._worker(stripe, resp, span)))

    def worth(self) -> bool:
        """A new stream finds work: an unasked range, or a tail a cold connection steals."""
        longest = max((s.left for s in self.plan.running), default=0)
        return self.plan.unasked >= MIN_RANGE or longest >= 2 * COLD_TAIL + self.lead()

    def add(self) -> bool:
        if not self.worth():
            return False
        self.spawn(self.warming.take() or self.job.stripe(len(self.job.stripes), self.cfg, self.job.guard))
        return True

    async def run(self, resp: aiohttp.ClientResponse, span: Span) -> None:
        job = self.job
        wanted = self.auto.first(job.stripes[0]) if self.auto is not None else job.streams
        more = streams_for(self.plan.unasked, wanted - 1) if wanted > 1 and self.plan.unasked else 0
        self.spawn(job.stripes[0], resp, span)
        for s in job.stripes[1:more + 1]:
            self.spawn(s)  # (X-Number-Of-Streams: its stripes were made with the COPY's first marker)
        steer: list[asyncio.Future[None]] = []
        if self.auto is not None:
            for _ in range(more):
                self.add()
            steer.append(asyncio.ensure_future(self._steer()))
        try:
            while True:  # (until every stream ended; the first failure ends the pull)
                for w in (*self.work, *steer):
                    if w.done() and not w.cancelled() and w.exception() is not None:
                        raise w.exception()  # type: ignore[misc]
                pending = [w for w in self.work if not w.done()]
                if not pending:  # (the steering, which may sleep 4 RTTs a source reports, ends with them)
                    break
                await asyncio.wait(pending + [w for w in steer if not w.done()], timeout=WAKE,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in (*self.work, *steer):
                w.cancel()
            for w in (*self.work, *steer):
                with contextlib.suppress(BaseException):
                    await w
            log.debug("http: COPY %s: %d streams, %d ranged GETs after the first, %d tails stolen, %d cut short",
                      job.target.href, len(job.stripes), self.asked, self.stolen, self.cut)
        if self.plan.missing:  # (every stream ended, a range given back by one that -P auto ended still unasked)
            raise CopyFailed(f"{self.plan.missing} bytes of the file were not fetched; the part file keeps what"
                             " arrived")

    def lead(self) -> int:
        """Bytes a stream receives in a round trip (what a victim gets while its thief's request travels)."""
        elapsed = asyncio.get_running_loop().time() - self.began
        # (the first stripe's RTT, else a running one's: a stripe done has given its link back)
        rtt = next((r for r in map(rtt_of, self.job.stripes) if r), None) or DEFAULT_RTT
        streams = sum(1 for s in self.job.stripes if s.moved)  # (the average stream's, not the last ones')
        return int(self.job.moved / max(elapsed, 1e-3) / max(streams, 1) * rtt)

    async def _worker(self, stripe: Stripe, resp: aiohttp.ClientResponse | None, span: Span | None) -> None:
        warm = resp is not None or stripe.index in self.warming  # (else its connection is still to be made)
        try:
            await self.warming.ready(stripe.index)
            if resp is not None and span is not None:
                warm = await self._read(stripe, resp, span, span.end)
            while not stripe.ending:
                span = self.plan.next(self.active)
                if span is None:
                    span = self.plan.steal(self.lead(), MIN_TAIL if warm else COLD_TAIL)
                    self.stolen += span is not None
                if span is None:
                    break
                self.asked += 1
                asked = span.end
                self.spans[stripe.index] = span
                try:
                    resp = await _range(self.job, stripe, span.start, asked)
                except SourceBusy:
                    if self.active <= 1:
                        raise
                    self.plan.done(span)  # (nothing of it came: free again for the streams that run)
                    self.source_cap = self.active - 1  # (-P auto adds none past it: _steer)
                    log.info("http: COPY %s: the source takes no more connections: %d streams", self.job.target.href,
                             self.active - 1)
                    break
                warm = await self._read(stripe, resp, span, asked)
        finally:
            self.active -= 1
            stripe.give_back()
            self.ended.set()

    async def _read(self, stripe: Stripe, resp: aiohttp.ClientResponse, span: Span, asked: int) -> bool:
        """One response into ``span``; cut short (stolen from), its connection
        closes (RFC 9112 sec. 9.3): False, the next request opens a new one."""
        cut = True
        try:
            await _body(self.job, stripe, resp, self.fd, span, asked)
            cut = span.end < asked
        finally:
            self.plan.done(span)
            if cut:
                self.cut += 1
                resp.close()
            else:
                resp.release()
        return not cut

    async def _steer(self) -> None:
        """-P auto's decisions while ranges are left (auto.py)."""
        assert self.auto is not None
        job, auto = self.job, self.auto
        loop = asyncio.get_running_loop()
        then, before = loop.time(), job.moved
        while self.plan.missing >= MIN_RANGE:
            if not await self._nap(auto.interval(self.running())):
                return
            now, moved = loop.time(), job.moved
            goodput = (moved - before) / max(now - then, 1e-3)
            then, before = now, moved
            running = self.running()
            action = auto.update(goodput, running, (job.total or 0) - moved)
            cap = auto.cap if self.source_cap is None else min(auto.cap, self.source_cap)
            if action is Action.ADD and not (len(running) < cap and self.add()):
                auto.refused(action, len(running))
            elif action is Action.REMOVE:
                if len(running) > 1:
                    running[-1].ending = True  # (it ends a round trip on: the rest of its span is free again)
                    span = self.spans.get(running[-1].index)
                    if span is not None:
                        self.plan.cut(span, self.lead())
                else:
                    auto.refused(action, len(running))

    async def _nap(self, seconds: float) -> bool:
        """``seconds`` asleep, a stream's end waking it early: False once no
        stream runs or the ranges left are not worth steering for."""
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while self.active and self.plan.missing >= MIN_RANGE and (left := until - loop.time()) > 0:
            self.ended.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ended.wait(), left)
        return self.active > 0 and self.plan.missing >= MIN_RANGE


async def _range(job: Job, stripe: Stripe, start: int, end: int) -> aiohttp.ClientResponse:
    resp = await _get(job, stripe, start, end)
    try:
        if resp.status != 206:
            raise CopyFailed(f"the source answered {resp.status} {resp.reason} to the range {start}-{end - 1}")
        m = CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
        if not m or int(m.group(1)) != start or int(m.group(2)) != end - 1:
            raise CopyFailed(f"the source sent another range than {start}-{end - 1}")
        if m.group(3) != str(job.total):
            raise CopyFailed("the source file changed size during the copy")
        answers.same_file(job.validator, resp)
    except BaseException:
        resp.release()
        raise
    return resp


async def _get(job: Job, stripe: Stripe, start: int, end: int) -> aiohttp.ClientResponse:
    headers = [*job.headers, ("Range", copyreq.range_header(start, end)), *answers.if_match(job.validator)]
    # its window opens for what it asks (DESIGN.md#drs-demand); the first range, asked before the size is known
    # (a tree's file: often all of it), for FIRST_DEMAND of it
    stripe.expect(min(end - start, FIRST_DEMAND) if job.total is None else min(end, job.total) - start)
    try:
        resp, job.remote = await stripe.send("GET", job.remote, headers, "source")
    except TimeoutError:
        raise CopyFailed(f"the source {job.remote.shown} did not answer in time") from None
    except aiohttp.ClientError as exc:
        raise CopyFailed(f"the source {job.remote.shown} cannot be reached: {_why(exc)}") from None
    if resp.status >= 300 and resp.status != 416:
        text = (await _small(resp)).strip()
        resp.release()
        if resp.status == 412 and job.validator is not None:
            raise CopyFailed(answers.changed(job.validator, "412 Precondition Failed to If-Match"))
        fail = SourceBusy if resp.status == 503 else CopyFailed
        raise fail(f"the source answered {resp.status} {resp.reason}" + (f": {text}" if text else ""))
    if (coding := answers.coding(resp)) is not None:
        resp.close()
        raise CopyFailed(f"the source sent the file content-coded (Content-Encoding: {coding}): a copy stores"
                         " the file's own bytes")
    return resp


def _first_total(resp: aiohttp.ClientResponse) -> int:
    m = CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
    if resp.status == 416:
        tail = resp.headers.get("Content-Range", "").strip()
        if tail == "bytes */0":
            return 0
        raise CopyFailed(f"the source refused the range 0-: {tail or 'no Content-Range'}")
    if not m or m.group(3) == "*" or int(m.group(1)) != 0:
        raise CopyFailed("the source's 206 has no usable Content-Range")
    return int(m.group(3))


def _overstated(resp: aiohttp.ClientResponse, total: int) -> bool:
    """A 206 whose range ends past the file's last byte."""
    m = CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
    return resp.status == 206 and m is not None and int(m.group(2)) >= total > 0


async def _body(job: Job, stripe: Stripe, resp: aiohttp.ClientResponse, fd: int, span: Span, asked: int,
                exact: bool = True) -> None:
    """The response body into ``span`` (from ``span.at``), up to its end,
    which a thief may move down meanwhile; a body short of it: CopyFailed."""
    pending: list[bytes] = []
    at = span.at  # where ``pending`` goes
    size = 0
    stripe.begin()
    try:
        try:
            async for data in resp.content.iter_any():
                n = len(data)
                if span.at + n > asked:
                    raise CopyFailed("the source sent more bytes than it announced" if exact else
                                     f"the file outgrew the {asked} bytes this server stores of it"
                                     " (--http-max-body or the disk's room)")
                if n > span.end - span.at:  # (cut: the rest is the thief's)
                    n = span.end - span.at
                    data = data[:n]
                pending.append(data)
                size += n
                span.at += n
                stripe.moved_bytes(n)
                if size >= WRITE_BATCH or len(pending) >= MAX_IOV or span.at >= span.end:
                    at += await _threaded(job, fileio.pwritev_all, fd, pending, at)
                    pending, size = [], 0
                if span.at >= span.end:
                    break
        except TimeoutError:  # (aiohttp's ServerTimeoutError is a ClientError too)
            fileio.pwritev_all(fd, pending, at)  # (the part file keeps what came)
            raise CopyFailed(f"the source sent nothing for {stripe.timeout:g} seconds"
                             f" (--data-timeout), after {job.moved} bytes") from None
        except aiohttp.ClientError as exc:
            fileio.pwritev_all(fd, pending, at)
            raise CopyFailed(f"the source connection broke after {job.moved} bytes: {_why(exc)}") from None
        if pending:
            at += await _threaded(job, fileio.pwritev_all, fd, pending, at)
    finally:
        stripe.expect(0)  # (nothing more is coming: DESIGN.md#drs-demand)
        stripe.end()
    if exact and span.at < span.end:
        raise CopyFailed(f"the source ended its body after {job.moved} bytes, short of the {job.total} announced")


async def _verify(job: Job, fd: int) -> None:
    stripe = job.stripes[0]
    try:
        resp, _ = await stripe.send("HEAD", job.remote, [*job.headers, ("Want-Digest", WANT)], "source")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise CopyFailed(f"the source's checksum could not be asked: {_why(exc)}") from None
    resp.release()
    offered = digest.parse_digest(resp.headers.get("Digest", ""))
    ours = [a for a in digest.ALGORITHMS if a in offered]
    if not ours:
        return  # (a source that offers no digest: nothing to compare, docs/HTTP.md)
    d = digest.Digester(ours[0])
    await _threaded(job, fileio.feed, fd, d.update, 0, job.total)
    if d.value() != offered[ours[0]]:
        raise CopyFailed(f"checksum mismatch: the source's {ours[0]} is {offered[ours[0]]}, the copy's"
                         f" {d.value()}")


async def _small(resp: aiohttp.ClientResponse) -> str:
    try:
        return (await asyncio.wait_for(resp.content.read(400), 5)).decode("utf-8", "replace").split("\n")[0]
    except (aiohttp.ClientError, TimeoutError):
        return ""


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
