"""The remote walk of a dataset job: every source directory listed on up
to WALK_LISTERS sessions at once, its entries checked and handed over as
their listing lines arrive (docs/DATASETS.md, "Transfers start during the
walk", "Idle sessions", "Failures and bad input")."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Protocol

from ...ftp.listing import DIR, FILE, LINK, Entry
from ...ftp.partname import PART, part_owner
from ...ftp.safepath import UnsafePath, check_name, remote_join
from .job.result import JobReport
from .job.sessions import ERRORS, LOST_AGAIN, JobSessions, broken, check_cancelled, idle_wait, lost_before
from .plan import Rel, Stat
from .remote import RemoteSession

MAX_DEPTH = 256  # directory levels below a source: deeper is a loop or a hostile server
# listers per source, shared by all sources: min(allowed sessions, 8 x sources) (DATASETS.md#walk)
WALK_LISTERS = 8

Found = Callable[[int, dict[Rel, Stat]], None]  # source i's entries, as their listing lines arrive


class Paced(Protocol):
    """Where a streamed walk's files wait (the job's queue, treejob.JobQueue)."""

    @property
    def full(self) -> bool: ...

    async def wait_room(self) -> None: ...


Todo = tuple[int, str, Rel, int]  # (source, root, directory, times its session broke before it was listed)


class RemoteWalk:
    """One walk over ``roots`` ((source, server path) pairs) on the job's
    sessions: ``first`` lists the first root (its listing may be on the
    way); ``own_sessions``: the walk may open sessions of its own (-c auto,
    or no file moving yet: -c N counts every session but the walk's one)."""

    def __init__(self, sessions: JobSessions, report: JobReport, roots: list[tuple[int, str]],
                 on_found: Found | None, first: RemoteSession | None, *, own_sessions: bool,
                 paced: Paced | None = None) -> None:
        self.sessions, self.report, self.roots, self.on_found = sessions, report, roots, on_found
        self.own_sessions = own_sessions
        # streamed to a job's queue: no directory is listed while it is full,
        # and the entries are not kept (trees stay empty; names are checked
        # against those of their own listing only)
        self.paced = paced
        self.names: dict[tuple[int, Rel], set[str]] = {}  # (paced) each listing under way's names
        # each listing under way's file names, and its files named as another's part
        # file or resume record: kept until the listing ends (_release)
        self.files: dict[tuple[int, Rel], set[str]] = {}
        self.held: dict[tuple[int, Rel], dict[Rel, Stat]] = {}
        self.given = [first] if first is not None else []
        self.holding = 0  # listers with a session
        self.joining = 0  # listers opening one
        self.refused = False  # the server refused one of the walk's sessions: it opens no more of its own
        self.stuck: BaseException | None = None  # none could be opened with none listing: no lister waits
        self.listed = False  # a listing was asked for (else a walk that got no session fails as a whole)
        self.trees: dict[int, dict[Rel, Stat]] = {i: {} for i, _ in roots}
        self.todo: list[Todo] = [(i, path, (), 0) for i, path in roots]
        self.seen: set[str] = set()  # the MLSx ``unique`` fact of each directory found
        self.pending = 0  # listings under way
        self.wake = asyncio.Event()
        self.ended = asyncio.get_running_loop().create_future()  # every directory listed

    async def run(self) -> dict[int, dict[Rel, Stat]]:
        """Each source's tree; a directory that cannot be listed is a
        failed entry, the rest go on."""
        n = min(max(1, self.sessions.allowed), max(1, len(self.roots)) * WALK_LISTERS)
        # spare and prefetched sessions idle while the walk runs, also when it
        # runs before any file moves (--delete): kept alive (DATASETS.md#idle)
        idle = asyncio.ensure_future(self.sessions.keep_idle_alive())
        try:
            results = await asyncio.gather(*(self._lister() for _ in range(n)), return_exceptions=True)
        finally:
            idle.cancel()
        self.sessions.spare.extend(self.given)  # (no directory was listed)
        await self.sessions.trim_spare()
        errors = [r for r in results if isinstance(r, BaseException)]
        for exc in errors:
            if not isinstance(exc, ERRORS) or not self.listed:
                raise exc  # (a bug, a cancel; or no session was had at all)
        for i, root, rel, _ in self.todo:  # (every lister's session broke, none could be opened)
            self._unlisted(i, root, rel, f"cannot list: {errors[0] if errors else 'no session'}")
        return self.trees

    def _unlisted(self, i: int, root: str, rel: Rel, why: str) -> None:
        """A directory not listed whole: failed, and kept in its tree as
        unlisted, so that --delete deletes nothing at or below it (plan.Stat)."""
        self.report.fail(remote_join(root, rel), why)
        self.trees[i][rel] = Stat(is_dir=True, unlisted=True)

    # -- entries ------------------------------------------------------------------------
    def _take(self, i: int, root: str, rel: Rel, entries: list[Entry]) -> None:
        """A directory's entries (or the part of its listing that arrived)."""
        found: dict[Rel, Stat] = {}
        tree = self.trees[i]
        names = self.names.setdefault((i, rel), set()) if self.paced is not None else None
        for e in entries:
            try:
                child = rel + (check_name(e.name),)
            except UnsafePath as exc:
                self.report.fail(f"{root}/{'/'.join(rel)}", f"server sent {exc}; skipped")
                continue
            if names is not None:
                if e.name in names:
                    continue  # a name listed twice
                names.add(e.name)
            elif child in tree:
                continue  # a name listed twice (or listed again after a break)
            st = self._kept(root, child, e)
            if st is None:
                continue
            if not st.is_dir:
                self.files.setdefault((i, rel), set()).add(e.name)
                if part_owner(e.name) is not None:
                    self.held.setdefault((i, rel), {})[child] = st
                    continue
            found[child] = st
            if names is None:
                tree[child] = st
            if st.is_dir and not st.unlisted:
                self.todo.append((i, root, child, 0))
                self.wake.set()
        if found and self.on_found is not None:
            self.on_found(i, found)

    def _release(self, i: int, root: str, rel: Rel) -> None:
        """A listed directory's files named as another listed file's part file
        or resume record (``x.part``, ``x.part.ranges`` beside ``x``): the
        download of ``x`` writes there, and a rerun resumes ``x`` from them,
        so they fail with the reason (DATASETS.md, "Part-file names"); the
        others go on as any file."""
        files, found = self.files.get((i, rel), set()), {}
        for child, st in self.held.pop((i, rel), {}).items():
            owner = part_owner(child[-1])
            if owner in files:
                what = "part file" if child[-1] == owner + PART else "resume record"
                self.report.fail(remote_join(root, child), f"its name is {owner}'s {what} here: get it on its own")
                continue
            found[child] = st
            if self.paced is None:
                self.trees[i][child] = st
        if found and self.on_found is not None:
            self.on_found(i, found)

    def _kept(self, root: str, child: Rel, e: Entry) -> Stat | None:
        """What the walk keeps of an entry: a file, a directory to list (seen
        once, no deeper than MAX_DEPTH; the others unlisted, said why); None
        for the others (said why)."""
        if e.type == FILE:
            return Stat(e.size, e.mtime)
        if e.type != DIR:
            what = "symlink" if e.type == LINK else "special file"
            self.report.note(remote_join(root, child), f"{what}; skipped", verbose_only=True)
            return None
        if e.unique and (e.unique in self.seen):
            self.report.note(remote_join(root, child), "a directory seen before (a loop); skipped")
            return Stat(is_dir=True, unlisted=True)
        if e.unique:
            self.seen.add(e.unique)
        if len(child) > MAX_DEPTH:
            self.report.fail(remote_join(root, child), f"deeper than {MAX_DEPTH} levels; skipped")
            return Stat(is_dir=True, unlisted=True)
        return Stat(is_dir=True)

    # -- the listers' sessions ---------------------------------------------------------------
    def _wants_session(self) -> bool:
        """Whether a lister without a session takes one now: one given or
        spare; none lists; or, where the walk may open its own, one more
        while more directories wait than the listers holding or opening
        one take, until the server refuses one."""
        if self.given or self.sessions.spare or not self.holding + self.joining:
            return True
        return not self.refused and len(self.todo) > self.holding + self.joining and self.own_sessions

    async def _open_one(self) -> RemoteSession | None:
        """A session for a lister; None: the walk ended while it opened
        (it is then the job's, as a prefetched one)."""
        if self.given:
            return self.given.pop()
        sess = self.sessions.take_spare()
        if sess is not None:
            return sess
        fut = asyncio.ensure_future(self.sessions.session())
        self.joining += 1
        done = False
        try:
            await asyncio.wait([fut, self.ended], return_when=asyncio.FIRST_COMPLETED)
            done = fut.done()
        finally:
            self.joining -= 1
            self.wake.set()
            if not done:
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())
                self.sessions.opening.append(fut)  # (a worker takes it, or close_spare drops it)
        return fut.result() if done else None

    async def _join(self) -> RemoteSession | None:
        """A lister takes a session (_open_one); None: it has none yet."""
        try:
            sess = await self._open_one()
        except ERRORS as exc:
            self.refused = True  # (the others list; this one waits, to reopen if they break)
            if not self.holding + self.joining:
                self.stuck = exc  # (no session lists: the rest fail in run())
            return None
        if sess is None:
            return None
        if not self.todo:  # (the others took them while it opened)
            self.sessions.spare.append(sess)
            return None
        self.holding += 1
        return sess

    async def _let_go(self, sess: RemoteSession) -> None:
        """A lister's session it no longer holds: dropped if broken, else spare."""
        self.holding -= 1
        self.wake.set()  # (a lister waiting for this one's end)
        if sess.ctl.lost:
            await self.sessions.drop(sess)  # (broken: not a worker's to take)
        else:
            self.sessions.spare.append(sess)

    # -- listing ----------------------------------------------------------------------------
    async def _lister(self) -> None:
        sess: RemoteSession | None = None  # taken when there is a directory to list
        try:
            while self.todo or self.pending:
                check_cancelled()
                if self.stuck is not None and sess is None and not self.holding + self.joining:
                    raise self.stuck
                if sess is not None and sess.ctl.lost:  # closed while it waited (the server's idle timeout)
                    stale, sess = sess, None
                    self.holding -= 1
                    self.wake.set()
                    await self.sessions.drop(stale)
                    continue
                if sess is None and self.todo and self._wants_session():
                    sess = await self._join()
                    if sess is None:
                        continue
                if self.paced is not None and self.paced.full:
                    # the job's queue is full: its workers take the sessions, and the
                    # listing goes on once they have taken half (BACKLOG_LOW)
                    if sess is not None:
                        held, sess = sess, None
                        await self._let_go(held)
                    await self.paced.wait_room()
                    continue
                if sess is None or not self.todo:
                    # (files moving meanwhile: the sessions are the workers'; a lister
                    # takes one they left, or opens one as _wants_session() says)
                    self.wake.clear()
                    await idle_wait(self.wake, sess)
                    continue
                if await self._list_next(sess):
                    dead, sess = sess, None  # (its directories are the others', or this lister's next one's)
                    await self.sessions.drop(dead)
        finally:
            if sess is not None:
                await self._let_go(sess)

    async def _list_next(self, sess: RemoteSession) -> bool:
        """The next directory listed on ``sess``; True if that broke the
        session (the lister drops it)."""
        begun = sess.transfers
        i, root, rel, lost = self.todo.pop()
        self.pending += 1
        self.listed = True
        try:
            streamed = functools.partial(self._take, i, root, rel) if self.on_found is not None else None
            entries = await sess.listing(remote_join(root, rel), streamed)
            if streamed is None:
                self._take(i, root, rel, entries)
            self._release(i, root, rel)
        except ERRORS as exc:
            if lost_before(sess, begun, exc) and lost < LOST_AGAIN:
                self.todo.append((i, root, rel, lost + 1))  # (broke before its listing began)
            else:
                self._unlisted(i, root, rel, f"cannot list: {exc}")
            if broken(exc):
                self.holding -= 1
                return True
        finally:
            self.names.pop((i, rel), None)
            self.files.pop((i, rel), None)
            self.held.pop((i, rel), None)
            self.pending -= 1
            if not self.todo and not self.pending and not self.ended.done():
                self.ended.set_result(None)
            self.wake.set()
        return False
