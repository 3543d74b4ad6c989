"""`get -r` and `put -r` over HTTP/WebDAV (docs/HTTP.md, "Client").

The remote side is walked directory by directory with ``PROPFIND Depth:
1`` (a server refuses ``infinity``: RFC 4918 sec. 9.1), each listing read
as it streams in, and the local side with ``os.scandir`` one directory at
a time; the files found go through a short queue to ``-c N`` workers that
move them on one pool of connections, each kept open from file to file
(keep-alive; a get asks no HEAD: the listing gave the size).  ``-c auto``
is :data:`FAR` files at once where the first connection's RTT is
:data:`FAR_RTT` or more (a file of 1 MiB is a round trip and a few of
the path's windows: many must overlap to fill it), else :data:`NEAR`;
the workers beyond wait for that first round trip and then stop.
Nothing holds the whole tree: only
the directories still to list and the files queued.  ``--sync`` skips a
file the destination holds with the same size and a time not older.
A name the server lists outside the directory asked, or one that is no
plain name (``..``, empty), is refused: nothing is written outside DEST.
A directory whose listing is refused, one that is a directory above it
again (:class:`Signature`) or deeper than the FTP walk's MAX_DEPTH fails;
the rest is copied and the tree ends in an error.  A file named as
another's part file is got after it (docs/DATASETS.md, "Part-file names").
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from ...ftp.partname import PART, download_part, part_owner
from ...http.davlist import Entry
from ...http.url import HTTPLocation
from ...io import sockopt
from ...tuning import Role, check_spec
from ..result import TransferResult
from ..streams.rangeplan import record_path
from ..transfer.options import TransferOptions
from ..trees.walk import MAX_DEPTH
from .errors import HTTPError
from .get import get_with
from .ls import entries
from .pool import Pool, together
from .put import put_with

log = logging.getLogger("drsftp.client")
QUEUED = 2  # files waiting per worker
NEAR, FAR, FAR_RTT = 8, 24, 0.005  # -c auto: files at once below and from FAR_RTT s of RTT


def auto_sessions(pool: Pool) -> int:
    """-c auto from the RTT of the pool's first connection (module docstring)."""
    rtts = [sockopt.tcp_info(link.sock).get("rtt") for link in pool.links.values() if link.sock is not None]
    us = min((r for r in rtts if r), default=None)
    return FAR if us is not None and us / 1e6 >= FAR_RTT else NEAR


@dataclass
class TreeJob:
    sessions: int | None  # files at once (-c; None: auto)
    streams: int  # connections per file (-P)
    sync: bool


@dataclass
class _Counts:
    files: int = 0
    skipped: int = 0
    dirs: int = 0
    bytes: int = 0


async def get_tree(loc: HTTPLocation, dest: str, opts: TransferOptions, job: TreeJob) -> TransferResult:
    check_spec(opts.tuning)
    counts, started, quiet = _Counts(), time.monotonic(), replace(opts, progress=False)
    if not loc.path.endswith("/"):  # (as the FTP trees: no slash, the directory itself goes into DEST)
        dest = os.path.join(dest, posixpath.basename(loc.path))
    most = job.sessions or FAR
    failed: list[str] = []
    async with Pool(loc, opts, Role.RECEIVER, most * job.streams + 1, timeline=False) as pool:
        queue: asyncio.Queue[_File | None] = asyncio.Queue(QUEUED * most)
        crew = _Crew(job.sessions)
        busy: dict[str, asyncio.Event] = {}  # the files queued or moving, by target: set when done

        async def enqueue(item: _File) -> None:
            busy[item.target] = item.done
            await queue.put(item)

        async def walk() -> None:
            stack = [_Dir(loc.path.rstrip("/") or "/", dest, None, ())]
            while stack:
                d = stack.pop()
                if d.after is not None:
                    await d.after.wait()  # (a file whose part file has its name: moving, dequeued)
                try:
                    stack.extend(reversed(await list_dir(d)))
                except HTTPError as exc:
                    if exc.status is None or exc.transient:
                        raise  # (a lost connection, a broken listing: the tree ends, as for a file)
                    fail(d.remote, str(exc))
                crew.settle(pool)

        async def list_dir(d: _Dir) -> list[_Dir]:
            """``d``'s files queued, its directories returned (DATASETS.md, "Part-file names")."""
            me, sig = d.remote, Signature()
            listing = entries(pool, me + "/", itself=True)
            whole = any(mtime == d.mtime for _, mtime, _ in d.above)  # (maybe an ancestor again: listed whole first)
            if whole:
                items = [e async for e in listing]
                for e in items:
                    sig.add(e, me)
                loop = next((path for path, _, key in d.above if key == sig.key()), None)
                if loop is not None:
                    fail(me, f"lists as {loop} does: a loop (a link to a directory above it?); not copied again")
                    return []
                listing = _replay(items)
            os.makedirs(d.local, exist_ok=True)
            counts.dirs += 1
            subdirs: list[Entry] = []
            names: set[str] = set()
            files: set[str] = set()
            later: list[_File] = []
            async for e in listing:
                crew.settle(pool)
                if not whole:
                    sig.add(e, me)
                if e.path == me or not child(e, me) or e.name in names:
                    continue  # (itself; no plain entry; a name listed twice)
                names.add(e.name)
                if e.is_dir:
                    subdirs.append(e)
                    continue
                item = _File(e, os.path.join(d.local, e.name))
                files.add(e.name)
                if part_owner(e.name) is not None or (opts.resume and os.path.lexists(download_part(item.target))):
                    later.append(item)  # (once the listing says whether its part names are taken)
                else:
                    await enqueue(item)
            for item in sorted(later, key=lambda i: len(i.e.name)):  # (an owner before its part's names)
                owner = part_owner(item.e.name)
                if owner in files:
                    item.after = busy.get(os.path.join(d.local, owner))
                part = download_part(item.e.name)
                item.fresh = opts.resume and (part in files or record_path(part) in files)
                await enqueue(item)
            above = (*d.above, (me, sig.mtime, sig.key()))
            down = [_Dir(e.path, os.path.join(d.local, e.name), e.mtime, above,
                         busy.get(os.path.join(d.local, owner)) if (owner := part_owner(e.name)) in files else None)
                    for e in subdirs]
            if len(above) > MAX_DEPTH:  # (the FTP walk's limit: trees/walk.py)
                for x in down:
                    fail(x.remote, f"deeper than {MAX_DEPTH} levels; not copied")
                return []
            return down

        def fail(path: str, why: str) -> None:
            failed.append(f"{path}: {why}")
            if len(failed) > 1:  # (the first is the tree's error at its end)
                log.error("%s: %s", path, why)

        async def move(item: _File) -> None:
            try:
                if item.after is not None:
                    await item.after.wait()  # (its owner, dequeued before it, is moving or done)
                e, target = item.e, item.target
                if job.sync and _have(target, e.size, e.mtime):
                    counts.skipped += 1
                    return
                if os.path.isdir(target):  # (checked before any byte moves, as the FTP plan does)
                    fail(target, "a directory is in the way of this file")
                    return
                if os.path.isdir(download_part(target)):  # (a directory listed beside it, got before)
                    fail(e.path, f"its part file's name is the directory {e.name}{PART}'s: get it on its own")
                    return
                listed = (e.size, e.mtime) if e.size is not None else None
                mine = replace(quiet, resume=False) if item.fresh else quiet
                r = await get_with(pool, loc.at(e.path), target, mine, job.streams, listed)
                counts.files, counts.bytes = counts.files + 1, counts.bytes + r.bytes
                if e.mtime is not None:
                    os.utime(target, (e.mtime, e.mtime))
            finally:
                item.done.set()
                if busy.get(item.target) is item.done:
                    del busy[item.target]

        await _run(walk, move, queue, crew)
        if failed:
            more = f" (and {len(failed) - 1} more, said above)" if len(failed) > 1 else ""
            raise HTTPError(f"get -r {loc.shown}: {failed[0]}{more}; the rest was copied", transient=False)
        return _result("get", loc.path, counts, started, pool.summary())


@dataclass
class _File:
    """A file of ``get -r``: ``after``: its owner's move, when it is that
    file's part file or resume record (partname.part_owner); ``fresh``: got
    from its start under --continue (its part's name is a listed file's)."""
    e: Entry
    target: str
    after: asyncio.Event | None = None
    fresh: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class _Dir:
    """A directory of ``get -r`` to list: ``mtime`` as its parent listed it;
    ``above``: its ancestors' (path, mtime, listing key), the root first."""
    remote: str
    local: str
    mtime: float | None
    above: tuple[tuple[str, float | None, str], ...]
    after: asyncio.Event | None = None  # the move of the file whose part file has its name


class Signature:
    """What a listing says, as one key: its own time and its entries' names,
    kinds, sizes and times, in any order.  WebDAV gives a collection no
    identity (FTP's MLSx ``unique``): a directory that lists as one above it
    with that one's time is that one again (a symlink loop), the seen-once
    rule of the FTP walk (trees/walk.py) for a walk that cannot tell."""

    def __init__(self) -> None:
        self.mtime: float | None = None
        self.count = self.sum = 0

    def add(self, e: Entry, me: str) -> None:
        if posixpath.dirname(e.path) != me and e.path != me:
            return  # (no entry of its own: tree.child says so where it counts)
        if e.path == me:
            self.mtime = e.mtime
            return
        self.count += 1
        self.sum = (self.sum + hash((e.name, e.is_dir, e.size, e.mtime))) & (1 << 64) - 1

    def key(self) -> str:
        return f"{self.mtime}:{self.count}:{self.sum:x}"


async def _replay(items: list[Entry]) -> AsyncIterator[Entry]:
    for e in items:
        yield e


async def put_tree(src: str, loc: HTTPLocation, opts: TransferOptions, job: TreeJob) -> TransferResult:
    check_spec(opts.tuning)
    counts, started, quiet = _Counts(), time.monotonic(), replace(opts, progress=False)
    top = loc.path.rstrip("/")
    if not src.endswith(os.sep):
        top = f"{top}/{os.path.basename(os.path.normpath(src))}"
    most = job.sessions or FAR
    async with Pool(loc, opts, Role.SENDER, most * job.streams + 1, timeline=False) as pool:
        queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(QUEUED * most)
        crew = _Crew(job.sessions)

        async def walk() -> None:
            stack = [(src, top)]
            while stack:
                ldir, rdir = stack.pop()
                theirs = await _make_dir(pool, rdir, job.sync, parents=rdir == top)
                crew.settle(pool)
                counts.dirs += 1
                with os.scandir(ldir) as it:
                    for d in sorted(it, key=lambda d: d.name):
                        there = f"{rdir}/{d.name}"
                        if d.is_dir(follow_symlinks=False):
                            stack.append((d.path, there))
                        elif d.is_file():
                            st = d.stat()
                            e = theirs.get(d.name)
                            if e is not None and not e.is_dir and e.size == st.st_size and (
                                    e.mtime is None or e.mtime >= int(st.st_mtime)):
                                counts.skipped += 1
                                continue
                            await queue.put((d.path, there))

        async def move(item: tuple[str, str]) -> None:
            path, there = item
            r = await put_with(pool, path, loc.at(there), quiet, job.streams)
            counts.files, counts.bytes = counts.files + 1, counts.bytes + r.bytes

        await _run(walk, move, queue, crew)
        return _result("put", top, counts, started, pool.summary())


class _Crew:
    """How many workers move files: -c N, or -c auto's count once the walk's
    first request has a connection (``settle``)."""

    def __init__(self, sessions: int | None) -> None:
        self.most = sessions or FAR
        self.count = sessions
        self.known = asyncio.Event()
        if sessions:
            self.known.set()

    def settle(self, pool: Pool) -> None:
        if not self.known.is_set():
            self.count = min(self.most, auto_sessions(pool))
            self.known.set()


async def _run(walk: Any, move: Any, queue: asyncio.Queue[Any], crew: _Crew) -> None:
    """The walk and the crew's workers; the first error ends them all."""

    async def worker(i: int) -> None:
        await crew.known.wait()
        if i >= (crew.count or 1):
            return
        while (item := await queue.get()) is not None:
            await move(item)

    async def walker() -> None:
        await walk()
        crew.known.set()  # (settled by the walk's first request; an empty walk needs no count)
        for _ in range(crew.count or 1):
            await queue.put(None)

    await together(walker(), *(worker(i) for i in range(crew.most)))


async def make_dir(pool: Pool, path: str, parents: bool = False) -> bool:
    """MKCOL ``path`` (201; 405: it exists, RFC 4918 sec. 9.3.1), with
    ``parents`` its missing parents first (409: RFC 4918 sec. 9.3.1, one
    level a request, as `mkdir -p`).  True if it existed (the root does)."""
    if path.rstrip("/") == "":
        return True
    async with pool.request("MKCOL", path + "/", ok=(201, 405, 409) if parents else (201, 405)) as (resp, _):
        status = resp.status
    if status == 409:
        parent = posixpath.dirname(path)
        if parent in ("", "/", path):
            raise HTTPError(f"MKCOL {pool.loc.url(path + '/')}: the server refused it (HTTP 409)", 409)
        await make_dir(pool, parent, parents=True)
        return await make_dir(pool, path)
    return status == 405


async def _make_dir(pool: Pool, path: str, listing: bool, parents: bool = False) -> dict[str, Entry]:
    """:func:`make_dir`; with ``listing`` what it holds (--sync), one
    directory's entries."""
    existed = await make_dir(pool, path, parents)
    if not (listing and existed):
        return {}
    return {e.name: e async for e in entries(pool, path + "/") if child(e, path)}


def child(e: Entry, parent: str) -> bool:
    """``e`` names a plain entry right inside ``parent`` (else it is skipped, said once)."""
    ok = e.name not in ("", ".", "..") and posixpath.dirname(e.path) == (parent.rstrip("/") or "/")
    if not ok:
        log.warning("skipping %r: the server listed it in %s, where it is no plain entry", e.path[:200], parent)
    return ok


def _have(target: str, size: int | None, mtime: float | None) -> bool:
    """--sync: the local copy has the size and is not older."""
    try:
        st = os.stat(target)
    except OSError:
        return False
    return size == st.st_size and (mtime is None or int(st.st_mtime) >= int(mtime))


def _result(direction: str, path: str, counts: _Counts, started: float, figures: dict[str, Any]) -> TransferResult:
    r = TransferResult(direction=direction, path=path, bytes=counts.bytes, seconds=time.monotonic() - started)
    r.update(figures, mode="http", files=counts.files, skipped=counts.skipped, dirs=counts.dirs,
             note=f"{counts.files} files" + (f", {counts.skipped} unchanged" if counts.skipped else ""))
    return r

