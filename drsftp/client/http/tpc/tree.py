"""`drsftp copy -r https://A/dir/ https://B/dir/`: one COPY per file
(docs/HTTP.md, "drsftp copy over HTTPS").

The source is walked one directory at a time with ``PROPFIND Depth: 1``
(client/http/ls.py reads each listing as it streams in), each directory
is made on the destination with ``MKCOL`` (its missing parents first, as
`mkdir -p`), and the files go through a short queue to ``-c N`` workers,
each holding one COPY at a time.  A COPY refused with 503 (the
destination takes fewer connections from this address), or that failed
on a 503 of the source (B's connections to A), is tried again and its
worker ends: the tree goes on with fewer COPYs at once, the last worker
waiting BUSY_WAIT before each new try, each file tried at most
MAX_BUSY times, and none once 2 x MAX_BUSY COPYs in a row met a 503
(a server down, not one that takes fewer).  A file that fails otherwise is listed with its
reason and the others go on; a failing walk (a directory that cannot be
listed or made) ends the tree.  An entry listed outside the directory
asked, or named ``..``, is skipped with a warning."""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from dataclasses import dataclass, field, replace

from ....http.davlist import Entry
from ...result import TransferResult
from ...transfer.progress import ProgressView
from ..errors import HTTPError
from ..ls import entries
from ..pool import together
from ..tree import child, make_dir
from .copy import BUSY, Ends, Settings, copy_file

log = logging.getLogger("drsftp.client")
QUEUED = 2  # files waiting per worker
MAX_BUSY = 8  # 503s a file may meet before it is listed as failed
BUSY_WAIT = 1.0  # s the last worker waits after a 503


@dataclass
class TreeOutcome:
    result: TransferResult
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source path, reason)


async def copy_tree(ends: Ends, src_top: str, dst_top: str, s: Settings, sessions: int) -> TreeOutcome:
    """The tree under ``src_top`` into ``dst_top`` (both without a trailing /)."""
    began = time.monotonic()
    files = dirs = moved = 0
    failed: list[tuple[str, str]] = []
    stopped = False
    running = sessions  # workers still running (a 503 ends one: module docstring)
    again: list[tuple[Entry, str]] = []  # files to try again, refused with 503
    busy: dict[str, int] = {}  # 503s met, by source path
    streak = 0  # 503s in a row (an outage, not a connection limit: MAX_BUSY of them and no more tries)
    each = replace(s, progress=False)
    view = ProgressView(posixpath.basename(src_top) or "/", None, s.progress)
    queue: asyncio.Queue[tuple[Entry, str] | None] = asyncio.Queue(QUEUED * sessions)

    async def walk() -> None:
        nonlocal dirs
        await make_dir(ends.dst, dst_top, parents=True)
        stack = [(src_top, dst_top)]
        while stack:
            sdir, ddir = stack.pop()
            if sdir != src_top:
                await make_dir(ends.dst, ddir)
            dirs += 1
            async for e in entries(ends.src, (sdir.rstrip("/") or "") + "/"):
                if not child(e, sdir):
                    continue
                there = f"{ddir.rstrip('/')}/{e.name}"
                if e.is_dir:
                    stack.append((e.path, there))
                else:
                    await queue.put((e, there))

    async def one(item: tuple[Entry, str]) -> bool:
        """One file's COPY; False: this worker ends (a 503: fewer at once)."""
        nonlocal files, moved, stopped, streak
        if s.deadline is not None and s.deadline.passed:
            stopped = True
            return True
        e, there = item
        try:
            r = await copy_file(ends, e.path, there, each, size=e.size, head=False)
        except HTTPError as exc:
            busy[e.path] = busy.get(e.path, 0) + (exc.status == BUSY)
            streak = streak + 1 if exc.status == BUSY else 0
            if exc.status != BUSY or busy[e.path] >= MAX_BUSY or streak >= MAX_BUSY * 2:
                failed.append((e.path, str(exc)))
                return True
            again.append(item)
            if running > 1:
                log.info("%s: a server is busy (HTTP 503): %d COPYs at once from here", e.path, running - 1)
                return False
            await asyncio.sleep(BUSY_WAIT)
            return True
        streak = 0
        if not r.complete:
            stopped = True
            return True
        files, moved = files + 1, moved + r.bytes
        view.update(moved, moved * 8 / max(time.monotonic() - began, 1e-3), None, None)
        return True

    async def worker() -> None:
        nonlocal running
        try:
            while (item := again.pop() if again else await queue.get()) is not None:
                if not await one(item):
                    return
            while again:  # (the walk is done: the files other workers left to try again)
                if not await one(again.pop()):
                    return
        finally:
            running -= 1

    async def walker() -> None:
        await walk()
        for _ in range(sessions):
            await queue.put(None)

    try:
        await together(walker(), *(worker() for _ in range(sessions)))
    finally:
        view.close()
    r = TransferResult(direction="copy", path=src_top, bytes=moved, seconds=time.monotonic() - began,
                       complete=not stopped)
    note = f"{files} files" + (f", {len(failed)} failed" if failed else "")
    r.update(mode=ends.mode, via="http-tpc", source=ends.src.loc.url(src_top + "/"),
             destination=ends.dst.loc.url(dst_top + "/"), files=files, dirs=dirs, token=ends.auth.kind,
             parallel="auto" if s.streams is None else s.streams, sessions=sessions, drs_peer=None,
             failed=[{"path": p, "error": why} for p, why in failed], note=note)
    return TreeOutcome(r, failed)
