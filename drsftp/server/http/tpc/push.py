"""A COPY's push (``Destination:``): the request's file PUT to the remote,
on one connection (as XRootD pushes), its socket right-sized as a sender.
``Overwrite: F`` asks the destination first (HEAD: an existing file is a
failure); ``RequireChecksumVerification: true`` asks its digest after the
PUT (HEAD with ``Want-Digest``) and compares it with this file's."""

from __future__ import annotations

import asyncio
import contextlib
import os

import aiohttp

from ....http import digest
from ....io import fileio
from .copy import CopyFailed, Job, Settings4Copy
from .pull import WANT, _small, _why

CHUNK = 1 << 20  # bytes read and sent at once


async def push(job: Job, cfg: Settings4Copy) -> None:
    try:
        fd = os.open(job.target.fs, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise CopyFailed(f"the file cannot be read: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        job.total = size
        stripe = job.stripes[0]
        if not job.overwrite:
            resp = await _send(job, "HEAD", [])
            resp.release()
            if resp.status < 300:
                raise CopyFailed("the destination exists and Overwrite is F")
        loop = asyncio.get_running_loop()

        async def body():
            stripe.moved = 0
            stripe.begin()
            try:
                at = 0
                while at < size:
                    data = await loop.run_in_executor(None, os.pread, fd, min(CHUNK, size - at), at)
                    if not data:
                        raise CopyFailed("the file shrank while it was sent")
                    at += len(data)
                    stripe.moved_bytes(len(data))
                    yield data
            finally:
                stripe.end()

        resp = await _watched(job, _send(job, "PUT", [("Content-Length", str(size))], body), size)
        text = (await _small(resp)).strip() if resp.status >= 300 else ""
        resp.release()
        if resp.status >= 300:
            raise CopyFailed(f"the destination answered {resp.status} {resp.reason}" + (f": {text}" if text else ""))
        if stripe.moved != size:
            raise CopyFailed(f"the destination answered before the whole file was sent ({stripe.moved} of {size})")
        if job.verify:
            await _verify(job, fd, size)
    finally:
        os.close(fd)


async def _watched(job: Job, send, size: int) -> aiohttp.ClientResponse:
    """``send`` while the body goes out: failed once it moves nothing for
    the data timeout (aiohttp bounds reads only; a destination that stops
    reading would hold the write for ever)."""
    stripe = job.stripes[0]
    timeout = stripe.timeout
    task = asyncio.ensure_future(send)
    seen = -1
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if done:
                return task.result()
            if stripe.moved == seen and stripe.moved < size:
                raise CopyFailed(f"the destination took nothing for {timeout:g} seconds (--data-timeout),"
                                 f" after {stripe.moved} bytes")
            seen = stripe.moved
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _send(job: Job, method: str, extra: list[tuple[str, str]], body=None) -> aiohttp.ClientResponse:
    try:
        resp, job.remote = await job.stripes[0].send(method, job.remote, [*job.headers, *extra], "destination",
                                                     body)
    except TimeoutError:
        raise CopyFailed(f"the destination {job.remote.shown} made no progress for"
                         f" {job.stripes[0].timeout:g} seconds (--data-timeout)") from None
    except aiohttp.ClientError as exc:
        raise CopyFailed(f"the destination {job.remote.shown} broke off after {job.moved} bytes:"
                         f" {_why(exc)}") from None
    return resp


async def _verify(job: Job, fd: int, size: int) -> None:
    resp = await _send(job, "HEAD", [("Want-Digest", WANT)])
    resp.release()
    offered = digest.parse_digest(resp.headers.get("Digest", ""))
    ours = [a for a in digest.ALGORITHMS if a in offered]
    if not ours:
        return
    d = digest.Digester(ours[0])
    await asyncio.get_running_loop().run_in_executor(None, fileio.feed, fd, d.update, 0, size)
    if d.value() != offered[ours[0]]:
        raise CopyFailed(f"checksum mismatch: the destination's {ours[0]} is {offered[ours[0]]}, this file's"
                         f" {d.value()}")
