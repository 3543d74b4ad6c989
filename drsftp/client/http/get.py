"""`drsftp get https://... DEST` (docs/HTTP.md, "Client").

A ``HEAD`` gives the size, whether ranges are served and the validator
(ETag, else Last-Modified); then ranged GETs on N connections
(:mod:`.fetch`) fill ``DEST.part`` (ftp/partname.py), which is renamed
over DEST when whole.  Beside the part file the FTP client's resume
record (``DEST.part.ranges``: streams/rangeplan.py) says which ranges it
holds of which version, so ``--continue`` fetches only the gaps, whichever
protocol wrote them.  A server without ranges is read in one plain GET
(and ``--continue`` then starts over).
"""

from __future__ import annotations

import logging
import os

from ...ftp.eblock import RangeSet
from ...ftp.partname import download_part
from ...http.url import HTTPLocation
from ...tuning import Role, check_spec
from ..result import TransferResult
from ..session.control import os_reason
from ..streams.rangeplan import RangePlan, ResumeRecord, drop_record, load_record, save_record
from ..transfer import maxtime
from ..transfer.getput import already_complete, make_parents
from ..transfer.options import TransferOptions
from ..transfer.progress import ProgressView
from . import auto
from .fetch import Download, WholeDownload
from .monitor import watch
from .pool import Pool
from .verify import verify

log = logging.getLogger("drsftp.client")


async def get(loc: HTTPLocation, dest: str, opts: TransferOptions, streams: int | None) -> TransferResult:
    """``streams``: connections (-P N); None: -P auto."""
    return await maxtime.within(opts, "get", loc.path, lambda o: _get(loc, dest, o, streams))


async def _get(loc: HTTPLocation, dest: str, opts: TransferOptions, streams: int | None) -> TransferResult:
    check_spec(opts.tuning)
    part = download_part(dest)
    async with Pool(loc, opts, Role.RECEIVER, streams or auto.AUTO_MAX) as pool:
        async with pool.request("HEAD", loc.path, ok=(200, 204)) as (resp, first):
            size = resp.content_length
            ranged = "bytes" in resp.headers.get("Accept-Ranges", "").lower() and size is not None
            etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
        validator = etag or modified
        held = RangeSet()
        if opts.resume and size is not None:
            if not os.path.exists(part) and os.path.exists(dest) and os.path.getsize(dest) == size:
                return already_complete("get", loc.path, size)
            held = _held(part, size, validator) if ranged else held
        make_parents(dest)
        fd = _open_part(part, fresh=not held.total)
        try:
            driver: Download | WholeDownload
            steering = None
            if ranged and size is not None:
                n = streams or auto.first_connections(first, opts)
                driver = Download(pool, loc.path, fd, RangePlan(size, held), n,
                                  etag if etag and not etag.startswith("W/") else None)
                steering = auto.steering(driver, n) if streams is None else None
            else:
                if opts.resume and os.path.exists(part):
                    log.warning("%s does not serve byte ranges: --continue starts over", loc.shown)
                driver = WholeDownload(pool, loc.path, fd, size)

            def save() -> None:
                if not isinstance(driver, Download) or size is None:
                    return
                try:
                    save_record(part, ResumeRecord(size, validator, driver.held))
                except OSError as exc:  # a resume aid: the transfer's own error, if any, is the one to tell
                    log.info("cannot write the resume record of %s: %s", part, os_reason(exc))

            save()
            view = ProgressView(os.path.basename(loc.path), size, opts.progress)
            try:
                out = await watch(driver, opts, view, held.total, save, steering)
            finally:
                view.close()
                save()
            total = size if size is not None else driver.moved
            if not out.timed_out:
                os.ftruncate(fd, total)
        finally:
            os.close(fd)
        result = TransferResult(direction="get", path=loc.path, bytes=driver.moved, seconds=out.seconds,
                                total_size=total, resumed_from=held.total, complete=not out.timed_out,
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


def _held(part: str, size: int, validator: str | None) -> RangeSet:
    """What an earlier get left in ``part``: its record's ranges if the
    record describes this version of the file; a part without a record
    (a single-stream FTP get's): its prefix."""
    if not os.path.exists(part):
        return RangeSet()
    record = load_record(part)
    if record is None:
        return RangeSet([(0, min(os.path.getsize(part), size))])
    if not record.matches(size, validator):
        log.warning("%s is from another version of the file (size or validator differs): starting over", part)
        return RangeSet()
    have = os.path.getsize(part)
    return RangeSet([(a, min(b, have)) for a, b in record.held if a < have])


def _open_part(part: str, fresh: bool) -> int:
    """The part file for writes at offsets; a fresh one replaces any old file."""
    if fresh:
        drop_record(part)
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
    return os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
