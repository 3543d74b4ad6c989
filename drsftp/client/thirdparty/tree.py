"""`drsftp copy -r ftp://A/dir/ ftp://B/dir/` (and ``--sync``): a tree from
server to server on the dataset machinery (docs/THIRDPARTY.md, "Trees";
docs/DATASETS.md).

- **Walk.** A's tree is listed on A's sessions (drsftp.client.trees.
  walk), B's destination too where it exists (for ``--sync``, for
  ``--continue``'s part files, and for the directories that need no MKD);
  the planner (drsftp.client.trees.plan) makes the directories, the
  transfers and the skips; B's directories are made with pipelined MKD.
- **Sessions x streams.** Each worker holds a pair of sessions, one on
  each server; ``-c N|auto`` counts pairs and the fleet controller
  (drsftp/tuning/count/fleet.py) moves them on the job's goodput and the data
  path's RTT, both as the servers report them through the relayed DRS
  (never a control connection's RTT).  Each file runs on its pair's
  ``-P N`` streams in extended block mode (both servers list PARALLEL),
  else in stream mode.
- **Cached data channels, pipelined.** In extended block mode a pair's
  streams stay open from file to file (GridFTP's ``-fast -pp``): each file
  is RETR to A and ALLO and STOR to B, no PASV, no PORT, no new
  connection, no slow start, and the next files' commands go while the
  current one moves (drsftp/ftp/copypipe.py decides what goes when,
  pipelined.py drives it; decision 0024).  Streams that broke on a file
  are replaced (PASV closes B's old streams: blocks of an aborted file
  must never reach the next STOR).  With ``--verify`` (a HASH per file)
  or ``--no-pipeline`` each file runs alone (sequence.py).
"""

from __future__ import annotations

import asyncio
import posixpath
from collections import deque
from dataclasses import replace

from ...ftp.listing import DIR, FILE, format_time_val
from ...ftp.partname import final_name
from ...ftp.safepath import check_name, remote_join
from ...ftp.thirdparty import CopySpec, Side
from ...ftp.url import FTPLocation
from ..result import TransferResult
from ..session.control import FTPError
from ..streams.rangeplan import drop_record, load_record
from ..transfer.options import TransferOptions
from ..transfer.targets import make_remote_dirs
from ..trees.job.result import FileOutcome, JobResult
from ..trees.job.sessions import ERRORS, JobSessions, check_cancelled, keep_alive
from ..trees.job.treejob import Item, JobOptions, Source, TreeJob
from ..trees.plan import Plan, Rel, Stat, plan
from ..trees.remote import RemoteSession
from ..trees.walk import RemoteWalk
from .pair import ServerPair, clear_between, client_side_tls, protect_between, shown
from .pipelined import Back, PairPipe, PipeItem
from .sequence import CopyRun
from .single import held_on_dest, record_base, run_one, verify_both


class CopyJob(TreeJob):
    """A tree job whose own sessions are A's (the walk, the workers' source
    sides) and whose ``dest`` sessions are B's."""

    def __init__(self, src: FTPLocation, dst: FTPLocation, topts: TransferOptions, jopts: JobOptions) -> None:
        # sessions log in with PROT P where TLS is asked for: the walk's listings come to
        # this client; a pair turns to PROT C before its first copy (--tls-data clear)
        self.clear_data = topts.clear_data
        super().__init__("copy", src, replace(topts, clear_data=False), jopts)
        self.dst = dst
        self.dest = JobSessions(dst, self.topts, jopts.pipeline, self.fleet.sessions)

    def _count(self, sess: RemoteSession) -> RemoteSession:
        """A session counted; the job's RTT stays the data path's (steer:
        the servers' reports), never a control connection's."""
        rtt = self.rtt
        sess = super()._count(sess)
        self.rtt = rtt
        return sess

    def paths(self, item: Item) -> tuple[str, str]:
        """(A's path, B's path) of an item."""
        s = self.sources[item.src]
        if s.kind == FILE:
            return s.remote, s.local
        return remote_join(s.remote, item.t.rel), remote_join(s.local, item.t.rel)

    def ping_idle_if_due(self, now: float) -> None:
        """Idle sessions on both servers kept alive (DATASETS.md#idle)."""
        due = now - self.pinged >= 30.0
        super().ping_idle_if_due(now)
        if due:
            for sess in self.dest.idle_sessions():
                keep_alive(sess)

    def apply(self, change) -> None:
        super().apply(change)
        self.dest.allowed = self.allowed

    def location(self, side: Side, path: str) -> FTPLocation:
        loc = self.loc if side is Side.SOURCE else self.dst
        return replace(loc, path=path)


async def run_copy_tree(src: FTPLocation, contents: bool, dst: FTPLocation, dst_dir_hint: bool,
                        topts: TransferOptions, args, streams: int) -> JobResult:
    """``contents``: SRC ends in a slash (its contents into DST);
    ``dst_dir_hint``: DST ends in a slash (a directory)."""
    jopts = JobOptions(recursive=args.recursive, sync=args.sync, checksum=args.checksum, resume=args.resume,
                       sessions=args.sessions, pipeline=args.pipeline, retries=args.retries, verbose=args.verbose,
                       streams=streams, cached=args.cached, json=args.json,
                       progress=False if args.quiet else {"auto": None, "always": True, "never": False}[args.progress])
    job = CopyJob(src, dst, topts, jopts)
    return await job.run_within_max_time(_copy_job(job, contents, dst_dir_hint))


async def _copy_job(job: CopyJob, contents: bool, dst_dir_hint: bool) -> None:
    jopts, src, dst = job.jopts, job.loc, job.dst
    try:
        private = (job.topts.tls or src.implicit_tls) and not job.clear_data
        # (no listing asked with the log-in under PROT P: SSCN's reply must not wait behind it)
        sess = await job.first_session((f"MLST {src.path}",), src.path if jopts.recursive and not private else None)
        if private:  # before any walk: one sentence; off again, as the walk's listings come to us
            await client_side_tls(sess.ctl, f"the source {shown(src)}")
            await sess.ctl.expect("SSCN OFF", 200, what="SSCN OFF on the source")
        dsess = await job.dest.session()
        entry, dentry = await sess.stat(src.path), await dsess.stat(dst.path)
        if entry is None:
            job.report.fail(src.path, "no such file or directory on the source")
            await sess.settle_early()
            job.spare.append(sess)
            job.dest.spare.append(dsess)
            return
        base = posixpath.basename(src.path.rstrip("/"))
        name = check_name(base) if base not in ("", ".") else "ftp-root"
        dest_is_dir = (dentry is not None and dentry.type == DIR) or dst_dir_hint
        if entry.type == DIR:
            if not jopts.recursive:
                job.report.fail(src.path, "is a directory (use -r)")
                job.spare.append(sess)
                job.dest.spare.append(dsess)
                return
            root = dst.path if contents or dentry is None else remote_join(dst.path, (name,))
            source = Source(src.path, root.rstrip("/") or "/", DIR, entry)
        else:
            source = Source(src.path, remote_join(dst.path, (name,)) if dest_is_dir else dst.path, FILE, entry)
        job.sources.append(source)
        have = await _dest_tree(job, dsess, source)
        if source.kind == DIR:
            trees = await job.walk_remote([(0, src.path)], first=sess)
            tree = trees[0]
        else:
            await sess.settle_early()
            job.spare.append(sess)
            tree = {(): Stat(entry.size, entry.mtime)}
        p = plan(tree, have, sync=jopts.sync, checksum=jopts.checksum, resume=jopts.resume,
                 partial=_partial(have, tree, in_place=not jopts.sync))  # (taken with --sync or --continue)
        if source.kind == DIR and () not in have:  # the destination's root, and its missing parents
            await make_remote_dirs(source.local, dsess.stat, dsess.ctl, f" on the destination {shown(dst)}")
        await _apply_dest(job, dsess, source, p)
        job.dest.spare.append(dsess)
        job.enqueue(0, p)
        await job.run_queue(lambda wid: _copy_worker(job, wid))
    finally:
        job.report.view.close()
        await asyncio.gather(job.close_spare(), job.dest.close_spare(), return_exceptions=True)


async def _dest_tree(job: CopyJob, dsess: RemoteSession, source: Source) -> dict[Rel, Stat]:
    """What B holds at the copy's destination: its tree (a directory that
    exists), the file's stat, or nothing."""
    e = await dsess.stat(source.local)
    if e is None:
        return {}
    if source.kind == FILE or e.type != DIR:
        return {(): Stat(e.size, e.mtime, e.type == DIR)}
    walk = RemoteWalk(job.dest, job.report, [(0, source.local)], None, dsess, own_sessions=True)
    tree = (await walk.run())[0]
    if dsess in job.dest.spare:  # (the walk hands back the session it was given: it is still ours)
        job.dest.spare.remove(dsess)
    tree[()] = Stat(is_dir=True)
    return tree


def _partial(have: dict[Rel, Stat], source: dict[Rel, Stat], *, in_place: bool) -> dict[Rel, int]:
    """Unfinished copies B holds: drsftp serve's ``.NAME.part`` (docs/
    SECURITY.md); with ``in_place`` (--continue, not --sync) also a
    shorter NAME (a server that writes in place) written since the source
    last changed.  Any other shorter NAME may be an older version, no
    prefix of this one: a REST at its size would splice the two
    (docs/DATASETS.md, "--sync")."""
    out: dict[Rel, int] = {}
    for rel, st in have.items():
        if st.is_dir or not rel or st.size is None:
            continue
        name = rel[-1]
        if (final := final_name(name)) != name:
            out[rel[:-1] + (final,)] = st.size
        elif in_place and rel in source and _written_since(st, source[rel]):
            out.setdefault(rel, st.size)
    return out


def _written_since(have: Stat, src: Stat) -> bool:
    """B's NAME is shorter than A's file and not older: it may be an
    interrupted copy of this version (both times known)."""
    if src.size is None or have.size is None or have.size >= src.size:
        return False
    return have.mtime is not None and src.mtime is not None and have.mtime >= src.mtime


def _mdtm(item: Item) -> str | None:
    """The source's modify fact as MDTM gives it (RFC 3659 sec. 3): what
    a MODE E resume record is matched against."""
    return format_time_val(item.t.mtime) if item.t.mtime is not None else None


async def _apply_dest(job: CopyJob, dsess: RemoteSession, s: Source, p: Plan) -> None:
    """B's directories made (MKD, pipelined: replies come in order, RFC 959),
    conflicts and skips reported."""
    for rel, why in p.conflicts:
        job.report.fail(remote_join(s.local, rel), why)
    for rel in p.skipped:
        job.report.record(FileOutcome(remote_join(s.local, rel), "skipped"))
    paths = [remote_join(s.local, rel) for rel in p.mkdirs]
    sent = [dsess.ctl.send_unwaited(f"MKD {path}") for path in paths]
    for path, reply in zip(paths, await dsess.ctl.settle([(x, None) for x in sent], 60), strict=True):
        if reply.code != 257:
            job.report.fail(path, f"cannot make directory on the destination: {reply}")


async def _copy_worker(job: CopyJob, wid: int) -> None:
    """One pair of sessions' loop: file after file, on the pair's cached
    streams where the servers keep them."""
    sess: RemoteSession | None = None
    dsess: RemoteSession | None = None
    pair: ServerPair | None = None
    try:
        while job.may_run(wid):
            check_cancelled()
            item = job.queue.pop() if job.queue else None
            if item is None:
                break
            sess = await job.session_for(item, sess)
            if dsess is None or dsess.ctl.lost:
                try:
                    dsess = await job.dest.session()
                except ERRORS as exc:
                    job.requeue(item)
                    raise FTPError(f"cannot open a session on the destination: {exc}") from exc
            if pair is None or pair.source is not sess.ctl or pair.dest is not dsess.ctl:
                pair = ServerPair(sess.ctl, dsess.ctl, {Side.SOURCE: job.loc, Side.DEST: job.dst},
                                  replace(job.topts, clear_data=job.clear_data))
                # (SSCN and PROT are a session's settings: each pair's)
                await (clear_between(pair) if job.clear_data else protect_between(pair))
            if _pipelined(job, pair):
                if not await _pipe_loop(job, wid, pair, item):
                    await asyncio.gather(job.drop(sess), job.dest.drop(dsess), return_exceptions=True)
                    sess = dsess = pair = None
                continue
            src_path, dst_path = job.paths(item)
            begun = sess.transfers
            try:
                if item.check and await _same_digest(pair, src_path, dst_path):
                    job.finished(item, FileOutcome(dst_path, "skipped"))
                    continue
                res = await _copy_one(job, wid, pair, item, src_path, dst_path)
                job.finished(item, FileOutcome(dst_path, "ok", res))
            except ERRORS as exc:
                pair.cached = False
                if getattr(exc, "reply", None) is not None:
                    sess.transfers += 1  # (the server answered: the file's own failure)
                if job.failed_on(wid, item, sess, begun, exc):
                    await asyncio.gather(job.drop(sess), job.dest.drop(dsess), return_exceptions=True)
                    sess = dsess = pair = None
    finally:
        job.active.pop(wid, None)
        job.give_back(sess)
        job.dest.give_back(dsess)


def _pipelined(job: CopyJob, pair: ServerPair) -> bool:
    """Files pipelined on the pair's cached streams: both servers offer
    extended block mode, no HASH per file (--verify), commands pipelined."""
    return pair.extended_block() and job.jopts.cached and job.jopts.pipeline and not job.topts.verify


async def _pipe_loop(job: CopyJob, wid: int, pair: ServerPair, first: Item) -> bool:
    """``first``, then files from the queue, pipelined on ``pair``
    (pipelined.py) while the queue holds any; each outcome recorded in
    order.  False: the pair is of no more use (a lost connection, a
    stall, replies that never came); its unfinished files are back in the
    queue, the first charged as any failure unless it had not started."""
    pipe = PairPipe(pair, job.jopts.streams, job.topts.idle_timeout)
    inflight: deque[tuple[Item, PipeItem]] = deque()
    held = [first]
    job.active[wid] = pipe
    try:
        while True:
            check_cancelled()
            while (held or job.queue) and pipe.usable and job.may_run(wid) and pipe.ahead(job.rtt):
                item = held.pop() if held else job.queue.pop()
                src_path, dst_path = job.paths(item)
                if item.check:  # --checksum: both digests first, with the pair otherwise idle
                    if inflight:
                        held.append(item)
                        break
                    try:
                        if await _same_digest(pair, src_path, dst_path):
                            job.finished(item, FileOutcome(dst_path, "skipped"))
                            continue
                    except ERRORS as exc:
                        job.retry_or_fail(item, exc)
                        continue
                    item.check = False
                ranges, record = _resume_ranges(job, item, src_path, dst_path, mode_e=True)
                inflight.append((item, pipe.add(src_path, dst_path, item.t.size, ranges, record, _mdtm(item))))
            if not inflight:
                return await pipe.settle()
            item, p = inflight[0]
            await pipe.until_done(p)
            inflight.popleft()
            _record(job, item, p)
    finally:
        job.active.pop(wid, None)
        await pipe.close()
        for item, _ in inflight:
            job.requeue(item)
        for item in held:
            job.requeue(item)


def _resume_ranges(job: CopyJob, item: Item, src_path: str, dst_path: str, mode_e: bool,
                   ) -> tuple[tuple[tuple[int, int], ...], str]:
    """What B holds of the file (REST ranges: --sync's part files; in
    extended block mode also --continue's) and its MODE E resume record."""
    record = record_base(job.location(Side.SOURCE, src_path), job.location(Side.DEST, dst_path))
    if mode_e and not _record_usable(record, _mdtm(item)):
        drop_record(record)  # B's part file has holes: no prefix either
        return (), record
    if item.t.resume_from or (job.jopts.resume and mode_e):
        return tuple(held_on_dest(record, mode_e, item.t.size, _mdtm(item), item.t.resume_from)), record
    if mode_e:
        drop_record(record)  # a STOR without REST starts the destination's file over
    return (), record


def _record_usable(record: str, mtime: str | None) -> bool:
    """A MODE E resume record is taken up only with the source's time in
    it and in the listing: a same-size file regenerated in between would
    otherwise mix its blocks with the old ones (no record: B's prefix)."""
    rec = load_record(record)
    return rec is None or (mtime is not None and rec.mtime is not None)


def _record(job: CopyJob, item: Item, p: PipeItem) -> None:
    """A pipelined file's outcome: ok; back to the queue (the streams broke
    on an earlier file); or its own failure, retried or failed (--retries),
    and one that never started on a lost pair goes back free (LOST_AGAIN)."""
    dst_path = p.file.dest_path
    exc = p.done.exception()
    if exc is None:
        job.finished(item, FileOutcome(dst_path, "ok", p.done.result()))
    elif isinstance(exc, Back):
        job.requeue(item)
    elif getattr(exc, "reply", None) is None and p.started is None:
        job.lost_session(item, exc)
    else:
        job.retry_or_fail(item, exc)


async def _copy_one(job: CopyJob, wid: int, pair: ServerPair, item: Item, src_path: str,
                    dst_path: str) -> TransferResult:
    """One file on ``pair``: MODE E on its (cached) streams where both list
    PARALLEL (and --stream-mode was not asked), else stream mode."""
    mode_e = pair.extended_block() and job.jopts.cached
    size = item.t.size
    held, record = _resume_ranges(job, item, src_path, dst_path, mode_e)
    spec = CopySpec(src_path, dst_path, size, mode_e, job.jopts.streams if mode_e else 1, held,
                    cached=pair.cached and mode_e)

    def on_run(run: CopyRun | None) -> None:
        if run is None:
            job.active.pop(wid, None)
        else:
            job.active[wid] = run

    result = await run_one(pair, spec, job.topts, None, record if mode_e else None, size, _mdtm(item),
                           spec.streams, on_run)
    pair.cached = mode_e
    return result


async def _same_digest(pair: ServerPair, src_path: str, dst_path: str) -> bool:
    """--checksum with --sync: both servers' SHA-256 of the file agree."""
    try:
        await verify_both(pair, src_path, dst_path)
    except FTPError as exc:
        if exc.reply is None and "verification failed" in str(exc):
            return False
        raise
    return True
