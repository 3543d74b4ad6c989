"""A copy tree's files pipelined on one pair of sessions: the driver of
drsftp/ftp/copypipe.py over the two control connections (docs/
THIRDPARTY.md, "Trees"; decision 0024).  It sends what the flow allows,
hands every reply back, resolves each file's future as the flow decides
(done, failed, back to the queue), relays DRS between the servers while
files move (drsftp/ftp/relay.py), and keeps B's range markers per file
for ``--continue``.

A file's future resolves with its TransferResult, or raises its
FTPError, or :class:`Back` (the streams broke on an earlier file: not its
failure).  The pair is unusable after a lost control connection or a
stall (:attr:`PairPipe.broken`)."""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field

from ...ftp.copypipe import FileBack, FileDone, FileFailed, PipeFile, PipeFlow, Send, Stage, State
from ...ftp.eblock import RangeSet, marker_ranges
from ...ftp.relay import Relay
from ...ftp.replies import Reply
from ...ftp.thirdparty import Side
from ...tuning.count.streams import StreamSample
from ...tuning.wirekeys import BYTES
from ..result import TransferResult
from ..session.control import FTPError, Pending
from ..streams.rangeplan import drop_record
from .pair import ServerPair, url_of
from .sequence import copy_error, drs_replied, relay_samples
from .single import relay_note, relayed, save_held

TICK = 0.02  # seconds between looks at the relay and at the replies awaited
MIN_AHEAD, MAX_AHEAD = 2, 16  # files A holds requested (docs/decisions/0012: two round trips of the rate)
ABORT_WAIT = 10.0  # seconds the servers may take to answer every command after a break


class Back(Exception):
    """The file goes back to the queue: the streams broke before it ended."""


@dataclass(eq=False)
class PipeItem:
    file: PipeFile
    record: str | None  # the MODE E resume record (B's range markers)
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    held: RangeSet = field(default_factory=RangeSet)  # what B reported holding
    started: float | None = None  # A's 1yz
    mtime: str | None = None  # the source's, as MDTM gives it: the record's (tree._mdtm)
    sent: float = field(default_factory=time.monotonic)

    @property
    def at_source(self) -> bool:
        """A has not finished it."""
        return not self.done.done() and self.file.a in (Stage.WAITING, Stage.SENT, Stage.STARTED)


class PairPipe:
    def __init__(self, pair: ServerPair, streams: int, idle_timeout: float = 60.0) -> None:
        self.pair = pair
        names = {side: pair.label(side) for side in Side}
        self.flow = PipeFlow.on_open_streams(streams, names) if pair.cached else PipeFlow(streams, names)
        self.relay = Relay(pair.drs(Side.SOURCE), pair.drs(Side.DEST))
        self.relay.bytes_base = pair.dest_bytes if pair.cached else 0
        self.idle_timeout = idle_timeout
        self.items: dict[int, PipeItem] = {}  # by the flow's file seq
        self.broken: FTPError | None = None  # the pair is of no more use
        self.done_bytes = 0  # of files done since the streams opened (B's count's base)
        self._ticker: asyncio.Task | None = None
        self._last = (time.monotonic(), 0)  # B's progress: when it last moved, and to what

    # -- what the job reads: progress, the fleet controller's samples, ahead ------------------
    @property
    def moved(self) -> int:
        """Bytes of the files still on the way that B reports holding."""
        left = sum(i.file.size or 0 for i in self.items.values())
        dest = self.relay.latest(Side.DEST)
        if BYTES not in dest or not left:
            return 0
        return max(0, min(dest[BYTES] - self.relay.bytes_base - self.done_bytes, left))

    def samples(self) -> list[StreamSample]:
        return relay_samples(self.relay)

    def ahead(self, rtt: float | None) -> bool:
        """Whether to add one more file: while A holds less than two round
        trips of the pair's rate requested (2 to 16 files)."""
        at_a = [i for i in self.items.values() if i.at_source]
        if len(at_a) < MIN_AHEAD:
            return True
        if len(at_a) >= MAX_AHEAD:
            return False
        left = sum(i.file.size or 0 for i in at_a)
        rtt = rtt or 0.1
        return left < 2 * self.relay.rate() * rtt

    @property
    def usable(self) -> bool:
        return self.broken is None and not self.pair.lost

    # -- files ------------------------------------------------------------------------------
    def add(self, source_path: str, dest_path: str, size: int | None, held: tuple[tuple[int, int], ...],
            record: str | None, mtime: str | None = None) -> PipeItem:
        if self.broken is not None:
            raise self.broken
        f = self.flow.add(source_path, dest_path, size, held)
        item = PipeItem(f, record, held=RangeSet(list(held)), mtime=mtime)
        self.items[f.seq] = item
        self._pump()
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick())
        return item

    async def until_done(self, item: PipeItem) -> None:
        """``item``'s end; the pair breaks at a stall of B's data, or when
        the servers leave a break's commands unanswered."""
        settling = None
        while not item.done.done():
            await asyncio.wait([item.done], timeout=0.5)
            now, got = time.monotonic(), self.relay.latest(Side.DEST).get(BYTES)
            settling = (settling or now) if self.flow.state is State.SETTLING else None
            if settling is not None and now - settling > ABORT_WAIT:
                self._fail(FTPError(f"the servers did not answer ABOR within {ABORT_WAIT:.0f} s"))
            elif got is None or got != self._last[1]:
                self._last = (now, got or 0)
            elif self.relay.series[Side.DEST] and now - self._last[0] > self.idle_timeout:
                self._fail(FTPError(f"the copy stalled: nothing reached the destination for"
                                    f" {self.idle_timeout:.0f} s"))

    async def settle(self, timeout: float = ABORT_WAIT) -> bool:
        """Every command's reply in (ABOR's among them, after a break):
        the sessions can carry more; False after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.usable and not self.flow.settled and time.monotonic() < deadline:
            await asyncio.sleep(TICK)
        return self.usable and self.flow.settled

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        self.pair.cached = self.usable and self.flow.state is State.OPEN and self.flow.settled
        self.pair.dest_bytes = self.relay.latest(Side.DEST).get(BYTES, 0) if self.pair.cached else 0
        for item in list(self.items.values()):
            self._resolve(item, Back())

    # -- sending and replies ------------------------------------------------------------------
    def _pump(self) -> None:
        if self.broken is not None:
            return
        was = self.flow.state
        for send in self.flow.sendable():
            try:
                pending = self.pair.ctl(send.side).start(send.line)
            except FTPError as exc:
                return self._lost(send.side, exc)
            if send.transfer:
                pending.preliminary.add_done_callback(functools.partial(self._first, send))
                if send.side is Side.DEST and send.file is not None:
                    pending.on_mark = functools.partial(self._marker, send.file.seq)
            pending.final.add_done_callback(functools.partial(self._final, send))
        if was is not State.OPENING and self.flow.state is State.OPENING:  # new streams: B counts anew
            self.relay.bytes_base, self.done_bytes = 0, 0

    def _first(self, send: Send, fut: asyncio.Future) -> None:
        if self.broken is not None or fut.cancelled() or fut.exception() is not None or not fut.result().preliminary:
            return
        self.flow.began(send, fut.result())
        item = self.items.get(send.file.seq) if send.file is not None else None
        if item is not None and send.side is Side.SOURCE:
            item.started = time.monotonic()
        self._pump()

    def _final(self, send: Send, fut: asyncio.Future) -> None:
        if self.broken is not None or fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            return self._lost(send.side, exc)
        self._events(self.flow.answered(send, fut.result()))
        self._pump()

    def _marker(self, seq: int, reply: Reply) -> None:
        """B's 111 Range Marker: what it holds of the file (--continue)."""
        item = self.items.get(seq)
        if item is None or reply.code != 111:
            return
        for a, b in marker_ranges(reply.first, item.file.size):
            item.held.add(a, b)

    def _events(self, events) -> None:
        for ev in events:
            item = self.items.get(ev.file.seq)
            if item is None:
                continue
            if isinstance(ev, FileDone):
                self.done_bytes += ev.file.size or 0
                if item.record is not None:
                    drop_record(item.record)
                self._resolve(item, self._result(item))
            elif isinstance(ev, FileFailed):  # (refused alone: B holds nothing of it to resume)
                self._resolve(item, copy_error(ev.reason, ev.reply, resumable=not ev.alone))
            elif isinstance(ev, FileBack):
                self._resolve(item, Back())

    def _resolve(self, item: PipeItem, outcome: TransferResult | BaseException) -> None:
        self.items.pop(item.file.seq, None)
        if item.done.done():
            return
        if isinstance(outcome, BaseException):
            if item.record is not None and isinstance(outcome, FTPError) and not outcome.transient:
                drop_record(item.record)  # a refusal: nothing a --continue could take up
            elif item.record is not None and item.file.size is not None and item.file.b is not Stage.WAITING:
                save_held(item.record, item.file.size, item.mtime, item.held)  # (B's part file may have holes)
            item.done.set_exception(outcome)
            item.done.exception()  # (retrieved: the loop may have ended)
        else:
            item.done.set_result(outcome)

    def _lost(self, side: Side, exc: BaseException) -> None:
        if self.broken is not None:
            return
        why = str(exc) if isinstance(exc, FTPError) else repr(exc)
        self.broken = FTPError(f"lost the control connection to {self.pair.label(side)}: {why}")
        self._events(self.flow.lost(side, why))
        for item in list(self.items.values()):
            self._resolve(item, Back())

    def _fail(self, exc: FTPError) -> None:
        """The pair cannot go on (a stall): the first file fails, the rest go back."""
        self.broken = exc
        items = sorted(self.items.values(), key=lambda i: i.file.seq)
        for n, item in enumerate(items):
            self._resolve(item, exc if n == 0 else Back())

    # -- while files move ------------------------------------------------------------------------
    async def _tick(self) -> None:
        """Relayed DRS: each server that takes part is sent the other's
        latest pairs while it moves a file, once per data-path RTT."""
        while self.usable:
            await asyncio.sleep(TICK)
            if self.flow.state is not State.OPEN:
                continue
            now = time.monotonic()
            for side in Side:
                running = any(i.file.stage(side) is Stage.STARTED for i in self.items.values())
                if not running or not self.relay.due(side, now):
                    continue
                line = self.relay.command(side)
                try:
                    pending: Pending = self.pair.ctl(side).start(line)
                except FTPError:
                    continue
                self.relay.sent(side, now, line)
                pending.final.add_done_callback(functools.partial(drs_replied, self.relay, side))

    def _result(self, item: PipeItem) -> TransferResult:
        f, relay, pair = item.file, self.relay, self.pair
        start = item.started or item.sent
        seconds = max(time.monotonic() - start, 1e-6)
        held = sum(b - a for a, b in f.held)
        size = f.size
        moved = (size - held) if size is not None else 0
        replies = relay.replies(Side.SOURCE) + relay.replies(Side.DEST)
        r = TransferResult(direction="copy", path=f.source_path, bytes=moved, seconds=seconds, total_size=size,
                           resumed_from=held, complete=True, drs_peer=relay.relaying and replies > 0,
                           drs_replies=replies, server_last_report=dict(relay.latest(Side.SOURCE)))
        rtt = relay.data_rtt()
        if rtt:
            r.update(rtt_avg_ms=round(rtt * 1000, 3))
        r.update(source=url_of(pair.locs[Side.SOURCE]), destination=url_of(pair.locs[Side.DEST]),
                 dest_path=f.dest_path, mode="E", streams=self.flow.streams, parallel=self.flow.streams,
                 passive=Side.DEST.value, cached=f.cached, pipelined=True, relayed=relayed(relay),
                 note=relay_note(relay, pair))
        return r
