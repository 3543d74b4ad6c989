"""A dataset job's worker on a cached extended-block session
(drsftp.client.trees.cached.get, cached.put): it keeps files requested ahead on
its session (ahead()) and records each as it completes, in order; a big
file runs on sessions of its own (docs/DATASETS.md, "Cached data
channels", "Sessions x streams: one controller")."""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import replace

from ....ftp.listing import format_time_val
from ....tuning.count.streams import StreamsConfig
from ...session.control import FTPError
from ...streams import parallel
from ..job.result import FileOutcome
from ..job.sessions import ERRORS, broken, check_cancelled
from ..job.treejob import Item, TreeJob, same_digest
from ..remote import RemoteSession
from .get import CachedGets, FileGet
from .put import CachedPuts, FilePut

BIG_FILE = 64 << 20  # bytes: a file this big in a job runs -P auto on sessions of its own
# files a session keeps requested: the server holds up to 64 commands, and a
# put's file costs three (ALLO, STOR, then MFMT)
MIN_AHEAD, MAX_AHEAD = 2, {"get": 32, "put": 16}
# bytes a session may keep requested whatever its rate: small files cost the
# ends CPU per file, not bandwidth, and a queue this deep keeps the server
# busy while the client handles the last replies (a loopback or LAN RTT is
# shorter than either end's time per file)
AHEAD_FLOOR = 256 << 10
# files a session's full queue (MAX_AHEAD) drops by before more are asked:
# their commands (and a put's MFMTs) go out in one write, which both ends
# read at once, not a write and a read per file (docs/decisions/0040-small-files-batched-per-session.md)
REFILL = {"get": 8, "put": 4}


def ahead(job: TreeJob, session: CachedGets | CachedPuts, inflight: deque, direction: str) -> bool:
    """Whether to request one more file: while the files on the wire hold
    less than two round trips of the session's rate, so the next file's
    command is at the server before the current one ends (a 64 KiB file
    takes a fraction of an RTT: two on the wire left most of each RTT idle),
    or less than AHEAD_FLOOR bytes whatever the rate (small files)."""
    if not job.jopts.pipeline:
        return not inflight
    if len(inflight) < MIN_AHEAD:
        return True
    if len(inflight) >= MAX_AHEAD[direction]:
        return False
    if getattr(inflight, "listed", AHEAD_FLOOR) < AHEAD_FLOOR:
        return True  # (at most that many bytes left: no pass over the files)
    left = 0
    for _, f in inflight:
        if f.size is not None and (todo := f.size - f.bytes - getattr(f, "offset", 0)) > 0:
            left += todo
    if left < AHEAD_FLOOR:
        return True
    rtt = job.rtt or 0.1
    return left < 2 * session.rate(2 * rtt) * rtt  # (the rate now: the last two RTTs' in a slow start)


class Inflight(deque):
    """A session's files on the wire, oldest first, as (item, file);
    ``listed``: the bytes they still wanted when requested, at least those
    still to come (ahead() reads it rather than summing them each time)."""

    listed = 0

    def append(self, entry) -> None:
        super().append(entry)
        self.listed += _wanted(entry[1])

    def popleft(self):
        entry = super().popleft()
        self.listed -= _wanted(entry[1])
        return entry


def _wanted(f: FileGet | FilePut) -> int:
    return max(0, (f.size or 0) - getattr(f, "offset", 0))


def big_file(job: TreeJob, item: Item) -> bool:
    """A file worth streams of its own beside the small ones' sessions."""
    return not item.check and (item.t.size or 0) >= BIG_FILE and job.jopts.streams < StreamsConfig().start


async def big_get(job: TreeJob, item: Item, sess: RemoteSession) -> None:
    """One big file as ``get -P N`` does it (drsftp.client.streams.parallel), on
    sessions of its own, its streams chosen by the job's fleet controller
    beside the small files' sessions (docs/DATASETS.md, "Sessions x streams")."""
    paths = _paths(job, item)
    if paths is None:
        return
    remote, local = paths
    # what an interrupted copy left: its ranges record (parallel.get's), else
    # the .part's prefix; under --sync only a .part, never a DEST of the same
    # size (parallel.get's "already complete"): the plan found it out of date
    resume = item.t.resume_from > 0 or (job.jopts.resume and not job.jopts.sync)
    opts = replace(job.topts, resume=resume)
    res = await _big(job, item, sess, lambda n, on_driver: parallel.get(
        replace(job.loc, path=remote), local, opts, n, on_driver=on_driver))
    if res is None:
        return
    if item.t.mtime is not None and res.total_size == item.t.size:
        os.utime(local, (item.t.mtime, item.t.mtime))
    job.finished(item, FileOutcome(local, "ok", res))


def _paths(job: TreeJob, item: Item) -> tuple[str, str] | None:
    """``item``'s (remote, local), or None once its error is reported."""
    try:
        return job.paths(item)
    except ERRORS as exc:
        job.retry_or_fail(item, exc)
        return None


async def _big(job: TreeJob, item: Item, sess: RemoteSession, transfer):
    """``transfer(streams, on_driver)`` for a big file, its streams the job's
    fleet controller's (job.apply), starting from what -P auto would start
    with on the worker's session's path; None if it failed (retried or
    recorded)."""
    try:
        first = parallel.auto_start(sess.ctl, job.topts)
        res = await transfer(job.big_started(item, first), lambda d: job.big_running(item, d))
    except ERRORS as exc:
        job.retry_or_fail(item, exc)
        return None
    finally:
        job.big_running(item, None)
    res.update(parallel="auto")  # (the fleet's choice, not a fixed -P)
    return res


def cached_ok(job: TreeJob, sess: RemoteSession) -> bool:
    """Cached data channels: a server with extended block mode (under PROT P
    its streams run TLS), no per-file HASH in between."""
    return job.jopts.cached and "PARALLEL" in sess.ctl.features and not job.topts.verify


async def run_cached(job: TreeJob, wid: int, item: Item, sess: RemoteSession, direction: str) -> RemoteSession | None:
    """``item`` on a session whose server offers cached data channels
    (cached_ok): a big file on sessions of its own beside it, ``sess``
    still the worker's (returned); any other the first file of
    ``sess``'s cached loop, which drops the session at its end (None).
    The file goes to the loop in hand, not through the queue: a file in
    the queue is one more worker's (TreeJob.spawn), and this one has its
    worker (-c auto opens no more sessions than files wait)."""
    if big_file(job, item):
        await (big_get if direction == "get" else big_put)(job, item, sess)
        return sess
    await (cached_get_loop if direction == "get" else cached_put_loop)(job, wid, sess, [item])
    return None


async def cached_get_loop(job: TreeJob, wid: int, sess: RemoteSession, held: list[Item]) -> None:
    """``held`` (the worker's file), then files from the job's queue on
    ``sess`` until the queue is empty or the session breaks (its unfinished
    files go back to the queue).  The session is dropped at the end: its
    streams are of no use to others."""
    cg = CachedGets(sess.ctl, job.topts, job.jopts.streams)
    try:
        cg.open()
        await _run(job, wid, sess, cg, held, lambda item, remote, local: cg.request(
            remote, local, item.t.size, item.t.resume_from, item.t.mtime),
            lambda item, fg: job.finished(item, FileOutcome(fg.local, "ok", _complete(job, cg, fg))), "get")
    finally:
        _give_back(job, held)
        await cg.close()
        await job.drop(sess)


def _give_back(job: TreeJob, held: list[Item]) -> None:
    """A worker's file its loop never took (refused, broken first): to the queue."""
    while held:
        job.requeue(held.pop())


async def _run(job: TreeJob, wid: int, sess: RemoteSession, cs: CachedGets | CachedPuts, held: list[Item],
               request, done, direction: str) -> None:
    """The loop both directions share: request files ahead(), settle them
    in order; a failure after a file started breaks the session, and the
    files still on the wire go back to the queue (not theirs to pay for),
    as does a file whose session broke before it started (TreeJob.lost_session).
    A session closed while it waited (the server's idle timeout) ends the
    loop: the worker opens another (DATASETS.md#idle)."""
    inflight = Inflight()
    job.active[wid] = cs
    low = MAX_AHEAD[direction] - REFILL[direction]
    watch = StallWatch(cs, job.topts.idle_timeout)
    try:
        while True:
            check_cancelled()
            # a deep queue is topped up REFILL files at a time (one write)
            topping = bool(held) or len(inflight) <= low or not job.jopts.pipeline
            if topping:
                sess.ctl.cork()  # (flushed below, or at the loop's next turn)
            while (topping and (held or job.queue) and ahead(job, cs, inflight, direction) and job.may_run(wid)
                   and cs.broken is None and not sess.ctl.lost):
                if not held and big_file(job, job.queue[-1]):  # (found by the walk after this loop began)
                    if inflight:
                        break  # its streams of its own once this session's files are in
                    big = job.queue.pop()
                    sess.ctl.flush()
                    await (big_get if direction == "get" else big_put)(job, big, sess)
                    continue
                item = held.pop() if held else job.queue.pop()
                try:
                    remote, local = job.paths(item)  # (its error is this file's: reported, as any below)
                    if item.check:
                        sess.ctl.flush()
                        if await same_digest(sess, remote, local):
                            job.finished(item, FileOutcome(local if direction == "get" else remote, "skipped"))
                            continue
                        item.check = False
                    inflight.append((item, request(item, remote, local)))
                except ERRORS as exc:
                    if broken(exc) and (cs.broken is not None or sess.ctl.lost):
                        job.lost_session(item, exc)  # (not sent: the session broke before it)
                        break
                    job.retry_or_fail(item, exc)
            sess.ctl.flush()
            if not inflight:
                if job.walking and job.may_run(wid) and cs.broken is None and not sess.ctl.lost:
                    # the walk is still finding files: the streams wait open, the
                    # session kept alive by NOOP (only now: nothing requested on it)
                    await job.more(sess)
                    continue
                return
            item, f = inflight[0]
            await watch.until_done(f)
            inflight.popleft()
            # what its end sends (a put's MFMT) and the next files' commands: one write
            sess.ctl.cork()
            failure = f.done.exception()
            if failure is None:
                try:
                    done(item, f)
                except ERRORS as exc:  # (a local file moved or deleted meanwhile)
                    job.retry_or_fail(item, exc)
                continue
            if getattr(cs, "refused", False):  # MODE E refused: the files go back, stream mode from now on
                job.jopts.cached = False
                job.requeue(item)
            elif broken(failure) and f.state in ("sent", "refused"):  # (no 1yz: the server never started it)
                job.lost_session(item, failure)
            else:
                job.retry_or_fail(item, failure)
            if cs.broken is not None or broken(failure):
                return
    finally:
        watch.stop()
        sess.ctl.flush()
        job.active.pop(wid, None)
        for item, _ in inflight:
            job.requeue(item)


class StallWatch:
    """A session's data stalled: no byte moved for ``idle`` s while a file
    is awaited fails the session.  One timer a session, checked every
    EVERY s, not a timed wait a file (asyncio.wait's timer and futures
    were a put's largest per-file cost in the worker)."""

    EVERY = 0.5

    def __init__(self, cs: CachedGets | CachedPuts, idle: float) -> None:
        self.cs, self.idle = cs, idle
        self.last = (time.monotonic(), cs.received)
        self.waiting = False
        self.handle = asyncio.get_running_loop().call_later(self.EVERY, self._check)

    async def until_done(self, f: FileGet | FilePut) -> None:
        """The file's end (its ``done`` set, or failed by a stall)."""
        if f.done.done():
            return
        self.last, self.waiting = (time.monotonic(), self.cs.received), True
        try:
            await f.done
        except Exception:  # (the caller reads it: f.done.exception())
            pass
        finally:
            self.waiting = False

    def _check(self) -> None:
        now, moved = time.monotonic(), self.cs.received
        if not self.waiting or moved != self.last[1]:
            self.last = (now, moved)
        elif now - self.last[0] > self.idle:
            self.cs.fail(FTPError(f"data connections stalled for {self.idle:.0f} s"))
        self.handle = asyncio.get_running_loop().call_later(self.EVERY, self._check)

    def stop(self) -> None:
        self.handle.cancel()


def _complete(job: TreeJob, cg: CachedGets, fg: FileGet):
    """The .part in place; a size other than the listing's is a file that
    changed since the walk, and its time is then not the listing's either."""
    got = fg.ledger.size()
    changed = fg.size is not None and got != fg.size
    os.replace(fg.part, fg.local)
    if fg.mtime is not None and not changed:
        os.utime(fg.local, (fg.mtime, fg.mtime))
    res = cg.file_result(fg, time.monotonic() - (fg.started or time.monotonic()), job.report.detailed)
    if changed:
        res.update(note=f"changed during the copy: listed {fg.size} B, got {got} B")
    return res


async def big_put(job: TreeJob, item: Item, sess: RemoteSession) -> None:
    """One big file as ``put -P N`` does it, on sessions of its own (big_get)."""
    paths = _paths(job, item)
    if paths is None:
        return
    remote, local = paths
    res = await _big(job, item, sess, lambda n, on_driver: parallel.put(
        local, replace(job.loc, path=remote), job.topts, n, on_driver=on_driver))
    if res is not None:
        job.finished(item, FileOutcome(remote, "ok", res))


async def cached_put_loop(job: TreeJob, wid: int, sess: RemoteSession, held: list[Item]) -> None:
    """The put side of cached_get_loop (drsftp.client.trees.cached.put)."""
    cp = CachedPuts(sess.ctl, job.topts, job.jopts.streams)
    times: deque = deque()  # MFMT sent after each file, not yet answered (replies come in order, EBLOCK.md)
    unsent: list[str] = []  # MFMT lines of files done, sent REFILL at a time (with the next files' commands)

    def send_times() -> None:
        while times and times[0].final.done():
            times.popleft()  # (answered: only those still on the way are awaited at the end)
        lines, unsent[:] = list(unsent), []
        for line in lines:
            times.append(sess.ctl.send_unwaited(line))

    def done(item: Item, fp: FilePut) -> None:
        res = cp.file_result(fp, time.monotonic() - (fp.started or time.monotonic()), job.report.detailed)
        if "MFMT" in sess.ctl.features:
            unsent.append(f"MFMT {format_time_val(fp.mtime)} {fp.remote}")
            if len(unsent) >= REFILL["put"]:
                send_times()
        job.finished(item, FileOutcome(fp.remote, "ok", res))

    try:
        try:
            await cp.open()
        except FTPError as exc:
            if exc.reply is None:
                raise
            job.jopts.cached = False  # refused (MODE E, EPSV): stream mode from now on
            return
        await _run(job, wid, sess, cp, held, lambda item, remote, local: cp.request(local, remote), done, "put")
    finally:
        _give_back(job, held)
        if unsent and not sess.ctl.lost:  # (a broken session's control connection still takes them)
            try:
                send_times()
            except FTPError:
                pass  # (closed meanwhile: lost with it, as an MFMT sent on it would be)
        if times and cp.broken is None:  # (--sync compares them): in before the session closes
            await asyncio.gather(*(asyncio.wait_for(asyncio.shield(t.final), 30) for t in times),
                                 return_exceptions=True)
        await cp.close()
        await job.drop(sess)
