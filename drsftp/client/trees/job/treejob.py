"""A dataset job (docs/DATASETS.md, "What a job does"): its sources, one
queue of planned files taken largest first by its workers, a session
each (-c N, or -c auto: drsftp.client.trees.job.fleet, "Sessions x streams"),
while the walk (drsftp.client.trees.walk) may still be finding more
("Transfers start during the walk"). A file that fails is reported and
skipped, the rest go on ("Failures and bad input"); each outcome goes to
the job's report (drsftp.client.trees.job.result), its sessions are kept by
drsftp.client.trees.job.sessions ("Idle sessions")."""

from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from ....ftp.listing import FILE, Entry
from ....ftp.safepath import check_name, local_path, remote_join
from ....ftp.url import FTPLocation
from ....tuning.count.fleet import Change, FleetConfig, Kind
from ...session.control import FTPError, os_reason
from ...transfer import verify as sha256check
from ...transfer.getput import TransferOptions
from ..plan import Plan, Rel, Stat, Transfer
from ..remote import RemoteSession
from ..walk import Found, RemoteWalk
from .fleet import FleetSteering, path_of, samples_of
from .result import FileOutcome, JobReport, JobResult
from .sessions import ERRORS, LOST_AGAIN, JobSessions, broken, idle_wait, lost_before


@dataclass
class JobOptions:
    recursive: bool = False
    sync: bool = False
    checksum: bool = False
    delete: bool = False
    resume: bool = False
    sessions: int | None = 4  # None: -c auto
    retries: int = 0
    verbose: int = 0
    progress: bool | None = None
    pipeline: bool = True  # False: each command waits for the previous reply (for comparison)
    cached: bool = True  # gets from a server with extended block mode on cached data channels
    streams: int = 1  # data streams per session on cached channels (-P)
    fleet: FleetConfig | None = None  # the sessions x streams controller's settings (None: its own)
    json: str | None = None  # --json's path: every file's record spooled as it comes (JobResult.write_json)


@dataclass
class Source:
    remote: str  # server path of the file or directory
    local: str  # local path it maps to
    kind: str = FILE
    entry: Entry | None = None


DIR_CACHE = 256  # directories whose joined, checked paths a job keeps (TreeJob.paths)
# files waiting in a job's queue past which its walk lists no more directories
# (a tree's entries are not all held at once); it goes on below BACKLOG_LOW
BACKLOG_HIGH, BACKLOG_LOW = 4096, 2048


class JobQueue(list):
    """The job's waiting files (a list, sorted by TreeJob.enqueue); a pop
    that leaves it at BACKLOG_LOW or fewer sets ``drained`` (the walk's
    pacing: RemoteWalk waits for it past BACKLOG_HIGH).  ``bytes``: their
    listed sizes' sum, kept as they come and go (the fleet controller
    reads it every update: TreeJob.steer)."""

    def __init__(self) -> None:
        super().__init__()
        self.drained = asyncio.Event()
        self.paced = True  # False: the walk goes on whatever the queue holds (unpace)
        self.bytes = 0

    def append(self, item) -> None:
        super().append(item)
        self.bytes += item.t.size or 0

    def extend(self, items) -> None:
        items = list(items)
        super().extend(items)
        self.bytes += sum(item.t.size or 0 for item in items)

    def pop(self, index: int = -1):  # type: ignore[override]
        item = super().pop(index)
        self.bytes -= item.t.size or 0
        if len(self) <= BACKLOG_LOW:
            self.drained.set()
        return item

    def clear(self) -> None:
        super().clear()
        self.bytes = 0
        self.drained.set()

    @property
    def full(self) -> bool:
        return self.paced and len(self) >= BACKLOG_HIGH

    def unpace(self) -> None:
        """No worker is left to take files until the walk ends (its sessions
        are all the server took): the walk goes on unpaced."""
        self.paced = False
        self.drained.set()

    async def wait_room(self) -> None:
        """Until the queue is down to BACKLOG_LOW files."""
        while self.paced and len(self) > BACKLOG_LOW:
            self.drained.clear()
            await self.drained.wait()


@dataclass(slots=True)
class Item:
    src: int  # index into the job's sources
    t: Transfer
    check: bool = False  # --checksum: compare digests first
    tries: int = 0
    order: int = 0  # planned order, among files of one size
    lost: int = 0  # times its session broke before its transfer started (LOST_AGAIN)


class TreeJob(JobSessions):
    """One get or put of a tree (or of several sources) on one server: its
    sessions (JobSessions), its queue and workers, its report."""

    def __init__(self, direction: str, loc: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> None:
        # sessions (-c) and a big file's streams: one controller (docs/DATASETS.md, "Sessions x streams")
        self.fleet = FleetSteering(jopts.fleet, jopts.sessions)
        # the whole job's --max-time (run_within_max_time), not each file's
        super().__init__(loc, replace(topts, progress=False, max_time=None, deadline=None), jopts.pipeline,
                         self.fleet.sessions)
        self.direction, self.jopts, self.max_time = direction, jopts, topts.max_time
        self.report = JobReport(direction, jopts.progress, jopts.verbose, jopts.json)
        self.sources: list[Source] = []
        self.queue: JobQueue = JobQueue()
        self.active: dict[int, object] = {}  # worker -> its running transfer (StreamTransfer or a parallel driver)
        self.done_bytes = 0
        self.files_total = 0
        self.files_done = 0
        self.bytes_total = 0
        self.workers: dict[int, asyncio.Task] = {}
        self.started = time.monotonic()  # the job's time counts its walk and plan
        self.walking = False  # the walk still finds files: workers wait for more (more())
        self.gave_up: BaseException | None = None  # every session failed: nothing more is run
        self._more = asyncio.Event()
        self._walk_done = asyncio.Event()
        self._worker_fn: Callable[[int], Awaitable[None]] | None = None  # while run_queue runs
        self._planned = 0
        self._dirs: dict[tuple[int, Rel], tuple[str, str]] = {}  # paths(): a directory's (remote, local)

    async def run_within_max_time(self, work: Awaitable[None]) -> JobResult:
        """``work`` (the whole job) run, stopped at --max-time (as curl's,
        from the job's start): the job's task and its workers are cancelled
        as by Ctrl-C, each leaving its file as it was, and no worker starts
        after (a cancel Python 3.11's wait_for dropped: check_cancelled)."""
        if self.max_time is None:
            await work
        else:
            await self._stop_at_max_time(work, self.max_time)
        self.result.sessions_max = self.most_live
        return self.result

    async def _stop_at_max_time(self, work: Awaitable[None], max_time: float) -> None:
        task = asyncio.current_task()
        assert task is not None

        def stop() -> None:
            self.result.stopped = True
            task.cancel()
            for worker in self.workers.values():
                worker.cancel()

        timer = asyncio.get_running_loop().call_later(max_time - (time.monotonic() - self.started), stop)
        try:
            await work
        except asyncio.CancelledError:
            if not self.result.stopped or task.uncancel() > 0:
                raise  # (Ctrl-C)
        else:
            if self.result.stopped:
                task.uncancel()  # (its cancel was dropped: the job ended at the checks)
        finally:
            timer.cancel()
        if self.result.stopped:
            self.result.seconds = time.monotonic() - self.started

    @property
    def result(self) -> JobResult:
        return self.report.result

    async def walk_remote(self, roots: list[tuple[int, str]], on_found: Found | None = None,
                          first: RemoteSession | None = None, *, paced: bool = False) -> dict[int, dict[Rel, Stat]]:
        """Every source directory's tree, listed on up to N sessions at once
        (``first`` lists the first root: its listing may be on the way);
        ``on_found(i, entries)`` gets source i's entries as their listing
        lines arrive (drsftp.client.trees.walk); ``paced``: they are not
        kept (the trees returned are empty), and no directory is listed
        while the queue holds BACKLOG_HIGH files."""
        own_sessions = self.jopts.sessions is None or not self.walking
        return await RemoteWalk(self, self.report, roots, on_found, first, own_sessions=own_sessions,
                                paced=self.queue if paced and on_found is not None else None).run()

    # -- running ------------------------------------------------------------------------
    def enqueue(self, i: int, p: Plan) -> None:
        """Planned files into the queue, which pop() takes largest first
        (the longest-processing-time rule: the job ends soonest), equal
        sizes in planned order."""
        new = [Item(i, t) for t in p.transfers] + [Item(i, t, check=True) for t in p.checks]
        if self.gave_up is not None:  # (found by a walk that outlived every session)
            for item in new:
                self.report.fail(self.name(item), f"not transferred: {self.gave_up}")
            return
        for item in new:
            item.order, self._planned = self._planned, self._planned + 1
        self.queue.extend(new)
        self.queue.sort(key=_largest_last)
        self.files_total += len(p.transfers) + len(p.checks)
        self.bytes_total += p.total_bytes + sum(t.size or 0 for t in p.checks)
        if new:
            self._more.set()
            if self._worker_fn is not None:
                self.spawn(self._worker_fn)  # (found by the walk: workers for them)

    def requeue(self, item: Item) -> None:
        """A file back to the queue (a retry, a session lost): next to go,
        and a worker waiting for more (more()) takes it."""
        self.queue.append(item)
        self._more.set()

    def walked(self) -> None:
        """The walk has found everything: waiting workers may end."""
        self.walking = False
        self._more.set()
        self._walk_done.set()

    async def more(self, sess: RemoteSession | None = None) -> None:
        """Until the walk queues more files or ends (workers of a job whose
        transfers start while it is still walked); ``sess``, the worker's,
        is kept alive meanwhile (idle_wait)."""
        while self.walking and not self.queue:
            self._more.clear()
            await idle_wait(self._more, sess)

    def paths(self, item: Item) -> tuple[str, str]:
        """(remote, local) of an item; UnsafePath for a name that may not
        become a path (a worker's per-file error: reported, see name())."""
        s = self.sources[item.src]
        if s.kind == FILE:
            return s.remote, s.local
        rel = item.t.rel
        if len(rel) < 2:
            return remote_join(s.remote, rel), local_path(s.local, rel)
        # the directory's pair once (its files share it), the name checked alone:
        # a checked name is one component, below the directory as that is below the roots
        key = (item.src, rel[:-1])
        dirs = self._dirs.get(key)
        if dirs is None:
            if len(self._dirs) >= DIR_CACHE:
                self._dirs.clear()
            dirs = self._dirs[key] = (remote_join(s.remote, rel[:-1]), local_path(s.local, rel[:-1]))
        name = check_name(rel[-1])
        return posixpath.join(dirs[0], name), posixpath.join(dirs[1], name)

    def name(self, item: Item) -> str:
        """What the report calls ``item`` (its local path), even where
        paths() refused it: then the parts as given, control characters
        escaped, so that its failure is reported and not lost."""
        try:
            return self.paths(item)[1]
        except ERRORS:
            s = self.sources[item.src]
            return posixpath.join(s.local, *(repr(part)[1:-1] for part in item.t.rel))

    async def run_queue(self, worker_fn) -> None:
        self._worker_fn = worker_fn
        monitor = asyncio.ensure_future(self.monitor())
        try:
            self.spawn(worker_fn)
            while (self.workers or self.walking) and not self.result.stopped:
                if not self.workers:
                    # the walk's sessions are all the server took: the files wait for them
                    self.queue.unpace()
                    await self._walk_done.wait()
                    self.allowed = max(1, len(self.spare))
                    self.spawn(worker_fn)
                    continue
                done, _ = await asyncio.wait(list(self.workers.values()), return_when=asyncio.FIRST_COMPLETED)
                for wid in [w for w, t in self.workers.items() if t in done]:
                    task = self.workers.pop(wid)
                    if not task.cancelled() and task.exception() is not None and (self.queue or self.walking):
                        exc = task.exception()
                        # the server takes no more sessions (421, refused): run with those it took
                        self.allowed = max(1, len(self.workers))
                        self.fleet.limit_sessions(self.allowed)
                        if not self.workers and not self.walking:  # none left: every file left fails
                            self.gave_up = exc
                            for item in reversed(self.queue):
                                self.report.fail(self.name(item), f"not transferred: {exc}")
                            self.queue.clear()
                if self.gave_up is None and (self.workers or not self.walking):
                    self.spawn(worker_fn)  # (none left while walking: they wait for the walk's sessions, above)
        finally:
            monitor.cancel()
            # Ctrl-C: the workers end before the loop does, each cleaning up
            # its own transfer (asyncio.run would cancel every task at once)
            for task in self.workers.values():
                task.cancel()
            if self.workers:
                await asyncio.wait(list(self.workers.values()), timeout=10)
            self.result.seconds = time.monotonic() - self.started
            self.show()

    def spawn(self, worker_fn) -> None:
        """Workers up to the allowed sessions, and no more than there are
        files waiting or moving (a worker opens its session for a file); one
        waits for the walk's first files."""
        if self.result.stopped:
            return  # (at --max-time)
        want = min(self.allowed, max(len(self.queue) + len(self.workers), 1 if self.walking else 0))
        wid = 0
        while len(self.workers) < want:
            while wid in self.workers:
                wid += 1
            self.workers[wid] = asyncio.ensure_future(worker_fn(wid))

    def may_run(self, wid: int) -> bool:
        return wid < self.allowed

    def drivers(self) -> list[object]:
        """The running transfers: the workers' files, and the big files'."""
        return list(self.active.values()) + self.fleet.big_drivers()

    def moved_now(self) -> int:
        return self.done_bytes + sum(getattr(x, "moved", 0) for x in self.drivers())

    async def monitor(self) -> None:
        """The bar every 0.2 s; NOOPs on idle sessions every KEEPALIVE s;
        the fleet controller every few RTTs (steer)."""
        last_t, last_b = time.monotonic(), self.moved_now()
        self.fleet.begin(last_t, last_b)
        self.pinged = last_t
        rate = 0.0
        for _ in range(10 ** 7):  # bounded: cancelled when the queue is done
            await asyncio.sleep(0.2)
            now, moved = time.monotonic(), self.moved_now()
            rate = 0.7 * rate + 0.3 * (moved - last_b) / max(now - last_t, 1e-6)
            last_t, last_b = now, moved
            self.ping_idle_if_due(now)
            self.steer(now, moved)
            self.report.view.update(files_done=self.files_done, files_total=self.files_total, done=moved,
                                    total=self.bytes_total, rate_bps=rate * 8, sessions=self.live, rtt=self.rtt)

    def steer(self, now: float, moved: int) -> None:
        """The path's RTT from the data connections' own measure (TCP_INFO);
        the fleet controller asked when due, its decision applied."""
        samples = [x for d in self.drivers() for x in samples_of(d)]
        rtts = [x.rtt for x in samples if x.rtt]
        if rtts:
            self.rtt = min(rtts)
        if not self.fleet.due(now, self.rtt):
            return
        work = self.fleet.work(len(self.queue), self.queue.bytes, max(0, self.bytes_total - moved))
        change = self.fleet.update(now, moved, samples, self.rtt, work, path_of(self.drivers()))
        if change is not None:
            self.apply(change)

    def apply(self, change: Change) -> None:
        """A decision of the fleet controller, at once (DATASETS.md#fleet):
        more sessions start workers for the files waiting, fewer stop those
        past the count (may_run); a stream is asked of a big file's transfer."""
        if change.kind is not Kind.SESSION:
            self.fleet.change_streams(change)
            return
        self.allowed = max(1, self.fleet.sessions)
        self.spawn(self._worker_fn)

    def big_started(self, item: Item, first: int | None = None) -> int:
        """A big file starts on sessions of its own: its first streams
        (``first``: what -P auto would start with on this path)."""
        return self.fleet.big_started(id(item), first)

    def big_running(self, item: Item, driver: object | None) -> None:
        """``driver``: the file's parallel transfer; None: it has ended."""
        self.fleet.big_running(id(item), item.t.size or 0, driver)

    def show(self) -> None:
        """The bar's last state: the job's mean rate and most sessions."""
        seconds = time.monotonic() - self.started
        self.report.view.update(files_done=self.files_done, files_total=self.files_total, done=self.moved_now(),
                                total=self.bytes_total, rate_bps=self.moved_now() * 8 / max(seconds, 1e-6),
                                sessions=self.most_live, rtt=self.rtt)

    def finished(self, item: Item, outcome: FileOutcome) -> None:
        self.files_done += 1
        if outcome.result is not None:
            self.done_bytes += outcome.result.bytes
        self.report.record(outcome)

    async def session_for(self, item: Item, sess: RemoteSession | None) -> RemoteSession:
        """A worker's session for ``item``: its own, or another if it has
        none or the server closed it while it waited (its idle timeout,
        DATASETS.md#idle).  If none can be opened, ``item`` goes back to
        the queue and the worker ends (run_queue: the server takes no more)."""
        if sess is not None and sess.ctl.lost:
            await self.drop(sess)
            sess = None
        if sess is not None:
            return sess
        try:
            return await self.session()
        except ERRORS as exc:
            self.requeue(item)
            raise FTPError(f"cannot open a session: {exc}") from exc

    def failed_on(self, wid: int, item: Item, sess: RemoteSession, begun: int, exc: BaseException) -> bool:
        """``item`` failed on worker ``wid``'s session, whose transfer count
        was ``begun`` when it was asked: back to the queue free if the
        session was lost before the server started it, else retried or
        failed (--retries).  True: the session is broken (the worker drops it)."""
        self.active.pop(wid, None)
        if lost_before(sess, begun, exc):
            self.lost_session(item, exc)
        else:
            self.retry_or_fail(item, exc)
        return broken(exc)

    def lost_session(self, item: Item, exc: BaseException) -> None:
        """Its session broke before the server started its transfer (a
        session closed while it waited, DATASETS.md#idle): back to the
        queue without paying a try, LOST_AGAIN times at most (a file that
        breaks every session then pays)."""
        if item.lost < LOST_AGAIN:
            item.lost += 1
            self.requeue(item)
            return
        self.retry_or_fail(item, exc)

    def retry_or_fail(self, item: Item, exc: BaseException) -> None:
        transient = isinstance(exc, FTPError) and exc.transient
        if transient and item.tries < self.jopts.retries:
            item.tries += 1
            self.requeue(item)
            return
        self.finished(item, FileOutcome(self.name(item), "failed", error=_sentence(exc)))


def _sentence(exc: BaseException) -> str:
    """An OSError in words ("cannot use x.part: read-only file system"),
    as the command line says them, not "[Errno 30] Read-only ...: 'x.part'"."""
    if not isinstance(exc, OSError):
        return str(exc)
    name = exc.filename if isinstance(exc.filename, str) else None
    return f"cannot use {name}: {os_reason(exc)}" if name else os_reason(exc)


def _largest_last(item: Item) -> tuple[int, int]:
    return item.t.size or 0, -item.order


async def verify(sess: RemoteSession, remote: str, local: str) -> str:
    """--verify in a job: the file's SHA-256 here equals the server's (client/transfer/verify.py)."""
    return await sha256check.verify(sess.ctl, remote, local)


async def same_digest(sess: RemoteSession, remote: str, local: str) -> bool:
    """--checksum in a job: both copies have the same SHA-256 (client/transfer/verify.py)."""
    return await sha256check.same_digest(sess.ctl, remote, local)
