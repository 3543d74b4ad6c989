"""The engine of dataset jobs: N sessions sharing one queue of files
(-c N, or -c auto: sessions and a big file's streams chosen by one
controller, drsftp.tuning.fleet), the directory walk on the
same sessions, per-file outcomes, the job's bar (drsftp.client.jobview).
A file that fails is reported and skipped; the rest go on."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field, replace

from ..ftp.listing import DIR, FILE, LINK, Entry
from ..ftp.safepath import UnsafePath, check_name, local_path, remote_join
from ..ftp.url import FTPLocation
from ..tuning.fleet import Change, FleetConfig, FleetController, Kind, Work
from ..tuning.streams import StreamSample
from . import verify as sha256check
from .control import FTPError
from .jobview import JobView
from .plan import Plan, Rel, Stat, Transfer
from .progress import human_bits, human_bytes
from .remote import RemoteSession
from .transfer import TransferOptions, TransferResult

MAX_DEPTH = 256  # directory levels below a source: deeper is a loop or a hostile server
# listers per source, shared by all sources: min(allowed sessions, 8 x sources) (DATASETS.md#walk)
WALK_LISTERS = 8
# s: a session idle this long sends NOOP (RFC 959 sec. 4.1.3), well within
# servers' idle timeouts (pyftpdlib, vsftpd: 300 s) (DATASETS.md#idle)
KEEPALIVE = 30.0
LOST_AGAIN = 3  # times a file or directory goes back free when its session broke before it started
ERRORS = (FTPError, OSError, UnsafePath, UnicodeError, asyncio.TimeoutError)


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


@dataclass
class Source:
    remote: str  # server path of the file or directory
    local: str  # local path it maps to
    kind: str = FILE
    entry: Entry | None = None


@dataclass
class Outcome:
    path: str  # destination path
    status: str  # ok, failed, skipped, deleted
    result: TransferResult | None = None
    error: str | None = None

    def as_dict(self) -> dict:
        d = {"path": self.path, "status": self.status, "error": self.error}
        if self.result is not None:
            r = self.result.to_dict()
            r.pop("timeline", None)
            d.update(r, path=self.path, remote=self.result.path)
        return d


@dataclass
class JobResult:
    direction: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    sessions_max: int = 0
    stopped: bool = False  # at --max-time: files still moving were left as they were (.part)

    @property
    def bytes(self) -> int:
        return sum(o.result.bytes for o in self.outcomes if o.result is not None)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def summary_line(self) -> str:
        rate = self.bytes * 8 / self.seconds if self.seconds > 0 else 0.0
        return (f"{self.direction}: {self.count('ok')} files, {human_bytes(self.bytes)} in {self.seconds:.2f} s"
                f" = {human_bits(rate)}; {self.count('skipped')} skipped, {self.count('deleted')} deleted,"
                f" {self.count('failed')} failed; up to {self.sessions_max} sessions")


@dataclass
class Item:
    src: int  # index into the job's sources
    t: Transfer
    check: bool = False  # --checksum: compare digests first
    tries: int = 0
    order: int = 0  # planned order, among files of one size
    lost: int = 0  # times its session broke before its transfer started (LOST_AGAIN)


class Job:
    def __init__(self, direction: str, loc: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> None:
        self.direction, self.loc, self.jopts = direction, loc, jopts
        self.max_time = topts.max_time  # the whole job's (run_within_max_time), not each file's
        self.topts = replace(topts, progress=False, max_time=None, deadline=None)
        self.result = JobResult(direction)
        self.view = JobView(direction, jopts.progress, jopts.verbose)
        self.sources: list[Source] = []
        self.queue: list[Item] = []
        self.active: dict[int, object] = {}  # worker -> its running _Transfer
        self.done_bytes = 0
        self.files_total = 0
        self.files_done = 0
        self.bytes_total = 0
        # sessions (-c) and a big file's streams: one controller (docs/DATASETS.md, "Sessions x streams")
        self.fleet = FleetController(jopts.fleet, fixed_sessions=jopts.sessions)
        self.allowed = self.fleet.sessions
        self.big: dict[int, tuple[Item, object]] = {}  # id(a big file) -> it, its parallel driver
        self.workers: dict[int, asyncio.Task] = {}
        self.spare: list[RemoteSession] = []
        self.opening: list[asyncio.Future] = []  # sessions prefetched, still logging in
        self._closing: set[asyncio.Future] = set()  # sessions the server closed, closing here
        self.rtt: float | None = None
        self.live = 0  # sessions open now
        self.started = time.monotonic()  # the job's time counts its walk and plan
        self.walking = False  # the walk still finds files: workers wait for more (more())
        self.gave_up: BaseException | None = None  # every session failed: nothing more is run
        self._more = asyncio.Event()
        self._walk_done = asyncio.Event()
        self._worker_fn: Callable[[int], Awaitable[None]] | None = None  # while run_queue runs
        self._planned = 0

    async def run_within_max_time(self, work: Awaitable[None]) -> JobResult:
        """``work`` (the whole job) stopped at --max-time (as curl's, from
        the job's start): the job's task and its workers are cancelled as by
        Ctrl-C, each leaving its file as it was, and no worker starts after
        (a cancel Python 3.11's wait_for dropped: check_cancelled)."""
        if self.max_time is None:
            await work
            return self.result
        task = asyncio.current_task()
        assert task is not None

        def stop() -> None:
            self.result.stopped = True
            task.cancel()
            for worker in self.workers.values():
                worker.cancel()

        timer = asyncio.get_running_loop().call_later(self.max_time - (time.monotonic() - self.started), stop)
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
        return self.result

    # -- sessions ---------------------------------------------------------------
    def prefetch(self, n: int) -> None:
        """Open up to ``n`` more sessions in the background, while the job
        still walks and plans: a session costs three round trips before its
        first command (connection, greeting, log-in)."""
        for _ in range(max(0, n - len(self.opening))):
            fut = asyncio.ensure_future(self._open())
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # read by session() or dropped
            self.opening.append(fut)

    async def first_session(self, queries: tuple[str, ...], listing: str | None = None) -> RemoteSession:
        """The job's first session, ``queries`` (and ``listing``) sent with its log-in."""
        sess = await RemoteSession.open_asking(self.loc, self.topts, queries, listing)
        self._count(sess)
        return sess

    async def session(self) -> RemoteSession:
        sess = self.take_spare()
        if sess is not None:
            return sess
        while self.opening:
            try:
                sess = await self.opening.pop(0)
            except ERRORS:
                continue  # (the server may take fewer sessions: open one the usual way)
            if not sess.ctl.lost:
                return sess
            self.discard(sess)
        return await self._open()

    def take_spare(self) -> RemoteSession | None:
        """A spare session still open; those the server closed while they
        waited (its idle timeout) are dropped (DATASETS.md#idle)."""
        while self.spare:
            sess = self.spare.pop()
            if not sess.ctl.lost:
                return sess
            self.discard(sess)
        return None

    def discard(self, sess: RemoteSession) -> None:
        """A session the server closed: out of the count now, closed here
        in the background (close_spare waits for it)."""
        self.live -= 1
        task = asyncio.ensure_future(sess.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def idle_sessions(self) -> list[RemoteSession]:
        """Spare sessions and prefetched ones that have logged in."""
        opened = [f.result() for f in self.opening if f.done() and not f.cancelled() and f.exception() is None]
        return self.spare + opened

    async def trim_spare(self) -> None:
        """After the walk: spare sessions beyond what the workers can still
        take (the walk's own, DATASETS.md#walk) are closed, not left idle.
        With no worker holding one, the walk's are all the job has (run_queue)."""
        # (a prefetched session that has logged in is counted live, and is
        # the workers' as those still opening are: not busy)
        busy = self.live - len(self.spare) - (len(self.idle_sessions()) - len(self.spare))
        if busy <= 0:
            return
        extra = len(self.spare) - max(0, self.allowed - busy - len(self.opening))
        if extra > 0:
            closing, self.spare = self.spare[:extra], self.spare[extra:]
            await asyncio.gather(*(self.drop(s) for s in closing), return_exceptions=True)

    async def _open(self) -> RemoteSession:
        return self._count(await RemoteSession.open(self.loc, self.topts))

    def _count(self, sess: RemoteSession) -> RemoteSession:
        sess.pipeline = self.jopts.pipeline
        self.live += 1
        self.result.sessions_max = max(self.result.sessions_max, self.live)
        self.rtt = self.rtt or sess.rtt
        return sess

    async def drop(self, sess: RemoteSession) -> None:
        self.live -= 1
        await sess.close()

    async def close_spare(self) -> None:
        for fut in self.opening:
            fut.cancel()
        opened = await asyncio.gather(*self.opening, return_exceptions=True)
        self.opening.clear()
        self.spare.extend(s for s in opened if isinstance(s, RemoteSession))
        spare, self.spare = self.spare, []
        await asyncio.gather(*(self.drop(s) for s in spare), *self._closing, return_exceptions=True)

    def record(self, outcome: Outcome) -> None:
        self.result.outcomes.append(outcome)
        r = outcome.result
        self.view.file_line(outcome.status, outcome.path, r.bytes if r else 0, r.seconds if r else 0.0,
                            outcome.error)

    def fail(self, path: str, error: str) -> None:
        self.record(Outcome(path, "failed", error=error))

    # -- walking ----------------------------------------------------------------------
    async def walk_remote(self, roots: list[tuple[int, str]],
                          on_found: Callable[[int, dict[Rel, Stat]], None] | None = None,
                          first: RemoteSession | None = None) -> dict[int, dict[Rel, Stat]]:
        """Every source directory's tree, listed on up to N sessions at once
        (``first`` lists the first root: its listing may be on the way);
        ``on_found(i, entries)`` gets source i's entries as their listing
        lines arrive (docs/DATASETS.md, "Transfers start during the walk")."""
        given = [first] if first is not None else []
        holding = 0  # listers with a session
        joining = 0  # listers opening one
        refused = False  # the server refused one of the walk's sessions: it opens no more of its own
        stuck: BaseException | None = None  # none could be opened with none listing: no lister waits
        listed = False  # a listing was asked for (else a walk that got no session fails as a whole)
        trees: dict[int, dict[Rel, Stat]] = {i: {} for i, _ in roots}
        # (source, root, directory, times its session broke before it was listed)
        todo: list[tuple[int, str, Rel, int]] = [(i, path, (), 0) for i, path in roots]
        seen: set[str] = set()
        pending = 0
        wake = asyncio.Event()
        ended = asyncio.get_running_loop().create_future()  # every directory listed

        def take(i: int, root: str, rel: Rel, entries: list[Entry]) -> None:
            found: dict[Rel, Stat] = {}
            for e in entries:
                try:
                    child = rel + (check_name(e.name),)
                except UnsafePath as exc:
                    self.fail(f"{root}/{'/'.join(rel)}", f"server sent {exc}; skipped")
                    continue
                if child in trees[i]:
                    continue  # a name listed twice (or listed again after a break)
                if e.type == DIR:
                    if e.unique and (e.unique in seen):
                        self.view.file_line("skipped", remote_join(root, child), 0, 0,
                                            "a directory seen before (a loop); skipped")
                        continue
                    if e.unique:
                        seen.add(e.unique)
                    if len(child) > MAX_DEPTH:
                        self.fail(remote_join(root, child), f"deeper than {MAX_DEPTH} levels; skipped")
                        continue
                    found[child] = trees[i][child] = Stat(is_dir=True)
                    todo.append((i, root, child, 0))
                    wake.set()
                elif e.type == FILE:
                    found[child] = trees[i][child] = Stat(e.size, e.mtime)
                elif self.jopts.verbose:
                    what = "symlink" if e.type == LINK else "special file"
                    self.view.file_line("skipped", remote_join(root, child), 0, 0, f"{what}; skipped")
            if found and on_found is not None:
                on_found(i, found)

        def wants_session() -> bool:
            """Whether a lister without a session takes one now: one given or
            spare; none lists; or, under -c auto (or before files move: -c N
            counts every session but the walk's one), one of the walk's own
            while more directories wait than the listers holding or opening
            one take, until the server refuses one."""
            if given or self.spare or not holding + joining:
                return True
            return (not refused and len(todo) > holding + joining
                    and (self.jopts.sessions is None or not self.walking))

        async def open_one() -> RemoteSession | None:
            """A session for a lister; None: the walk ended while it opened
            (it is then the job's, as a prefetched one)."""
            nonlocal joining
            if given:
                return given.pop()
            sess = self.take_spare()
            if sess is not None:
                return sess
            fut = asyncio.ensure_future(self.session())
            joining += 1
            done = False
            try:
                await asyncio.wait([fut, ended], return_when=asyncio.FIRST_COMPLETED)
                done = fut.done()
            finally:
                joining -= 1
                wake.set()
                if not done:
                    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
                    self.opening.append(fut)  # (a worker takes it, or close_spare drops it)
            return fut.result() if done else None

        async def lister() -> None:
            nonlocal pending, holding, refused, listed, stuck
            sess: RemoteSession | None = None  # taken when there is a directory to list
            try:
                while todo or pending:
                    check_cancelled()
                    if stuck is not None and sess is None and not holding + joining:
                        raise stuck
                    if sess is not None and sess.ctl.lost:  # closed while it waited (the server's idle timeout)
                        stale, sess = sess, None
                        holding -= 1
                        wake.set()
                        await self.drop(stale)
                        continue
                    if sess is None and todo and wants_session():
                        try:
                            sess = await open_one()
                        except ERRORS as exc:
                            refused = True  # (the others list; this one waits, to reopen if they break)
                            if not holding + joining:
                                stuck = exc  # (no session lists: the rest fail below)
                            continue
                        if sess is None:
                            continue
                        if not todo:  # (the others took them while it opened)
                            self.spare.append(sess)
                            sess = None
                            continue
                        holding += 1
                    if sess is None or not todo:
                        # (files moving meanwhile: the sessions are the workers'; a lister
                        # takes one they left, or opens one as wants_session() says)
                        wake.clear()
                        await idle_wait(wake, sess)
                        continue
                    begun = sess.transfers
                    dead: RemoteSession | None = None
                    i, root, rel, lost = todo.pop()
                    pending += 1
                    listed = True
                    try:
                        streamed = functools.partial(take, i, root, rel) if on_found is not None else None
                        entries = await sess.listing(remote_join(root, rel), streamed)
                        if streamed is None:
                            take(i, root, rel, entries)
                    except ERRORS as exc:
                        if lost_before(sess, begun, exc) and lost < LOST_AGAIN:
                            todo.append((i, root, rel, lost + 1))  # (broke before its listing began)
                        else:
                            self.fail(remote_join(root, rel), f"cannot list: {exc}")
                        if broken(exc):  # (its directories are the others', or this lister's next one's)
                            sess, dead = None, sess
                            holding -= 1
                    finally:
                        pending -= 1
                        if not todo and not pending and not ended.done():
                            ended.set_result(None)
                        wake.set()
                    if dead is not None:
                        await self.drop(dead)
            finally:
                if sess is not None:
                    holding -= 1
                    wake.set()  # (a lister waiting for this one's end)
                    if sess.ctl.lost:
                        await self.drop(sess)  # (broken: not a worker's to take)
                    else:
                        self.spare.append(sess)

        n = min(max(1, self.allowed), max(1, len(roots)) * WALK_LISTERS)
        # spare and prefetched sessions idle while the walk runs, also when it
        # runs before any file moves (--delete): kept alive (DATASETS.md#idle)
        idle = asyncio.ensure_future(self._keep_idle_alive())
        try:
            results = await asyncio.gather(*(lister() for _ in range(n)), return_exceptions=True)
        finally:
            idle.cancel()
        self.spare.extend(given)  # (no directory was listed)
        await self.trim_spare()
        errors = [r for r in results if isinstance(r, BaseException)]
        for exc in errors:
            if not isinstance(exc, ERRORS) or not listed:
                raise exc  # (a bug, a cancel; or no session was had at all)
        for _i, root, rel, _ in todo:  # (every lister's session broke, none could be opened)
            self.fail(remote_join(root, rel), f"cannot list: {errors[0] if errors else 'no session'}")
        return trees

    async def _keep_idle_alive(self) -> None:
        for _ in range(10 ** 7):  # bounded: cancelled when the walk ends
            await asyncio.sleep(KEEPALIVE)
            for sess in self.idle_sessions():
                keep_alive(sess)

    # -- running ------------------------------------------------------------------------
    def enqueue(self, i: int, p: Plan) -> None:
        """Planned files into the queue, which pop() takes largest first
        (the longest-processing-time rule: the job ends soonest), equal
        sizes in planned order."""
        new = [Item(i, t) for t in p.transfers] + [Item(i, t, check=True) for t in p.checks]
        if self.gave_up is not None:  # (found by a walk that outlived every session)
            for item in new:
                self.fail(self.paths(item)[1], f"not transferred: {self.gave_up}")
            return
        for item in new:
            item.order, self._planned = self._planned, self._planned + 1
        self.queue.extend(new)
        self.queue.sort(key=lambda it: (it.t.size or 0, -it.order))
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
        """(remote, local) of an item."""
        s = self.sources[item.src]
        if s.kind == FILE:
            return s.remote, s.local
        return remote_join(s.remote, item.t.rel), local_path(s.local, item.t.rel)

    async def run_queue(self, worker_fn) -> None:
        self._worker_fn = worker_fn
        monitor = asyncio.ensure_future(self.monitor())
        try:
            self.spawn(worker_fn)
            while (self.workers or self.walking) and not self.result.stopped:
                if not self.workers:
                    # the walk's sessions are all the server took: the files wait for them
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
                                self.fail(self.paths(item)[1], f"not transferred: {exc}")
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

    def moved_now(self) -> int:
        running = list(self.active.values()) + [d for _, d in self.big.values()]
        return self.done_bytes + sum(getattr(x, "moved", 0) for x in running)

    async def monitor(self) -> None:
        """The bar every 0.2 s; the fleet controller every few RTTs."""
        last_t, last_b = time.monotonic(), self.moved_now()
        fleet_t, fleet_b = last_t, last_b
        kept = last_t
        rate = 0.0
        for _ in range(10 ** 7):  # bounded: cancelled when the queue is done
            await asyncio.sleep(0.2)
            now, moved = time.monotonic(), self.moved_now()
            rate = 0.7 * rate + 0.3 * (moved - last_b) / max(now - last_t, 1e-6)
            last_t, last_b = now, moved
            if now - kept >= KEEPALIVE:
                kept = now
                for sess in self.idle_sessions():
                    keep_alive(sess)
            drivers = list(self.active.values()) + [d for _, d in self.big.values()]
            samples = [x for d in drivers for x in _samples(d)]
            rtts = [x.rtt for x in samples if x.rtt]
            if rtts:
                self.rtt = min(rtts)  # the data connections' own measure (TCP_INFO)
            if now - fleet_t >= self.fleet.interval(self.rtt):
                self.fleet.note_rtt(self.rtt)
                change = self.fleet.update((moved - fleet_b) / (now - fleet_t), samples, self.work(moved))
                fleet_t, fleet_b = now, moved
                if change is not None:
                    self.apply(change)
            self.view.update(files_done=self.files_done, files_total=self.files_total, done=moved,
                             total=self.bytes_total, rate_bps=rate * 8, sessions=self.live, rtt=self.rtt)

    def work(self, moved: int) -> Work:
        big_left: dict[Hashable, int] = {k: max(0, (item.t.size or 0) - getattr(d, "moved", 0))
                                         for k, (item, d) in self.big.items()}
        return Work(len(self.queue), sum(it.t.size or 0 for it in self.queue), big_left,
                    max(0, self.bytes_total - moved))

    def apply(self, change: Change) -> None:
        if change.kind is Kind.SESSION:
            self.allowed = max(1, self.fleet.sessions)
            self.spawn(self._worker_fn)  # more sessions now; fewer: workers past the count stop
            return
        entry = self.big.get(change.file) if isinstance(change.file, int) else None
        driver = entry[1] if entry is not None else None
        ok = driver is not None and (driver.add_stream() if change.delta > 0  # type: ignore[attr-defined]
                                     else driver.remove_stream())  # type: ignore[attr-defined]
        if not ok:
            self.fleet.refused(change)

    def big_started(self, item: Item, first: int | None = None) -> int:
        """A big file starts on sessions of its own: its first streams
        (``first``: what -P auto would start with on this path)."""
        return self.fleet.start_file(id(item), first)

    def big_running(self, item: Item, driver: object | None) -> None:
        """``driver``: the file's parallel transfer; None: it has ended."""
        if driver is None:
            self.big.pop(id(item), None)
            self.fleet.end_file(id(item))
        else:
            self.big[id(item)] = (item, driver)

    def show(self) -> None:
        """The bar's last state: the job's mean rate and most sessions."""
        seconds = time.monotonic() - self.started
        self.view.update(files_done=self.files_done, files_total=self.files_total, done=self.moved_now(),
                         total=self.bytes_total, rate_bps=self.moved_now() * 8 / max(seconds, 1e-6),
                         sessions=self.result.sessions_max, rtt=self.rtt)

    def finished(self, item: Item, outcome: Outcome) -> None:
        self.files_done += 1
        if outcome.result is not None:
            self.done_bytes += outcome.result.bytes
        self.record(outcome)

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
        self.finished(item, Outcome(self.paths(item)[1], "failed", error=str(exc)))


def check_cancelled() -> None:
    """Python 3.11's wait_for returns a result that arrived together with
    a cancel and drops the cancel (gh-86296, fixed in 3.12); the task
    still counts it, so a worker stops here on Ctrl-C."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def broken(exc: BaseException) -> bool:
    """The session is unusable after this: the connection is gone, or the
    server said it closes it (421 answers any command then: RFC 959 sec. 4.2)."""
    if not isinstance(exc, (FTPError, asyncio.TimeoutError)):
        return False
    reply = getattr(exc, "reply", None)
    return reply is None or reply.code == 421


def lost_before(sess: RemoteSession, begun: int, exc: BaseException) -> bool:
    """The session was lost (closed, or a 421) before the server started
    the transfer or listing asked for: no 1yz since it had ``begun``
    (RemoteSession.transfers).  A data connection refused on a live
    session is the file's own failure."""
    reply = getattr(exc, "reply", None)
    closed = sess.ctl.lost or (reply is not None and reply.code == 421)
    return broken(exc) and closed and sess.transfers == begun


def keep_alive(sess: RemoteSession) -> None:
    """A NOOP on an idle session (RFC 959 sec. 4.1.3), so the server's
    idle timeout does not close it; only while no reply is awaited on it:
    never beside a transfer (on a MODE E session, nor between the
    commands of one)."""
    ctl = sess.ctl
    if ctl.lost or ctl.router.pending:
        return
    try:
        ctl.start("NOOP")  # (its reply is paired and dropped: replies come in order)
    except FTPError:
        pass


async def idle_wait(event: asyncio.Event, sess: RemoteSession | None) -> None:
    """Until ``event`` is set; ``sess``, idle meanwhile, sends a NOOP
    every KEEPALIVE s (DATASETS.md#idle)."""
    for _ in range(10 ** 7):  # bounded: the event comes with the walk's end
        if sess is None or sess.ctl.lost:
            await event.wait()
            return
        try:
            await asyncio.wait_for(event.wait(), KEEPALIVE)
            return
        except TimeoutError:
            keep_alive(sess)


async def verify(sess: RemoteSession, remote: str, local: str) -> str:
    """--verify in a job: the file's SHA-256 here equals the server's (client/verify.py)."""
    return await sha256check.verify(sess.ctl, remote, local)


async def same_digest(sess: RemoteSession, remote: str, local: str) -> bool:
    """--checksum in a job: both copies have the same SHA-256 (client/verify.py)."""
    return await sha256check.same_digest(sess.ctl, remote, local)




def _samples(driver: object) -> list[StreamSample]:
    """The data connections of a running transfer, for the fleet controller."""
    samples = getattr(driver, "samples", None)
    if samples is not None:
        return samples()
    tuner = getattr(driver, "tuner", None)
    if tuner is None:
        return []
    return [StreamSample(tuner.last_rtt, tuner.stats.rtt_min, tuner.stats.retransmits)]
