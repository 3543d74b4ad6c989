"""`drsftp get/put -P N|auto`: one file over N data streams.

Chooses the data plane from the server's FEAT (docs/PARALLEL.md): extended
block mode where it lists PARALLEL (:mod:`.modee.get`, :mod:`.modee.put`), else N stream-mode
sessions on REST ranges for a get (:mod:`.ranged`) and one stream for a
put (stream-mode FTP has no safe parallel upload: a STOR at an offset
truncates or appends, depending on the server).  Over TLS (PROT P) the
MODE E streams run TLS each (RFC 4217; :mod:`.modee.base`), and every ranged
session and its data connections run in TLS, resuming their control
connection's session (RFC 4217 sec. 10).

A get writes ``DEST.part`` at the offsets it receives and keeps beside it
``DEST.part.ranges`` (:mod:`.rangeplan`): the remote size and MDTM and the
ranges held, rewritten every second and when the transfer stops;
``--continue`` fetches only the gaps.  The monitor (:mod:`.monitor`, the
HTTP client's too) sums progress, enforces --max-time and, under ``-P
auto``, applies the stream controller's decisions
(:mod:`drsftp.tuning.count.streams`).
"""

from __future__ import annotations

import logging
import os

from ...ftp.eblock import RangeSet
from ...ftp.partname import download_part
from ...ftp.replies import Reply
from ...ftp.url import FTPLocation
from ...io import sockopt
from ...tuning import DRSTuning, Role, check_spec, create
from ...tuning.actuation import host_cap
from ...tuning.count.streams import StreamController, StreamsConfig, first_streams
from ...tuning.count.window import WindowedStreams, streams_controller
from ..session.control import ControlConnection, FTPError, os_reason, size_of
from ..session.login import open_logged_in, open_session, warn_without_drs
from ..transfer import getput as transfer
from ..transfer import maxtime, putresume
from ..transfer.attempts import already_complete, make_parents
from ..transfer.dataconn import LocalWriteError
from ..transfer.getput import TransferResult
from ..transfer.options import TransferOptions, mark_written, owned, remote_key
from ..transfer.progress import ProgressView
from ..transfer.verify import verify
from .autosteer import AutoSteering
from .modee.get import ModeEGet
from .modee.put import ModeEPut
from .monitor import Outcome, watch
from .ranged import RangedGet
from .rangeplan import RangePlan, drop_record, held_in, open_part, record_saver

log = logging.getLogger("drsftp.client")
AUTO_MAX = 16  # -P auto stays at or below this many streams


def extended_block(ctl: ControlConnection) -> bool:
    """Extended block mode: the server lists PARALLEL (under PROT P its
    streams run TLS: the module docstring)."""
    return "PARALLEL" in ctl.features


def auto_start(ctl: ControlConnection, opts: TransferOptions) -> int:
    """-P auto's first streams on this path: from the control connection's
    RTT and the per-socket window this host lets setsockopt set
    (streams.first_streams)."""
    us = sockopt.tcp_info(ctl.writer.get_extra_info("socket")).get("rtt")
    rtt = us / 1e6 if us else None
    return first_streams(rtt, _window_cap(opts), StreamsConfig(max_streams=AUTO_MAX))


def _window_cap(opts: TransferOptions) -> int | None:
    """The per-socket window setsockopt can set here, both ways (None: no cap)."""
    limits = sockopt.read_host_limits()
    caps = [host_cap(limits, opts.force_buffers, receiving) for receiving in (True, False)]
    return min((c for c in caps if c), default=None) if all(caps) else None


def _controller(streams: int | None, ctl: ControlConnection,
                opts: TransferOptions) -> StreamController | WindowedStreams | None:
    """-P auto's controller; under DRS one window for all the streams, each
    stream's capped (tuning/count/window.py; the cap: the host's, or DRS's
    own with FORCE)."""
    if streams is not None:
        return None
    tuning, cap = create(opts.tuning, Role.RECEIVER), None
    if isinstance(tuning, DRSTuning):
        cap = min(c for c in (_window_cap(opts), tuning.config.cap) if c)
    return streams_controller(StreamsConfig(start=auto_start(ctl, opts), max_streams=AUTO_MAX, window_cap=cap))


async def get(loc: FTPLocation, dest: str, opts: TransferOptions, streams: int | None,
              on_driver=None) -> TransferResult:
    """``on_driver(driver)``: the running transfer (its ``moved``,
    ``samples()``, ``add_stream()``), for a dataset job's bar and its
    fleet controller, which then chooses the streams (``streams`` given)."""
    return await maxtime.within(opts, "get", loc.path, lambda o: _get(loc, dest, o, streams, on_driver))


async def _get(loc: FTPLocation, dest: str, opts: TransferOptions, streams: int | None, on_driver) -> TransferResult:
    check_spec(opts.tuning)
    part = download_part(dest)
    # SIZE and MDTM go out with the login (session.open_session)
    ctl, (size_reply, mdtm_reply) = await open_session(loc, opts, [f"SIZE {loc.path}", f"MDTM {loc.path}"])
    try:
        warn_without_drs(ctl, opts)
        size = size_of(size_reply)
        if size is None:
            if size_reply.code != 550:  # (550: no such file, which the RETR will say)
                log.warning("the server gives no SIZE for %s: one stream", loc.path)
            await ctl.close()
            return await transfer.get(loc, dest, opts)
        mtime = _mdtm(ctl, mdtm_reply)
        held = RangeSet()
        if opts.resume and not os.path.exists(part) and os.path.exists(dest) and os.path.getsize(dest) == size:
            return already_complete("get", loc.path, size)  # (--continue only: a retry's DEST is an older file)
        if opts.resume or owned(opts, part):
            held = held_in(part, size, mtime, "MDTM")
        try:
            make_parents(dest)
            fd = open_part(part, fresh=not held.total)
            mark_written(opts, part)
        except OSError as exc:
            raise FTPError(f"cannot write {dest}: {os_reason(exc)}", transient=False) from exc
        try:
            controller = _controller(streams, ctl, opts)
            n = controller.streams if controller else streams
            assert n is not None  # a controller exactly when streams is None (auto)
            if streams is None and extended_block(ctl) and "DRS" not in ctl.features:
                # the sender (server) chooses its streams at RETR: only a
                # drsftp server takes DRS streams=N while it runs
                log.info("-P auto: the server cannot change its streams during a get: %d streams", n)
                controller = None
            driver: ModeEGet | RangedGet
            if extended_block(ctl):
                driver = ModeEGet(ctl, opts, n, loc.path, fd, size, held)
                mode = "E"
            else:
                driver = RangedGet(loc, ctl, fd, RangePlan(size, held), opts, n, controller)
                mode = "ranged"

            if on_driver is not None:
                on_driver(driver)

            save = record_saver(part, size, mtime, lambda: driver.held)
            save()
            view = ProgressView(os.path.basename(loc.path), size, opts.progress)
            try:
                out = await watch(driver, opts, view, held.total, save, _steering(controller, driver))
            except LocalWriteError as exc:  # a block's write (a full disk), not the network's
                raise exc.naming(dest) from exc
            finally:
                view.close()
                save()
            if out.timed_out:
                return _result("get", loc.path, driver, size, held.total, out, mode, streams)
            missing = driver.held.missing(size)
            if missing:
                raise FTPError(f"short transfer: {size - sum(b - a for a, b in missing)} of {size} bytes"
                               " (--continue resumes)")
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        result = _result("get", loc.path, driver, size, held.total, out, mode, streams)
        if opts.verify:
            ctl = await _usable(ctl, loc, opts)
            result.sha256 = await verify(ctl, loc.path, part)
        os.replace(part, dest)
        drop_record(part)
        return result
    finally:
        await ctl.close()


async def put(src: str, loc: FTPLocation, opts: TransferOptions, streams: int | None,
              on_driver=None) -> TransferResult:
    """``on_driver``: as for get."""
    return await maxtime.within(opts, "put", loc.path, lambda o: _put(src, loc, o, streams, on_driver))


async def _put(src: str, loc: FTPLocation, opts: TransferOptions, streams: int | None, on_driver) -> TransferResult:
    check_spec(opts.tuning)
    f, total, ctl = await transfer.open_put(src, loc, opts)
    with f:
        try:
            if not extended_block(ctl):
                log.info("put -P: the server has no extended block mode (PARALLEL); stream-mode FTP has no"
                         " safe parallel upload: one stream")
                await ctl.close()
                return await transfer.put(src, loc, opts)
            record, mtime = putresume.record_base(src, loc), putresume.source_mtime(f.fileno())
            key = remote_key(loc.host, loc.port, loc.path)
            own = owned(opts, key)
            held = putresume.held_on_server(record, total, mtime) if opts.resume or own else RangeSet()
            if held is None:  # no record: an interrupted stream-mode put's prefix, on the streams asked for
                prefix = await transfer.uploaded_prefix(ctl, loc.path, src, total, final=opts.resume)
                if prefix == total:
                    return already_complete("put", loc.path, total)
                held = RangeSet([(0, prefix)] if prefix else [])
            if not held.total:
                putresume.drop(record)  # a STOR without REST starts the server's file over
            controller = _controller(streams, ctl, opts)
            n = controller.streams if controller else streams
            assert n is not None  # a controller exactly when streams is None (auto)

            def on_held(h: RangeSet) -> None:  # the server holds data of this run's: a retry's to continue
                mark_written(opts, key)
                putresume.save(record, total, mtime, h)

            driver = ModeEPut(ctl, opts, n, loc.path, f, total, held, on_held=on_held)
            if on_driver is not None:
                on_driver(driver)
            view = ProgressView(os.path.basename(src), total, opts.progress)
            try:
                out = await watch(driver, opts, view, held.total, None, _steering(controller, driver))
            except BaseException:
                putresume.save(record, total, mtime, driver.server_held)
                raise
            finally:
                view.close()
            if out.timed_out:
                # what the server reported holding, also none: its part file has
                # holes, so a later --continue must not take its size as a prefix
                putresume.save(record, total, mtime, driver.server_held)
            else:
                putresume.drop(record)
            result = _result("put", loc.path, driver, total, held.total, out, "E", streams)
            if opts.verify and not out.timed_out:
                ctl = await _usable(ctl, loc, opts)
                result.sha256 = await verify(ctl, loc.path, src)
            return result
        finally:
            await ctl.close()


def _mdtm(ctl: ControlConnection, reply: Reply) -> str | None:
    """The remote modification time (RFC 3659 3), to tell a changed file;
    taken only from a server that lists MDTM in FEAT."""
    if "MDTM" not in ctl.features:
        return None
    return reply.first.strip() if reply.code == 213 else None


async def _usable(ctl: ControlConnection, loc: FTPLocation, opts: TransferOptions) -> ControlConnection:
    """The session for the checks after a transfer (a new one if the
    transfer's had to be dropped)."""
    if not ctl.lost:
        return ctl
    return await open_logged_in(loc, opts)


def _steering(controller: StreamController | WindowedStreams | None, driver) -> AutoSteering | None:
    return AutoSteering(controller, driver) if controller is not None else None


def _result(direction: str, path: str, driver, total: int, resumed: int, out: Outcome, mode: str,
            streams: int | None) -> TransferResult:
    summary = driver.summary()
    summary.update({"mode": mode, "parallel": "auto" if streams is None else streams,
                    "streams": len(summary["per_stream"]), "stream_changes": out.changes})
    if out.start is not None:
        summary["streams_start"] = out.start
    r = TransferResult(
        direction=direction, path=path, bytes=driver.moved, total_size=total, resumed_from=resumed,
        seconds=out.seconds, drs_peer=driver.drs_replies > 0, drs_replies=driver.drs_replies,
        server_last_report=driver.server_last, timeline=out.timeline, complete=not out.timed_out)
    r.update(summary)
    return r
