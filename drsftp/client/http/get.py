"""`drsftp get https://... DEST` (docs/HTTP.md, "Client").

A ``HEAD`` gives the size, whether ranges are served and the validator
(ETag, else Last-Modified) -- a tree's file skips it: its listing gave
the size and time (the first range then goes alone, as to a server that
did not announce ranges: :mod:`.fetch`); then ranged GETs on N connections
(:mod:`.fetch`, opened while the HEAD is answered: :func:`_head`) fill
``DEST.part`` (ftp/partname.py), which is renamed
over DEST when whole.  Beside the part file the FTP client's resume
record (``DEST.part.ranges``: streams/rangeplan.py) says which ranges it
holds of which version, so ``--continue`` fetches only the gaps, whichever
protocol wrote them.  A server without ranges (``Accept-Ranges: none``,
or a ``200`` to the first range where it said nothing: :mod:`.fetch`) is
read in one plain GET (and ``--continue`` then starts over).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os

from ...ftp.eblock import RangeSet
from ...ftp.partname import download_part
from ...http.url import HTTPLocation
from ...io.handshake import wait_rtt
from ...tuning import Role
from ..result import TransferResult
from ..streams.monitor import watch
from ..streams.rangeplan import RangePlan, drop_record, held_in, open_part, record_saver
from ..transfer.attempts import already_complete, make_parents
from ..transfer.options import TransferOptions
from ..transfer.progress import ProgressView
from . import auto
from .errors import HTTPError
from .fetch import Download, WholeDownload
from .pool import Pool, on_pool
from .preconnect import Early
from .verify import verify

log = logging.getLogger("drsftp.client")


async def get(loc: HTTPLocation, dest: str, opts: TransferOptions, streams: int | None,
              early: Early | None = None) -> TransferResult:
    """``streams``: connections (-P N); None: -P auto.  ``early``: the
    first connection, begun by the command line (preconnect.py)."""
    return await on_pool("get", loc, opts, Role.RECEIVER, auto.pool_size(streams),
                         lambda pool, o: get_with(pool, loc, dest, o, streams), early)


async def get_with(pool: Pool, loc: HTTPLocation, dest: str, opts: TransferOptions,
                   streams: int | None, listed: tuple[int, float | None] | None = None) -> TransferResult:
    """One file's get on ``pool``'s connections (a tree's files share them).
    ``listed``: the size and mtime a listing gave (no HEAD then)."""
    part = download_part(dest)
    size: int | None
    download = Download(pool, loc.path, streams or 1)
    if listed is not None:  # (a 200 or 206 of another length is an error all the same: .fetch)
        size, accept, etag = listed[0], "", None
        modified = None if listed[1] is None else email.utils.formatdate(listed[1], usegmt=True)
        download.wanted = streams or auto.first_connections(None, opts)
    else:
        size, accept, etag, modified = await _head(pool, loc, opts, streams, download)
    # unannounced ranges are tried (RFC 9110 sec. 14.3), unless refused ("none")
    ranged = size is not None and ("bytes" in accept or (size > 0 and "none" not in accept))
    validator = etag or modified
    held = RangeSet()
    try:  # (an error here ends the connections opened early: _head)
        if opts.resume and size is not None:
            if not os.path.exists(part) and os.path.exists(dest) and os.path.getsize(dest) == size:
                await download.abandon()
                return already_complete("get", loc.path, size)
            held = held_in(part, size, validator, "validator") if ranged else held
        if not ranged:
            await download.abandon()
        make_parents(dest)
        fd = open_part(part, fresh=not held.total)
    except BaseException:
        await download.abandon()
        raise
    try:
        driver: Download | WholeDownload
        steering, save = None, None
        if ranged and size is not None:
            driver = download
            download.begin(fd, RangePlan(size, held), etag if etag and not etag.startswith("W/") else None,
                           probe="bytes" not in accept)
            steering = auto.steering(driver, download.wanted) if streams is None else None
            save = record_saver(part, size, validator, lambda: download.held)
            save()
        else:
            if opts.resume and os.path.exists(part):
                log.warning("%s does not serve byte ranges: --continue starts over", loc.shown)
            driver = WholeDownload(pool, loc.path, fd, size)

        view = ProgressView(os.path.basename(loc.path), size, opts.progress)
        try:
            out = await watch(driver, opts, view, held.total, save, steering)
        finally:
            view.close()
            if save is not None:
                save()
        total = size if size is not None else driver.moved
        if not out.timed_out and isinstance(driver, Download) and driver.plan.missing:
            raise HTTPError(f"{loc.shown}: short transfer: {driver.plan.missing} of {total} bytes missing"
                            " (--continue resumes)")
        if not out.timed_out:
            os.ftruncate(fd, total)
    finally:
        os.close(fd)
    result = TransferResult(direction="get", path=loc.path, bytes=driver.moved, seconds=out.seconds,
                            total_size=total, resumed_from=driver.resumed, complete=not out.timed_out,
                            timeline=out.timeline)
    result.update(pool.summary(), mode="http", parallel="auto" if streams is None else streams,
                  streams=len(getattr(driver, "slots", {})) or 1, stream_changes=out.changes,
                  requests=getattr(driver, "requests", 1))
    if out.timed_out:
        return result
    if opts.verify:
        result.update(await verify(pool, loc.path, part))
    os.replace(part, dest)
    drop_record(part)
    return result


async def _head(pool: Pool, loc: HTTPLocation, opts: TransferOptions, streams: int | None,
                download: Download) -> tuple[int | None, str, str | None, str | None]:
    """The ``HEAD``'s size, Accept-Ranges, ETag and Last-Modified.  While it
    is answered the download's other connections open (their TCP and TLS
    handshakes then cost the transfer no round trip: .fetch asks their
    ranges once connected): -P N's, or -P auto's first count once the
    first connection's TCP handshake gave its RTT."""
    head = asyncio.ensure_future(_ask_head(pool, loc))
    try:
        if streams is None:
            # (the HEAD's answer ends the wait too)
            download.wanted = auto.first_connections(await wait_rtt(pool.handshake_rtt, head.done), opts)
        download.open_early(download.wanted - 1)
        return await head
    except BaseException:
        await download.abandon()
        raise
    finally:
        head.cancel()
        await asyncio.gather(head, return_exceptions=True)


async def _ask_head(pool: Pool, loc: HTTPLocation) -> tuple[int | None, str, str | None, str | None]:
    async with pool.request("HEAD", loc.path, ok=(200, 204)) as (resp, _):
        return (resp.content_length, resp.headers.get("Accept-Ranges", "").lower(),
                resp.headers.get("ETag"), resp.headers.get("Last-Modified"))
