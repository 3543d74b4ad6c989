"""Dataset jobs: `drsftp get -r`, `put -r`, several sources in one call,
`--sync`.  Walk the source (and the destination), plan (drsftp.client.plan),
then run the plan on N sessions sharing one queue of files (-c N, or -c
auto: drsftp.client.concurrency).  A file that fails is reported and
skipped; the rest go on; the job's exit code says how many failed.

Every local name is built from checked components (drsftp.ftp.safepath):
nothing a server lists can make the client write outside DEST.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import stat as statmod
import time
from dataclasses import dataclass, field, replace

from ..ftp.listing import DIR, FILE, LINK, Entry
from ..ftp.safepath import UnsafePath, check_name, local_path, remote_join
from ..ftp.session import FTPLocation
from .concurrency import AutoConcurrency
from .control import FTPError
from .jobview import JobView
from .plan import Plan, Rel, Stat, Transfer, plan
from .progress import human_bits, human_bytes
from .remote import RemoteSession, _Retry
from .transfer import TransferOptions, TransferResult

MAX_DEPTH = 256  # directory levels below a source: deeper is a loop or a hostile server
AUTO_INTERVAL = 1.0  # seconds between -c auto's goodput measurements
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
            r = self.result.as_dict()
            r.pop("timeline", None)
            d.update(r, path=self.path, remote=self.result.path)
        return d


@dataclass
class JobResult:
    direction: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    sessions_max: int = 0

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
class _Item:
    src: int  # index into the job's sources
    t: Transfer
    check: bool = False  # --checksum: compare digests first
    tries: int = 0


class Job:
    def __init__(self, direction: str, loc: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> None:
        self.direction, self.loc, self.jopts = direction, loc, jopts
        self.topts = replace(topts, progress=False)
        self.result = JobResult(direction)
        self.view = JobView(direction, jopts.progress, jopts.verbose)
        self.sources: list[Source] = []
        self.queue: list[_Item] = []
        self.active: dict[int, object] = {}  # worker -> its running _Transfer
        self.done_bytes = 0
        self.files_total = 0
        self.files_done = 0
        self.bytes_total = 0
        self.allowed = jopts.sessions or 4
        self.auto = AutoConcurrency() if jopts.sessions is None else None
        self.workers: dict[int, asyncio.Task] = {}
        self.spare: list[RemoteSession] = []
        self.rtt: float | None = None
        self.started = time.monotonic()  # the job's time counts its walk and plan

    # -- sessions ---------------------------------------------------------------
    async def session(self) -> RemoteSession:
        if self.spare:
            return self.spare.pop()
        sess = await RemoteSession.open(self.loc, self.topts)
        sess.pipeline = self.jopts.pipeline
        self.rtt = self.rtt or sess.rtt
        return sess

    async def close_spare(self) -> None:
        await asyncio.gather(*(s.close() for s in self.spare), return_exceptions=True)
        self.spare.clear()

    def record(self, outcome: Outcome) -> None:
        self.result.outcomes.append(outcome)
        r = outcome.result
        self.view.file_line(outcome.status, outcome.path, r.bytes if r else 0, r.seconds if r else 0.0,
                            outcome.error)

    def fail(self, path: str, error: str) -> None:
        self.record(Outcome(path, "failed", error=error))

    # -- walking ----------------------------------------------------------------------
    async def walk_remote(self, roots: list[tuple[int, str]]) -> dict[int, dict[Rel, Stat]]:
        """Every source directory's tree, listed on up to N sessions at once."""
        trees: dict[int, dict[Rel, Stat]] = {i: {} for i, _ in roots}
        todo: list[tuple[int, str, Rel]] = [(i, path, ()) for i, path in roots]
        seen: set[str] = set()
        pending = 0
        wake = asyncio.Event()

        async def lister() -> None:
            nonlocal pending
            sess = await self.session()
            try:
                while todo or pending:
                    _check_cancelled()
                    if not todo:
                        wake.clear()
                        await wake.wait()
                        continue
                    i, root, rel = todo.pop()
                    pending += 1
                    try:
                        entries = await sess.listing(remote_join(root, rel))
                    except ERRORS as exc:
                        self.fail(remote_join(root, rel), f"cannot list: {exc}")
                        entries = []
                        if isinstance(exc, FTPError) and exc.reply is None:
                            raise
                    finally:
                        pending -= 1
                        wake.set()
                    for e in entries:
                        try:
                            child = rel + (check_name(e.name),)
                        except UnsafePath as exc:
                            self.fail(f"{root}/{'/'.join(rel)}", f"server sent {exc}; skipped")
                            continue
                        if child in trees[i]:
                            continue  # a name listed twice
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
                            trees[i][child] = Stat(is_dir=True)
                            todo.append((i, root, child))
                            wake.set()
                        elif e.type == FILE:
                            trees[i][child] = Stat(e.size, e.mtime)
                        elif self.jopts.verbose:
                            what = "symlink" if e.type == LINK else "special file"
                            self.view.file_line("skipped", remote_join(root, child), 0, 0, f"{what}; skipped")
            finally:
                self.spare.append(sess)

        n = min(max(1, self.allowed), max(1, len(roots)) * 4)
        results = await asyncio.gather(*(lister() for _ in range(n)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) == n:
            raise errors[0]
        return trees

    # -- running ------------------------------------------------------------------------
    def enqueue(self, i: int, p: Plan) -> None:
        self.queue.extend(_Item(i, t) for t in p.transfers)
        self.queue.extend(_Item(i, t, check=True) for t in p.checks)
        self.files_total += len(p.transfers) + len(p.checks)
        self.bytes_total += p.total_bytes + sum(t.size or 0 for t in p.checks)

    def paths(self, item: _Item) -> tuple[str, str]:
        """(remote, local) of an item."""
        s = self.sources[item.src]
        if s.kind == FILE:
            return s.remote, s.local
        return remote_join(s.remote, item.t.rel), local_path(s.local, item.t.rel)

    async def run_queue(self, worker_fn) -> None:
        self.queue.reverse()  # pop() from the end: files in planned order
        self._worker_fn = worker_fn
        monitor = asyncio.ensure_future(self.monitor())
        try:
            self.spawn(worker_fn)
            while self.workers:
                done, _ = await asyncio.wait(list(self.workers.values()), return_when=asyncio.FIRST_COMPLETED)
                for wid in [w for w, t in self.workers.items() if t in done]:
                    task = self.workers.pop(wid)
                    if not task.cancelled() and task.exception() is not None and self.queue:
                        exc = task.exception()
                        if not self.workers:
                            for item in reversed(self.queue):
                                self.fail(self.paths(item)[1], f"not transferred: {exc}")
                            self.queue.clear()
                self.spawn(worker_fn)
        finally:
            monitor.cancel()
            self.result.seconds = time.monotonic() - self.started
            self.show()

    def spawn(self, worker_fn) -> None:
        want = min(self.allowed, len(self.queue) + len(self.workers))
        wid = 0
        while len(self.workers) < want:
            while wid in self.workers:
                wid += 1
            self.workers[wid] = asyncio.ensure_future(worker_fn(wid))
        self.result.sessions_max = max(self.result.sessions_max, len(self.workers))

    def may_run(self, wid: int) -> bool:
        return wid < self.allowed

    def moved_now(self) -> int:
        return self.done_bytes + sum(getattr(x, "moved", 0) for x in self.active.values())

    async def monitor(self) -> None:
        last_t, last_b = time.monotonic(), self.moved_now()
        next_auto = last_t + AUTO_INTERVAL
        rate = 0.0
        for _ in range(10 ** 7):  # bounded: cancelled when the queue is done
            await asyncio.sleep(0.2)
            now, moved = time.monotonic(), self.moved_now()
            rate = 0.7 * rate + 0.3 * (moved - last_b) / max(now - last_t, 1e-6)
            if self.auto is not None and now >= next_auto:
                self.allowed = self.auto.update(rate)
                next_auto = now + AUTO_INTERVAL
                self.spawn(self._worker_fn)  # more sessions now; fewer: workers past the count stop
            last_t, last_b = now, moved
            rtts = [x.tuner.last_rtt for x in self.active.values() if getattr(x, "tuner", None) and x.tuner.last_rtt]
            if rtts:
                self.rtt = min(rtts)  # the data connections' own measure (TCP_INFO)
            self.view.update(files_done=self.files_done, files_total=self.files_total, done=moved,
                             total=self.bytes_total, rate_bps=rate * 8, sessions=len(self.workers), rtt=self.rtt)

    def show(self) -> None:
        """The bar's last state: the job's mean rate and most sessions."""
        seconds = time.monotonic() - self.started
        self.view.update(files_done=self.files_done, files_total=self.files_total, done=self.moved_now(),
                         total=self.bytes_total, rate_bps=self.moved_now() * 8 / max(seconds, 1e-6),
                         sessions=self.result.sessions_max, rtt=self.rtt)

    def finished(self, item: _Item, outcome: Outcome) -> None:
        self.files_done += 1
        if outcome.result is not None:
            self.done_bytes += outcome.result.bytes
        self.record(outcome)

    def retry_or_fail(self, item: _Item, exc: BaseException) -> None:
        transient = isinstance(exc, FTPError) and exc.transient
        if transient and item.tries < self.jopts.retries:
            item.tries += 1
            self.queue.append(item)
            return
        self.finished(item, Outcome(self.paths(item)[1], "failed", error=str(exc)))


def _check_cancelled() -> None:
    """Python 3.11's wait_for returns a result that arrived together with
    a cancel and drops the cancel (gh-86296, fixed in 3.12); the task
    still counts it, so a worker stops here on Ctrl-C."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _broken(exc: BaseException) -> bool:
    """The session is unusable after this (the connection is gone)."""
    return isinstance(exc, (FTPError, asyncio.TimeoutError)) and getattr(exc, "reply", None) is None


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


async def remote_sha256(sess: RemoteSession, path: str) -> str | None:
    """The server's SHA-256 of a file: HASH (draft-bryan-ftpext-hash), or
    GridFTP's CKSM (GFD.20 era; ``213 <hex>``) where HASH is missing."""
    if "HASH" not in sess.ctl.features:
        if "CKSM" not in sess.ctl.features:
            return None
        reply = await sess.ctl.command(f"CKSM SHA256 0 -1 {path}", timeout=3600)
        digest = reply.first.strip().lower()
        ok = reply.code == 213 and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
        return digest if ok else None
    await sess.ctl.command("OPTS HASH SHA-256")
    reply = await sess.ctl.command(f"HASH {path}", timeout=3600)
    words = reply.first.split(" ", 3)
    if reply.code != 213 or len(words) < 3 or words[0].upper() != "SHA-256":
        return None
    return words[2].lower()


async def _same_digest(sess: RemoteSession, remote: str, local: str) -> bool:
    theirs = await remote_sha256(sess, remote)
    if theirs is None:
        raise FTPError("--checksum: the server offers no SHA-256 (HASH or CKSM)", transient=False)
    return theirs == await asyncio.to_thread(sha256_file, local)


# -- get --------------------------------------------------------------------------------
def local_tree(root: str) -> tuple[dict[Rel, Stat], dict[Rel, int]]:
    """What a local directory holds (symlinks are not followed), and the
    sizes of unfinished downloads (NAME.part)."""
    tree: dict[Rel, Stat] = {}
    parts: dict[Rel, int] = {}
    if not os.path.isdir(root):
        return tree, parts
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = tuple(p for p in os.path.relpath(dirpath, root).split(os.sep) if p != ".")
        for d in dirnames:
            tree[rel_dir + (d,)] = Stat(is_dir=True)
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if not statmod.S_ISREG(st.st_mode):
                continue
            if name.endswith(".part"):
                parts[rel_dir + (name[:-5],)] = st.st_size
            tree[rel_dir + (name,)] = Stat(st.st_size, st.st_mtime)
    return tree, parts


async def run_get(urls: list[tuple[FTPLocation, bool]], dest: str, topts: TransferOptions,
                  jopts: JobOptions) -> JobResult:
    """``urls``: (location, contents) for each source, all on one server;
    ``contents`` (a trailing slash) copies a directory's contents into
    DEST rather than DEST/NAME."""
    loc0 = urls[0][0]
    job = Job("get", loc0, topts, jopts)
    try:
        sess = await job.session()
        dest_is_dir = os.path.isdir(dest) or len(urls) > 1 or dest.endswith("/")
        for loc, contents in urls:
            entry = await sess.stat(loc.path)
            if entry is None:
                job.fail(loc.path, "no such file or directory on the server")
                continue
            base = posixpath.basename(loc.path.rstrip("/"))
            name = check_name(base) if base not in ("", ".") else "ftp-root"
            if entry.type == DIR and not jopts.recursive:
                job.fail(loc.path, "is a directory (use -r)")
                continue
            if entry.type == DIR:
                local = dest if contents or not os.path.isdir(dest) and len(urls) == 1 else os.path.join(dest, name)
            else:
                local = os.path.join(dest, name) if dest_is_dir else dest
            job.sources.append(Source(loc.path, local, DIR if entry.type == DIR else FILE, entry))
        job.spare.append(sess)
        if dest_is_dir and job.sources:
            os.makedirs(dest, exist_ok=True)
        dirs = [(i, s.remote) for i, s in enumerate(job.sources) if s.kind == DIR]
        trees = await job.walk_remote(dirs) if dirs else {}
        for i, s in enumerate(job.sources):
            if s.kind == DIR:
                source = trees[i]
                have, partial = local_tree(s.local)
                os.makedirs(s.local, exist_ok=True)
            else:
                e = s.entry
                source = {(): Stat(e.size, e.mtime)}
                have, partial = {}, {}
                if os.path.lexists(s.local):
                    st = os.lstat(s.local)
                    have[()] = Stat(st.st_size, st.st_mtime, statmod.S_ISDIR(st.st_mode))
                if os.path.isfile(s.local + ".part"):
                    partial[()] = os.path.getsize(s.local + ".part")
            p = plan(source, have, sync=jopts.sync, checksum=jopts.checksum, delete=jopts.delete,
                     resume=jopts.resume, partial=partial)
            _apply_local(job, s, p)
            job.enqueue(i, p)
        await job.run_queue(lambda wid: _get_worker(job, wid))
    finally:
        job.view.close()
        await job.close_spare()
    return job.result


def _apply_local(job: Job, s: Source, p: Plan) -> None:
    for rel, why in p.conflicts:
        job.fail(local_path(s.local, rel), why)
    for rel in p.mkdirs:
        os.makedirs(local_path(s.local, rel), exist_ok=True)
    for rel in p.skipped:
        job.record(Outcome(local_path(s.local, rel) if rel else s.local, "skipped"))
    for rel in p.deletes:
        path = local_path(s.local, rel)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
            job.record(Outcome(path, "deleted"))
        except OSError as exc:
            job.fail(path, f"cannot delete: {exc.strerror or exc}")


async def _get_worker(job: Job, wid: int) -> None:
    """One session's loop.  The next file's commands go out when the
    current file's 226 arrives: the server has ended the transfer (it
    answers once the last data is in its socket), while the last round
    trips of data are still on their way to us (remote.py)."""
    sess: RemoteSession | None = None
    ahead: tuple[_Item, object] | None = None  # the next file, its commands sent

    def lines_of(item: _Item) -> tuple[str, ...]:
        remote = job.paths(item)[0]
        off = item.t.resume_from
        return ((f"REST {off}",) if off else ()) + (f"RETR {remote}",)

    def send_ahead(reply) -> None:
        nonlocal ahead
        if ahead is not None or reply.code != 226 or not job.jopts.pipeline or not job.may_run(wid):
            return
        if not job.queue or job.queue[-1].check or sess is None or sess.ctl._closed:
            return
        item = job.queue.pop()
        try:
            ahead = (item, sess.start(*lines_of(item)))
        except ERRORS:
            job.queue.append(item)

    try:
        while True:
            _check_cancelled()
            if ahead is not None:
                (item, st), ahead = ahead, None
            else:
                item = job.queue.pop() if job.queue and job.may_run(wid) else None
                if item is None:
                    break
                st = None
            if sess is None:
                try:
                    sess = await job.session()
                except ERRORS as exc:
                    job.queue.append(item)
                    raise FTPError(f"cannot open a session: {exc}") from exc
            remote, local = job.paths(item)
            try:
                if item.check:
                    if await _same_digest(sess, remote, local):
                        job.finished(item, Outcome(local, "skipped"))
                        continue
                    item.check = False
                lines = lines_of(item)
                for _attempt in range(2):
                    st = st or sess.start(*lines)
                    try:
                        t = await sess.get_data(st, lines, remote, local, item.t.size, item.t.resume_from,
                                                on_xfer=lambda x: job.active.__setitem__(wid, x),
                                                on_final=send_ahead)
                    except _Retry:
                        st = None  # its 503s are read: send the pair again
                        continue
                    break
                else:
                    raise FTPError(f"RETR {remote}: the server kept answering 503", transient=False)
                job.active.pop(wid, None)
                _check_cancelled()
                job.finished(item, Outcome(local, "ok", await t.finish(item.t.mtime)))
            except ERRORS as exc:
                job.active.pop(wid, None)
                job.retry_or_fail(item, exc)
                if _broken(exc):
                    if ahead is not None:
                        job.queue.append(ahead[0])
                        ahead = None
                    await sess.close()
                    sess = None
    finally:
        job.active.pop(wid, None)
        if ahead is not None:
            job.queue.append(ahead[0])
        if sess is not None and not sess.ctl._closed:
            job.spare.append(sess)


# -- put --------------------------------------------------------------------------------
def _sendable(name: str) -> bool:
    try:
        check_name(name)
    except UnsafePath:
        return False
    return True


def local_source_tree(root: str, report) -> dict[Rel, Stat]:
    """A local directory to upload.  A symlink is followed only to a file
    inside ``root``; others are reported and left out."""
    tree: dict[Rel, Stat] = {}
    real_root = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = tuple(p for p in os.path.relpath(dirpath, root).split(os.sep) if p != ".")
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if not _sendable(d):
                dirnames.remove(d)
                report(full, "name cannot be sent (not UTF-8, or CR/LF); skipped")
                continue
            if os.path.islink(full):
                dirnames.remove(d)
                report(full, "symlink to a directory; skipped")
                continue
            tree[rel_dir + (d,)] = Stat(is_dir=True)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not _sendable(name):
                report(full, "name cannot be sent (not UTF-8, or CR/LF); skipped")
                continue
            try:
                if os.path.islink(full):
                    real = os.path.realpath(full)
                    if not real.startswith(real_root + os.sep):
                        report(full, "symlink out of the source tree; skipped")
                        continue
                st = os.stat(full)
            except OSError as exc:
                report(full, f"cannot read: {exc.strerror or exc}")
                continue
            if statmod.S_ISREG(st.st_mode):
                tree[rel_dir + (name,)] = Stat(st.st_size, st.st_mtime)
    return tree


async def run_put(srcs: list[str], loc: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> JobResult:
    job = Job("put", loc, topts, jopts)
    try:
        sess = await job.session()
        base = loc.path
        target = await sess.stat(base)
        base_is_dir = (target is not None and target.type == DIR) or len(srcs) > 1 or base.endswith("/")
        for src in srcs:
            contents = src.endswith("/")
            name = check_name(os.path.basename(os.path.normpath(src)))
            if os.path.isdir(src):
                if not jopts.recursive:
                    job.fail(src, "is a directory (use -r)")
                    continue
                remote = base if contents or (target is None and len(srcs) == 1) else remote_join(base, (name,))
                job.sources.append(Source(remote, src, DIR))
            elif os.path.isfile(src):
                remote = remote_join(base, (name,)) if base_is_dir else base
                job.sources.append(Source(remote, src, FILE))
            else:
                job.fail(src, "no such file or directory")
        if base_is_dir and target is None and job.sources:
            reply = await sess.ctl.command(f"MKD {base.rstrip('/')}")
            if reply.code != 257:
                raise FTPError(f"cannot make {base}: {reply}", reply)
        # what the server holds already, for --sync and --delete
        have: dict[int, dict[Rel, Stat]] = {}
        walk = []
        for i, s in enumerate(job.sources):
            e = await sess.stat(s.remote)
            if s.kind == DIR and e is not None and e.type == DIR and (jopts.sync or jopts.delete):
                walk.append((i, s.remote))
            elif e is not None:
                have[i] = {(): Stat(e.size, e.mtime, e.type == DIR)}
            s.entry = e
        job.spare.append(sess)
        if walk:
            have.update(await job.walk_remote(walk))
        sess = await job.session()
        for i, s in enumerate(job.sources):
            if s.kind == DIR:
                source = local_source_tree(s.local, job.fail)
                dest = have.get(i, {}) if s.entry is not None and s.entry.type == DIR else {}
                p = plan(source, dest, sync=jopts.sync, checksum=jopts.checksum, delete=jopts.delete)
                if s.entry is None:
                    p.mkdirs.insert(0, ())
            else:
                st = os.stat(s.local)
                p = plan({(): Stat(st.st_size, st.st_mtime)}, have.get(i, {}), sync=jopts.sync,
                         checksum=jopts.checksum)
            await _apply_remote(job, sess, s, p)
            job.enqueue(i, p)
        job.spare.append(sess)
        await job.run_queue(lambda wid: _put_worker(job, wid))
    finally:
        job.view.close()
        await job.close_spare()
    return job.result


async def _apply_remote(job: Job, sess: RemoteSession, s: Source, p: Plan) -> None:
    """Directories made and entries deleted on the server, the commands
    pipelined (their replies come in order, RFC 959)."""
    for rel, why in p.conflicts:
        job.fail(remote_join(s.remote, rel), why)
    mkd = [(rel, sess.ctl.start(f"MKD {remote_join(s.remote, rel)}")) for rel in p.mkdirs]
    for rel, token in mkd:
        reply = await sess.ctl._wait(token.final, 60)
        if reply.code != 257:
            job.fail(remote_join(s.remote, rel), f"cannot make directory: {reply}")
    for rel in p.skipped:
        job.record(Outcome(remote_join(s.remote, rel), "skipped"))
    dels = []
    for rel in p.deletes:
        path = remote_join(s.remote, rel)
        dels.append((path, sess.ctl.start(f"DELE {path}")))
    for path, token in dels:
        reply = await sess.ctl._wait(token.final, 60)
        if reply.code == 550:
            reply = await sess.ctl.command(f"RMD {path}")  # a directory (its children went first)
        if reply.code in (250, 200):
            job.record(Outcome(path, "deleted"))
        else:
            job.fail(path, f"cannot delete: {reply}")


async def _put_worker(job: Job, wid: int) -> None:
    sess: RemoteSession | None = None
    try:
        while job.may_run(wid):
            _check_cancelled()
            item = job.queue.pop() if job.queue else None
            if item is None:
                break
            if sess is None:
                try:
                    sess = await job.session()
                except ERRORS as exc:
                    job.queue.append(item)
                    raise FTPError(f"cannot open a session: {exc}") from exc
            s = job.sources[item.src]
            local = s.local if s.kind == FILE else local_path(s.local, item.t.rel)
            remote = s.remote if s.kind == FILE else remote_join(s.remote, item.t.rel)
            try:
                if item.check and await _same_digest(sess, remote, local):
                    job.finished(item, Outcome(remote, "skipped"))
                    continue
                with await asyncio.to_thread(open, local, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    res = await sess.put_file(local, remote, f, size, 0, os.fstat(f.fileno()).st_mtime,
                                              on_xfer=lambda x: job.active.__setitem__(wid, x))
                job.active.pop(wid, None)
                job.finished(item, Outcome(remote, "ok", res))
            except ERRORS as exc:
                job.active.pop(wid, None)
                job.retry_or_fail(item, exc)
                if _broken(exc):
                    await sess.close()
                    sess = None
    finally:
        job.active.pop(wid, None)
        if sess is not None and not sess.ctl._closed:
            job.spare.append(sess)


# -- ls ---------------------------------------------------------------------------------
async def run_ls(loc: FTPLocation, topts: TransferOptions) -> list[Entry]:
    sess = await RemoteSession.open(loc, topts)
    try:
        entry = await sess.stat(loc.path)
        if entry is None:
            raise FTPError(f"{loc.path}: no such file or directory on the server", transient=False)
        if entry.type != DIR:
            return [replace(entry, name=posixpath.basename(loc.path))]
        return sorted(await sess.listing(loc.path), key=lambda e: e.name)
    finally:
        await sess.close()
