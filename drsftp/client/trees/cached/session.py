"""What cached extended-block sessions share, both directions
(drsftp.client.trees.cached.get, cached.put): the files on the wire, their end,
the session's break, and a file's figures (docs/DATASETS.md, "Cached data
channels")."""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ....ftp.replies import Reply
from ...result import TransferResult
from ...session.control import ControlConnection, FTPError
from ...streams.modee.base import ModeESession
from ...transfer.options import TransferOptions

SMALL_WIRE = 256 << 10  # bytes on a session's wire below which its streams tick every SMALL_TICK s
# s: the server's idle streams' pace (its eblock IDLE_TICK), and one DRS
# exchange a SMALL_DRS s (docs/decisions/0040-small-files-batched-per-session.md)
SMALL_TICK, SMALL_DRS = 0.25, 1.0


@dataclass(kw_only=True)
class CachedFile:
    """What a file on a cached session has, either direction (FileGet,
    FilePut add ``seq``, ``fd``, their paths and their command)."""

    state: str = "sent"  # sent -> started (its 1yz came), or refused (no 1yz: the server never started it)
    bytes: int = 0
    drs_replies: int = 0  # DRS reports the server sent while this file was its transfer
    started: float | None = None
    reply: Reply | None = None  # the final reply
    reused: bool = False  # a stream that had ended an earlier file carried it (the first file opens them)
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class CachedSession(ModeESession):
    """The files requested on a cached session (:class:`CachedFile`)."""

    timeline = False  # no file record carries a timeline, and a session may run for hours

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int) -> None:
        super().__init__(ctl, opts, wanted)
        self.files: deque[Any] = deque()  # requested, not yet finished
        self.broken: FTPError | None = None
        self.small = False  # the wire held under SMALL_WIRE at the last tick (tick_floor)

    @property
    def moved(self) -> int:
        """Bytes of the files still open (finished ones are the job's)."""
        return sum(f.bytes for f in self.files)

    def tick_floor(self) -> float:
        """While the files on the wire hold less than SMALL_WIRE bytes the
        streams' windows limit nothing (the default buffers hold them): a
        tick every SMALL_TICK s, not DRS's every few ms (each costs CPU at
        both ends, and a tree of small files is CPU-bound: DATASETS.md#cached)."""
        left = 0
        for f in self.files:
            left += (f.size or 0) - f.bytes
            if left >= SMALL_WIRE:
                self.small = False
                return 0.0
        self.small = True
        return SMALL_TICK

    def drs_wanted(self) -> bool:
        """Between files the exchange says nothing; while the wire is small
        (tick_floor) one every SMALL_DRS s: no window limits anything then,
        and each exchange is a command and a reply for both ends to handle
        (one every tick was a third of a put's commands on loopback)."""
        if not self.files:
            return False
        return not self.small or time.monotonic() - self.drs.exchange.last_sent >= SMALL_DRS

    def _on_peer_report(self, pairs: dict[str, int], seconds: float) -> None:
        """A DRS report counts for the oldest file without its final reply:
        the server runs a session's transfers one at a time, in order, and
        answers DRS during the one running, before its final reply
        (docs/EBLOCK.md, "Pipelined transfers"); replies are handled in the
        order they came."""
        super()._on_peer_report(pairs, seconds)
        running = next((f for f in self.files if f.reply is None), None)
        if running is not None:
            running.drs_replies += 1

    @property
    def tuner(self):
        live = [s for s in self.opened if s.ended is None]
        return live[0].tuner if live else None

    def finish(self, f: Any, exc: BaseException | None) -> None:
        """The file leaves the wire: its descriptor closed, its end said."""
        if f in self.files:
            self.files.remove(f)
        if f.fd >= 0:
            os.close(f.fd)
            f.fd = -1
        if not f.done.done():
            if exc is None:
                f.done.set_result(None)
            else:
                f.done.set_exception(exc)
                f.done.exception()  # read by the worker, or dropped with the session

    def break_session(self, exc: FTPError) -> None:
        """The streams' state is unknown: every open file fails with ``exc``."""
        if self.broken is None:
            self.broken = exc
        for f in list(self.files):
            self.finish(f, exc)

    def result(self, f: Any, direction: str, seconds: float, full: bool = True, **figures: Any) -> TransferResult:
        """A file's figures; without ``full`` only its bytes and time (a
        job's report that keeps no more of it: JobResult.detailed)."""
        if not full:
            return TransferResult(direction=direction, path=f.remote, bytes=f.bytes, seconds=seconds)
        r = TransferResult(direction=direction, path=f.remote, bytes=f.bytes, seconds=seconds,
                           drs_peer=f.drs_replies > 0, drs_replies=f.drs_replies,
                           server_last_report=self.server_last)
        r.update(self.summary())
        # cached: the file went on data connections an earlier file had used
        # (docs/DATASETS.md, "--json")
        r.update(figures, streams=len(self.opened), cached=f.reused)
        return r
