"""A COPY's pull (``Source:``): the remote file into the target, through
its part file (server/ftp/partfile.py's rule: the target is replaced only
once the whole file arrived, and a pull cut short keeps what came).

The file comes in ranged GETs of at most copyreq.CHUNK bytes, on
``X-Number-Of-Streams`` connections at once (one stripe each, each stripe
taking the next range as it finishes one): many requests on a connection
let two drsftp servers exchange their DRS reports all along (remote.py).
The first request learns the size from its ``Content-Range``; a source
that ignores ranges (200) sends the whole file on that one connection;
one that answers the first range past the file's end with that whole
range (XRootD 5.5) is asked again for the range cut to the size.
``RequireChecksumVerification: true``: once the file is whole, a HEAD
with ``Want-Digest`` asks the source's digest, compared with the part
file's before it is renamed (a source that offers none: not compared).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re

import aiohttp

from ....ftp.eblock import RangeSet
from ....http import copyreq, digest
from ....io import fileio
from ...ftp import partfile
from .copy import CopyFailed, Job, Settings4Copy
from .remote import Stripe

CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19}|\*)")
WANT = "adler32, md5;q=0.8, sha-256;q=0.5"  # the digests asked of a source (cheapest first)
WRITE_BATCH = 1 << 20  # bytes gathered before one pwrite


async def pull(job: Job, cfg: Settings4Copy) -> None:
    path = job.part
    if not partfile.claim(path):
        raise CopyFailed("another upload is writing this file")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        partfile.release(path)
        raise CopyFailed(f"the part file cannot be written: {exc.strerror}") from None
    try:
        await _fill(job, fd)
        if job.verify:
            await _verify(job, fd)
        os.replace(path, job.target.fs)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise CopyFailed(f"no space left on the device: the copy stopped after {job.moved} bytes; the part"
                             " file keeps what arrived") from None
        raise CopyFailed(f"the target cannot be written: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
        partfile.release(path)


async def _fill(job: Job, fd: int) -> None:
    first = job.stripes[0]
    held = RangeSet()
    step = copyreq.CHUNK
    resp = await _get(job, first, 0, step)
    try:
        if resp.status == 200:  # no ranges: the whole body on this connection
            job.total = resp.content_length
            end = await _body(job, first, resp, fd, 0, job.total)
            if job.total is None:
                job.total = end
            return
        total = _first_total(resp)
        job.total = total
        if _overstated(resp, total):  # XRootD 5.5: the range past the end is not cut to the file (RFC 9110 14.4)
            resp.close()  # (its body falls short of its Content-Length: the connection is unusable)
            resp = await _get(job, first, 0, min(step, total))
            if resp.status != 206 or _first_total(resp) != total or _overstated(resp, total):
                raise CopyFailed("the source's answer to the range 0- has no usable Content-Range")
        if total == 0:
            return
        free = os.statvfs(os.path.dirname(job.part))
        if total > free.f_bavail * free.f_frsize:
            raise OSError(errno.ENOSPC, f"the disk has no room for {total} bytes")
        await _body(job, first, resp, fd, 0, min(step, total))
        held.add(0, min(step, total))
    finally:
        resp.release()
    queue = copyreq.ranges(total, min(step, total))
    if not queue:
        return
    work = [asyncio.ensure_future(_worker(job, s, queue, fd)) for s in job.stripes]
    try:
        await asyncio.gather(*work)
    finally:
        for w in work:
            w.cancel()
        for w in work:
            with contextlib.suppress(BaseException):
                await w


async def _worker(job: Job, stripe: Stripe, queue: list[tuple[int, int]], fd: int) -> None:
    while queue:
        start, end = queue.pop(0)
        resp = await _get(job, stripe, start, end)
        try:
            if resp.status != 206:
                raise CopyFailed(f"the source answered {resp.status} {resp.reason} to the range {start}-{end - 1}")
            m = CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
            if not m or int(m.group(1)) != start or int(m.group(2)) != end - 1:
                raise CopyFailed(f"the source sent another range than {start}-{end - 1}")
            if m.group(3) != str(job.total):
                raise CopyFailed("the source file changed size during the copy")
            await _body(job, stripe, resp, fd, start, end - start)
        finally:
            resp.release()


async def _get(job: Job, stripe: Stripe, start: int, end: int) -> aiohttp.ClientResponse:
    headers = [*job.headers, ("Range", copyreq.range_header(start, end))]
    try:
        resp, job.remote = await stripe.send("GET", job.remote, headers, "source")
    except TimeoutError:
        raise CopyFailed(f"the source {job.remote.shown} did not answer in time") from None
    except aiohttp.ClientError as exc:
        raise CopyFailed(f"the source {job.remote.shown} cannot be reached: {_why(exc)}") from None
    if resp.status >= 300 and resp.status != 416:
        text = (await _small(resp)).strip()
        resp.release()
        raise CopyFailed(f"the source answered {resp.status} {resp.reason}" + (f": {text}" if text else ""))
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


async def _body(job: Job, stripe: Stripe, resp: aiohttp.ClientResponse, fd: int, at: int,
                length: int | None) -> int:
    """Write the response body at ``at``; the offset after it (short: CopyFailed)."""
    loop = asyncio.get_running_loop()
    want = None if length is None else at + length
    pending: list[bytes] = []
    size = 0
    stripe.begin()
    try:
        try:
            async for data in resp.content.iter_any():
                if want is not None and at + size + len(data) > want:
                    raise CopyFailed("the source sent more bytes than it announced")
                pending.append(data)
                size += len(data)
                stripe.moved_bytes(len(data))
                if size >= WRITE_BATCH:
                    at += await loop.run_in_executor(None, _pwrite_all, fd, b"".join(pending), at)
                    pending, size = [], 0
        except TimeoutError:  # (aiohttp's ServerTimeoutError is a ClientError too)
            raise CopyFailed(f"the source sent nothing for {stripe.session.timeout.sock_read:g} seconds"
                             f" (--data-timeout), after {job.moved} bytes") from None
        except aiohttp.ClientError as exc:
            raise CopyFailed(f"the source connection broke after {job.moved} bytes: {_why(exc)}") from None
        if pending:
            at += await loop.run_in_executor(None, _pwrite_all, fd, b"".join(pending), at)
    finally:
        stripe.end()
    if want is not None and at != want:
        raise CopyFailed(f"the source ended its body after {job.moved} bytes, short of the {job.total} announced")
    return at


def _pwrite_all(fd: int, data: bytes, at: int) -> int:
    view, done = memoryview(data), 0
    while done < len(data):
        done += os.pwrite(fd, view[done:], at + done)
    return done


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
    await asyncio.get_running_loop().run_in_executor(None, fileio.feed, fd, d.update, 0, job.total)
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
