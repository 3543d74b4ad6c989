"""Dataset jobs: `drsftp get -r`, `put -r`, several sources in one call,
`--sync`, and `drsftp ls` (docs/DATASETS.md, "What a job does").  Walk the
source (and the destination: drsftp.client.trees.walk, localtree), plan
(drsftp.client.trees.plan), then run the plan on the job's sessions
(drsftp.client.trees.job.treejob), a worker each.

Every local name is built from checked components (drsftp.ftp.safepath):
nothing a server lists can make the client write outside DEST
(DATASETS.md, "Failures and bad input").
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import stat as statmod
from dataclasses import replace

from ...ftp.listing import DIR, FILE, Entry
from ...ftp.partname import download_part
from ...ftp.replies import Reply
from ...ftp.safepath import check_name, local_path, remote_join
from ...ftp.url import FTPLocation
from ..session.control import FTPError, os_reason
from ..streams.rangeplan import held_prefix
from ..transfer.getput import TransferOptions
from ..transfer.targets import make_remote_dirs
from .cached.worker import cached_ok, run_cached
from .job.result import FileOutcome, JobResult
from .job.sessions import ERRORS, check_cancelled
from .job.treejob import Item, JobOptions, Source, TreeJob, same_digest, verify
from .localtree import local_source_dirs, local_source_tree, local_tree
from .plan import Plan, Rel, Stat, plan
from .remote import PairRefused, RemoteSession, Started
from .walk import MAX_DEPTH

KEPT = "not read whole: --delete deletes nothing here or below"
__all__ = ["MAX_DEPTH", "JobOptions", "JobResult", "TreeJob", "run_get", "run_ls", "run_put"]


async def run_get(urls: list[tuple[FTPLocation, bool]], dest: str, topts: TransferOptions,
                  jopts: JobOptions) -> JobResult:
    """``urls``: (location, contents) for each source, all on one server;
    ``contents`` (a trailing slash) copies a directory's contents into
    DEST rather than DEST/NAME."""
    job = TreeJob("get", urls[0][0], topts, jopts)
    return await job.run_within_max_time(_get_job(job, urls, dest))


async def _get_job(job: TreeJob, urls: list[tuple[FTPLocation, bool]], dest: str) -> None:
    loc0, jopts = urls[0][0], job.jopts
    try:
        # one source with -r: most likely a directory, listed with the log-in
        listing = remote_join(loc0.path, ()) if jopts.recursive and len(urls) == 1 else None
        sess = await job.first_session(tuple(f"MLST {loc.path}" for loc, _ in urls), listing)
        job.prefetch(min(job.allowed, len(urls)) - 1)  # (more as files are found: TreeJob.spawn)
        dest_is_dir = os.path.isdir(dest) or len(urls) > 1 or dest.endswith("/")
        for loc, contents in urls:
            entry = await sess.stat(loc.path)
            if entry is None:
                job.report.fail(loc.path, "no such file or directory on the server")
                continue
            base = posixpath.basename(loc.path.rstrip("/"))
            name = check_name(base) if base not in ("", ".") else "ftp-root"
            if entry.type == DIR and not jopts.recursive:
                job.report.fail(loc.path, "is a directory (use -r)")
                continue
            if entry.type == DIR:
                local = dest if contents or (not os.path.isdir(dest) and len(urls) == 1) else os.path.join(dest, name)
            else:
                local = os.path.join(dest, name) if dest_is_dir else dest
            job.sources.append(Source(loc.path, local, DIR if entry.type == DIR else FILE, entry))
        if dest_is_dir and job.sources:
            os.makedirs(dest, exist_ok=True)
        dirs = [(i, s.remote) for i, s in enumerate(job.sources) if s.kind == DIR]
        if not dirs:
            await sess.settle_early()
        locals_: dict[int, tuple[dict, dict]] = {}
        for i, s in enumerate(job.sources):
            if s.kind == DIR:
                locals_[i] = local_tree(s.local)
                os.makedirs(s.local, exist_ok=True)
            else:
                _plan_file(job, i, s)

        def found(i: int, source: dict) -> None:
            """Entries as their listing lines arrive (inside the listing's
            data callback: a local error fails these entries, not the walk)."""
            have, partial = locals_[i]
            p = plan(source, have, sync=jopts.sync, checksum=jopts.checksum, resume=jopts.resume, partial=partial)
            try:
                _apply_local(job, job.sources[i], p)
            except OSError as exc:
                for t in p.transfers + p.checks:
                    job.report.fail(local_path(job.sources[i].local, t.rel), f"cannot write here: {os_reason(exc)}")
                return
            job.enqueue(i, p)

        if dirs and not jopts.delete:
            # transfers start on the first entries while the walk goes on
            # (deletes need the whole tree: with --delete the walk goes first)
            await _run_while_walking(job, job.walk_remote(dirs, found, first=sess, paced=True),
                                     lambda wid: _get_worker(job, wid))
            return  # (an early listing left unread goes with its session's close)
        trees = await job.walk_remote(dirs, first=sess) if dirs else {}
        if not dirs:
            job.spare.append(sess)
        await sess.settle_early()
        for i, _ in dirs:
            have, partial = locals_[i]
            p = plan(trees[i], have, sync=jopts.sync, checksum=jopts.checksum, delete=jopts.delete,
                     resume=jopts.resume, partial=partial)
            _apply_local(job, job.sources[i], p)
            job.enqueue(i, p)
        await job.run_queue(lambda wid: _get_worker(job, wid))
    finally:
        job.report.view.close()
        await job.close_spare()


def _plan_file(job: TreeJob, i: int, s: Source) -> None:
    """A file source: planned against what DEST holds of it."""
    e = s.entry
    assert e is not None  # a file source carries its stat entry (run_get)
    have: dict[Rel, Stat] = {}
    partial: dict[Rel, int] = {}
    if os.path.lexists(s.local):
        st = os.lstat(s.local)
        have[()] = Stat(st.st_size, st.st_mtime, statmod.S_ISDIR(st.st_mode))
    if os.path.isfile(download_part(s.local)):  # (a -P get's part: up to its first gap)
        partial[()] = held_prefix(download_part(s.local), e.size)
    p = plan({(): Stat(e.size, e.mtime)}, have, sync=job.jopts.sync, checksum=job.jopts.checksum,
             resume=job.jopts.resume, partial=partial)
    _apply_local(job, s, p)
    job.enqueue(i, p)


def _apply_local(job: TreeJob, s: Source, p: Plan) -> None:
    for rel, why in p.conflicts:
        job.report.fail(local_path(s.local, rel), why)
    for rel in p.mkdirs:
        os.makedirs(local_path(s.local, rel), exist_ok=True)
    for rel in p.skipped:
        job.report.record(FileOutcome(local_path(s.local, rel) if rel else s.local, "skipped"))
    for rel in p.kept:
        job.report.note(local_path(s.local, rel), KEPT)
    for rel in p.deletes:
        path = local_path(s.local, rel)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
            job.report.record(FileOutcome(path, "deleted"))
        except OSError as exc:
            job.report.fail(path, f"cannot delete: {exc.strerror or exc}")


async def _get_worker(job: TreeJob, wid: int) -> None:
    """One session's loop.  The next file's commands go out when the
    current file's 226 arrives: the server has ended the transfer (it
    answers once the last data is in its socket), while the last round
    trips of data are still on their way to us (remote.py)."""
    sess: RemoteSession | None = None
    ahead: tuple[Item, Started] | None = None  # the next file, its commands sent
    item: Item | None
    st: Started | None

    def lines_of(item: Item) -> tuple[str, ...]:
        remote = job.paths(item)[0]
        off = item.t.resume_from
        return ((f"REST {off}",) if off else ()) + (f"RETR {remote}",)

    def send_ahead(reply) -> None:
        nonlocal ahead
        if ahead is not None or reply.code != 226 or not job.jopts.pipeline or not job.may_run(wid):
            return
        if job.topts.verify:
            return  # the HASH of this file goes first
        if not job.queue or job.queue[-1].check or sess is None or sess.ctl.lost:
            return
        item = job.queue.pop()
        try:
            ahead = (item, sess.start(*lines_of(item)))
        except ERRORS:
            job.requeue(item)

    try:
        while True:
            check_cancelled()
            if ahead is not None:
                (item, st), ahead = ahead, None
            else:
                item = job.queue.pop() if job.queue and job.may_run(wid) else None
                if item is None:
                    if job.walking and job.may_run(wid):
                        await job.more(sess)  # the walk is still finding files
                        continue
                    break
                st = None
                sess = await job.session_for(item, sess)
            assert sess is not None  # (a file's commands go ahead on a session: send_ahead)
            if st is None and cached_ok(job, sess):
                sess = await run_cached(job, wid, item, sess, "get")
                continue
            begun = sess.transfers
            try:
                remote, local = job.paths(item)  # (its error is this file's: reported, as any below)
                if item.check:
                    if await same_digest(sess, remote, local):
                        job.finished(item, FileOutcome(local, "skipped"))
                        continue
                    item.check = False
                lines = lines_of(item)
                for _attempt in range(2):
                    st = st or sess.start(*lines)
                    try:
                        t = await sess.get_data(st, lines, remote, local, item.t.size, item.t.resume_from,
                                                on_xfer=lambda x: job.active.__setitem__(wid, x),
                                                on_final=send_ahead)
                    except PairRefused:
                        st = None  # its 503s are read: send the pair again
                        continue
                    break
                else:
                    raise FTPError(f"RETR {remote}: the server kept answering 503", transient=False)
                job.active.pop(wid, None)
                check_cancelled()
                res = await t.finish(item.t.mtime)
                if job.topts.verify:
                    res.sha256 = await verify(sess, remote, local)
                job.finished(item, FileOutcome(local, "ok", res))
            except ERRORS as exc:
                if job.failed_on(wid, item, sess, begun, exc):
                    if ahead is not None:
                        job.requeue(ahead[0])
                        ahead = None
                    await job.drop(sess)
                    sess = None
    finally:
        job.active.pop(wid, None)
        if ahead is not None:
            job.requeue(ahead[0])
        job.give_back(sess)


async def run_put(srcs: list[str], loc: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> JobResult:
    job = TreeJob("put", loc, topts, jopts)
    return await job.run_within_max_time(_put_job(job, srcs, loc))


async def _put_job(job: TreeJob, srcs: list[str], loc: FTPLocation) -> None:
    jopts = job.jopts
    try:
        sess = await job.session()
        job.prefetch(min(job.allowed, len(srcs)) - 1)  # (more as files are planned: TreeJob.spawn)
        base = loc.path
        target = await sess.stat(base)
        base_is_dir = (target is not None and target.type == DIR) or len(srcs) > 1 or base.endswith("/")
        for src in srcs:
            contents = src.endswith("/")
            name = check_name(os.path.basename(os.path.normpath(src)))
            if os.path.isdir(src):
                if not jopts.recursive:
                    job.report.fail(src, "is a directory (use -r)")
                    continue
                remote = base if contents or (target is None and len(srcs) == 1) else remote_join(base, (name,))
                job.sources.append(Source(remote, src, DIR))
            elif os.path.isfile(src):
                remote = remote_join(base, (name,)) if base_is_dir else base
                job.sources.append(Source(remote, src, FILE))
            else:
                job.report.fail(src, "no such file or directory")
        if base_is_dir and target is None and job.sources:
            await make_remote_dirs(base, sess.stat, sess.ctl)  # (and its missing parents)
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
        if not (jopts.sync or jopts.delete):
            await _put_streamed(job, sess, have)
            return
        for i, s in enumerate(job.sources):
            if s.kind == DIR:
                source = local_source_tree(s.local, job.report.fail)
                dest = have.get(i, {}) if s.entry is not None and s.entry.type == DIR else {}
                p = plan(source, dest, sync=jopts.sync, checksum=jopts.checksum, delete=jopts.delete)
                if s.entry is None:
                    p.mkdirs.insert(0, ())
            else:
                p = _put_file_plan(job, i, s, have)
            await _apply_remote(job, sess, s, p)
            job.enqueue(i, p)
        job.spare.append(sess)
        await job.run_queue(lambda wid: _put_worker(job, wid))
    finally:
        job.report.view.close()
        await job.close_spare()


def _put_file_plan(job: TreeJob, i: int, s: Source, have: dict[int, dict[Rel, Stat]]) -> Plan:
    st = os.stat(s.local)
    return plan({(): Stat(st.st_size, st.st_mtime)}, have.get(i, {}), sync=job.jopts.sync,
                checksum=job.jopts.checksum)


async def _put_streamed(job: TreeJob, sess: RemoteSession, have: dict[int, dict[Rel, Stat]]) -> None:
    """A put without --sync or --delete (nothing of the destination to
    compare): files go while the local trees are still walked, a directory
    at a time, the walk pausing while the queue is full (treejob.JobQueue):
    no tree is held whole (docs/DATASETS.md, "Transfers start during the walk")."""
    for i, s in enumerate(job.sources):
        if s.kind != DIR:
            p = _put_file_plan(job, i, s, have)
            await _apply_remote(job, sess, s, p)
            job.enqueue(i, p)
    await _run_while_walking(job, _walk_local(job, sess, have), lambda wid: _put_worker(job, wid))


async def _walk_local(job: TreeJob, sess: RemoteSession, have: dict[int, dict[Rel, Stat]]) -> None:
    """Each directory source walked (localtree.local_source_dirs): its
    subdirectories made on the server (on ``sess``, the walk's) before their
    own files are queued; ``sess`` is the workers' at the end."""
    try:
        for i, s in enumerate(job.sources):
            if s.kind != DIR:
                continue
            dest = have.get(i, {}) if s.entry is not None and s.entry.type == DIR else {}
            first = True
            for entries in local_source_dirs(s.local, job.report.fail):
                check_cancelled()
                p = plan(entries, dest)
                if first and s.entry is None:
                    p.mkdirs.insert(0, ())
                first = False
                await _apply_remote(job, sess, s, p)
                job.enqueue(i, p)
                if job.queue.full:
                    await job.queue.wait_room()
    finally:
        job.spare.append(sess)


async def _apply_remote(job: TreeJob, sess: RemoteSession, s: Source, p: Plan) -> None:
    """Directories made and entries deleted on the server, the commands
    pipelined (their replies come in order, RFC 959)."""
    for rel, why in p.conflicts:
        job.report.fail(remote_join(s.remote, rel), why)
    made = await _pipelined(sess, [f"MKD {remote_join(s.remote, rel)}" for rel in p.mkdirs])
    for rel, reply in zip(p.mkdirs, made):
        if reply.code != 257:
            job.report.fail(remote_join(s.remote, rel), f"cannot make directory: {reply}")
    for rel in p.skipped:
        job.report.record(FileOutcome(remote_join(s.remote, rel), "skipped"))
    for rel in p.kept:
        job.report.note(remote_join(s.remote, rel), KEPT)
    paths = [remote_join(s.remote, rel) for rel in p.deletes]
    for path, reply in zip(paths, await _pipelined(sess, [f"DELE {path}" for path in paths])):
        if reply.code == 550:
            reply = await sess.ctl.command(f"RMD {path}")  # a directory (its children went first)
        if reply.code in (250, 200):
            job.report.record(FileOutcome(path, "deleted"))
        else:
            job.report.fail(path, f"cannot delete: {reply}")


async def _pipelined(sess: RemoteSession, lines: list[str]) -> list[Reply]:
    """``lines`` sent back to back, then their final replies, in order."""
    sent = [sess.ctl.send_unwaited(line) for line in lines]
    return await sess.ctl.settle([(pending, None) for pending in sent], 60)


async def _put_worker(job: TreeJob, wid: int) -> None:
    sess: RemoteSession | None = None
    try:
        while job.may_run(wid):
            check_cancelled()
            item = job.queue.pop() if job.queue else None
            if item is None:
                if job.walking:
                    await job.more(sess)  # the walk is still finding files
                    continue
                break
            sess = await job.session_for(item, sess)
            if cached_ok(job, sess):
                sess = await run_cached(job, wid, item, sess, "put")
                continue
            begun = sess.transfers
            try:
                remote, local = job.paths(item)  # (its error is this file's: reported, as any below)
                if item.check and await same_digest(sess, remote, local):
                    job.finished(item, FileOutcome(remote, "skipped"))
                    continue
                with await asyncio.to_thread(open, local, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    res = await sess.put_file(local, remote, f, size, 0, os.fstat(f.fileno()).st_mtime,
                                              on_xfer=lambda x: job.active.__setitem__(wid, x))
                job.active.pop(wid, None)
                if job.topts.verify:
                    res.sha256 = await verify(sess, remote, local)
                job.finished(item, FileOutcome(remote, "ok", res))
            except ERRORS as exc:
                if job.failed_on(wid, item, sess, begun, exc):
                    await job.drop(sess)
                    sess = None
    finally:
        job.active.pop(wid, None)
        job.give_back(sess)


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


async def _run_while_walking(job: TreeJob, walking, worker) -> None:
    """The job's workers take files while ``walking`` (the paced walk) still
    adds them; the walk is cancelled if the workers end first by an error."""
    job.walking = True
    walk = asyncio.ensure_future(walking)
    walk.add_done_callback(lambda _: job.walked())
    try:
        await job.run_queue(worker)
        await walk
    finally:
        if not walk.done():
            walk.cancel()
            await asyncio.gather(walk, return_exceptions=True)
