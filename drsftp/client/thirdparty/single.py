"""`drsftp copy ftp://A/path ftp://B/path`: one file from server to server
(docs/THIRDPARTY.md).

Both sessions log in at once with their queries (A: SIZE, MDTM; B: SIZE of
the file and of drsftp serve's part file, for ``--continue``); the data
plane is extended block mode with ``-P N`` streams where both list
PARALLEL, else stream mode; the file runs on :class:`.sequence.CopyRun`.

- ``--continue``: in stream mode REST at the prefix B holds (its SIZE, or
  its part file's); in MODE E the ranges B reported holding (its ``111
  Range Marker`` replies, kept in a local record as a MODE E put keeps
  them: docs/PARALLEL.md, "Resume"), else its prefix.
- ``--verify``: A's and B's SHA-256 (HASH, else CKSM) compared.
- ``-P auto``: from the data path (drsftp/tuning/count/pathstreams.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import posixpath
from collections.abc import Callable

from ...ftp.eblock import RangeSet, marker_ranges
from ...ftp.partname import partial_name
from ...ftp.relay import Relay
from ...ftp.thirdparty import CopySpec, Side
from ...ftp.url import FTPLocation
from ...io import sockopt
from ...tuning.actuation import host_cap
from ...tuning.count.pathstreams import PathStreams
from ...tuning.count.streams import StreamsConfig
from ...tuning.wirekeys import RTT_US
from ..result import TransferResult
from ..session.control import FTPError, size_of
from ..streams.rangeplan import ResumeRecord, drop_record, load_record, save_record
from ..transfer import maxtime
from ..transfer.attempts import already_complete
from ..transfer.options import TransferOptions, mark_written, owned
from ..transfer.progress import ProgressView
from ..transfer.verify import server_sha256
from .pair import ServerPair, open_pair, url_of
from .sequence import CopyRun, RunOutcome

log = logging.getLogger("drsftp.client")
AUTO_MAX = 16  # -P auto's streams at most (as a get's: client/streams/parallel.py)


async def copy(src: FTPLocation, dst: FTPLocation, opts: TransferOptions, streams: int | None) -> TransferResult:
    """``streams``: -P N, or None for auto."""
    return await maxtime.within(opts, "copy", src.path, lambda o: _copy(src, dst, o, streams))


async def _copy(src: FTPLocation, dst: FTPLocation, opts: TransferOptions, streams: int | None) -> TransferResult:
    pair, (size_r, mdtm_r), (dsize_r, dpart_r) = await open_pair(
        src, dst, opts, [f"SIZE {src.path}", f"MDTM {src.path}"],
        [f"SIZE {dst.path}", f"SIZE {partial_name(dst.path)}"])
    try:
        size = size_of(size_r)
        mtime = mdtm_r.first.strip() if mdtm_r.code == 213 else None
        mode_e = pair.extended_block() and streams != 1
        if streams != 1 and not mode_e:
            log.info("copy -P: extended block mode needs PARALLEL on both servers: one stream (stream mode)")
        record = record_base(src, dst)
        held = RangeSet()
        if opts.resume or owned(opts, record):  # (a retry: only B's part file this run made, not the final name's)
            dest_size = size_of(dsize_r) if opts.resume or "DRS" not in pair.dest.features else None
            prefix = prefix_on_dest(pair, size, dest_size, size_of(dpart_r))
            held = held_on_dest(record, mode_e, size, mtime, prefix)
            if size is not None and held.total >= size and not held.missing(size):
                drop_record(record)
                r = already_complete("copy", src.path, size)
                r.update(source=url_of(src), destination=url_of(dst))
                return r
        elif mode_e:
            drop_record(record)  # a STOR without REST starts the destination's file over
        auto = None
        if streams is None and mode_e:
            if pair.drs(Side.SOURCE):
                auto = PathStreams(StreamsConfig(max_streams=AUTO_MAX), window_cap())
            else:
                log.info("-P auto: %s cannot change its streams during a transfer (no DRS): %d streams",
                         pair.label(Side.SOURCE), StreamsConfig().start)
        n = (auto.streams if auto is not None else streams or StreamsConfig().start) if mode_e else 1
        spec = CopySpec(src.path, dst.path, size, mode_e, n, tuple(held) if (mode_e or held.total) else ())
        return await run_one(pair, spec, opts, auto, record if mode_e else None, size, mtime, streams, own=record)
    finally:
        await pair.close()


async def run_one(pair: ServerPair, spec: CopySpec, opts: TransferOptions, auto: PathStreams | None,
                  record: str | None, size: int | None, mtime: str | None, streams: int | None,
                  on_run: Callable[[CopyRun | None], None] | None = None, own: str | None = None) -> TransferResult:
    """One file on ``pair``, its resume record kept (``record``: MODE E),
    verified (--verify), as a result; ``on_run(run)`` while it runs, then
    ``on_run(None)`` (a job's bar and fleet controller); ``own``: the name
    a retry continues it by once B holds part of it (options.owned)."""
    held = RangeSet(list(spec.held))
    view = ProgressView(posixpath.basename(spec.source_path), size, opts.progress)
    resumed = held.total

    def marker(text: str) -> None:
        ranges = marker_ranges(text, size)
        for a, b in ranges:
            held.add(a, b)
        if not ranges:
            return
        if record is not None and size is not None:
            save_held(record, size, mtime, held)

    run = CopyRun(pair, spec, auto=auto, idle_timeout=opts.idle_timeout, deadline=maxtime.lift(opts),
                  view=lambda done, rate, rtt, wnd: view.update(resumed + done, rate, rtt, wnd),
                  on_marker=marker if record is not None else None)
    if on_run is not None:
        on_run(run)
    try:
        out = await run.run()
    except BaseException as exc:
        if own is not None and resumable(exc, run, held):
            mark_written(opts, own)
        if record is not None and size is not None:
            if resumable(exc, run, held):
                save_held(record, size, mtime, held)  # also of nothing held: B's part file has holes
            else:
                drop_record(record)  # nothing a --continue could take up
        raise
    finally:
        view.close()
        if on_run is not None:
            on_run(None)
    if out.timed_out:
        if record is not None and size is not None:
            save_held(record, size, mtime, held)
    elif record is not None:
        drop_record(record)
    result = result_of(run, out, size, resumed, pair, streams)
    if opts.verify and not out.timed_out:
        result.sha256 = await verify_both(pair, spec.source_path, spec.dest_path)
    return result


def resumable(exc: BaseException, run: CopyRun, held: RangeSet) -> bool:
    """A failed or interrupted copy left B something a ``--continue`` can
    take up: the cause may pass (a lost connection, a 4yz, Ctrl-C; not a
    5yz refusal) and B holds ranges, or started the file (its STOR's 1yz)."""
    if isinstance(exc, FTPError) and not exc.transient:
        return False
    if held.total:
        return True
    pending = run.transfer.get(Side.DEST)
    first = pending.preliminary if pending is not None else None
    return (first is not None and first.done() and not first.cancelled() and first.exception() is None
            and first.result().preliminary)


def result_of(run: CopyRun, out: RunOutcome, size: int | None, resumed: int, pair: ServerPair,
              streams: int | None) -> TransferResult:
    """What the copy did, for --json and the result line: the servers'
    reports over time (``servers``) among the rest."""
    relay = run.relay
    rtts = [row[RTT_US] / 1000 for row in relay.series[Side.SOURCE] if row.get(RTT_US)] or \
           [row[RTT_US] / 1000 for row in relay.series[Side.DEST] if row.get(RTT_US)]
    replies = relay.replies(Side.SOURCE) + relay.replies(Side.DEST)
    r = TransferResult(direction="copy", path=run.spec.source_path, bytes=run.moved, seconds=out.seconds,
                       total_size=size, resumed_from=resumed, complete=not out.timed_out,
                       drs_peer=relay.relaying and replies > 0, drs_replies=replies,
                       server_last_report=relay.latest(Side.SOURCE), timeline=out.timeline)
    if rtts:
        r.update(rtt_min_ms=round(min(rtts), 3), rtt_avg_ms=round(sum(rtts) / len(rtts), 3),
                 rtt_max_ms=round(max(rtts), 3))
    r.update(source=url_of(pair.locs[Side.SOURCE]), destination=url_of(pair.locs[Side.DEST]),
             dest_path=run.spec.dest_path, mode="E" if run.spec.mode_e else "S", streams=run.streams,
             parallel="auto" if streams is None else streams, passive=run.flow.passive_side.value,
             cached=run.spec.cached, relayed=relayed(relay), note=relay_note(relay, pair),
             servers=relay.record(), stream_changes=out.changes)
    if out.streams_start is not None:
        r.update(streams_start=out.streams_start, data_rtt_first_ms=_ms(run.auto.first_rtt if run.auto else None))
    return r


def relayed(relay: Relay) -> dict[str, int]:
    """DRS commands that carried the other server's numbers, per server."""
    return {side.value: relay.sent_count[side] for side in Side}


def relay_note(relay: Relay, pair: ServerPair) -> str:
    if relay.relaying and relay.replies(Side.SOURCE) and relay.replies(Side.DEST):
        return "DRS relayed between the servers"
    missing = [side.value for side in Side if not relay.exchanges[side].enabled]
    return f"no DRS relay ({' and '.join(missing)} without DRS)" if missing else "no DRS report"


def _ms(seconds: float | None) -> float | None:
    return round(seconds * 1000, 3) if seconds else None


def window_cap() -> int | None:
    """The per-socket window this host lets setsockopt set: the servers'
    caps are not reported, so the first streams are sized as if their
    hosts were configured as this one (docs/decisions/0020-drs-on-the-data-path.md)."""
    limits = sockopt.read_host_limits()
    caps = [host_cap(limits, False, receiving) for receiving in (True, False)]
    known = [c for c in caps if c]
    return min(known) if len(known) == len(caps) else None


async def verify_both(pair: ServerPair, src_path: str, dst_path: str) -> str:
    """--verify: A's and B's SHA-256 of the file, equal; the digest."""
    a, b = await asyncio.gather(server_sha256(pair.source, src_path, "--verify"),
                                server_sha256(pair.dest, dst_path, "--verify"))
    for side, digest in ((Side.SOURCE, a), (Side.DEST, b)):
        if digest is None:
            raise FTPError(f"--verify: {pair.label(side)} offers neither HASH nor CKSM SHA256;"
                           " the copy was not verified", transient=False)
    if a != b:
        raise FTPError(f"verification failed: SHA-256 {str(a)[:16]}... on the source, {str(b)[:16]}... on the"
                       " destination", transient=False)
    assert a is not None  # (checked above)
    return a


def prefix_on_dest(pair: ServerPair, size: int | None, dest_size: int | None, part_size: int | None) -> int:
    """The prefix B holds of an interrupted stream-mode copy: drsftp
    serve's part file's SIZE where it has one (its REST + STOR continues
    that file, not the one of the final name, which may be an older file
    the copy replaces: docs/SECURITY.md), else its file's SIZE."""
    prefix = dest_size or 0
    if "DRS" in pair.dest.features and part_size:
        prefix = part_size
    if size is not None and prefix > size:
        raise FTPError(f"the destination's file ({prefix} B) is larger than the source's ({size} B)",
                       transient=False)
    return prefix


def held_on_dest(record: str, mode_e: bool, size: int | None, mtime: str | None, prefix: int) -> RangeSet:
    """What B holds of the file: in MODE E the ranges of the record (B's
    range markers) when it describes this source, else ``prefix``.  A
    MODE E copy that stopped short always leaves a record: its part file
    has holes, and its size is no prefix."""
    if mode_e and size is not None:
        rec = load_record(record)
        if rec is not None:
            if rec.matches(size, mtime):
                return rec.held
            log.warning("the source changed since the interrupted copy: starting over")
            return RangeSet()
    return RangeSet([(0, prefix)] if prefix else [])


def record_base(src: FTPLocation, dst: FTPLocation) -> str:
    """Where this (source, destination) pair's MODE E resume record lives."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    key = "\0".join(str(x) for loc in (src, dst) for x in (loc.host, loc.port, loc.user, loc.path))
    return os.path.join(state, "drsftp", "copies", hashlib.sha256(key.encode()).hexdigest()[:32])


def save_held(base: str, size: int, mtime: str | None, held: RangeSet) -> None:
    try:
        os.makedirs(os.path.dirname(base), exist_ok=True)
        save_record(base, ResumeRecord(size, mtime, held))
    except OSError as exc:  # a resume aid only
        log.warning("cannot write the copy's resume record %s: %s", base, exc.strerror or exc)
