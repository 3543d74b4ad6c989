"""One file from A to B on a pair of sessions: the third-party command
sequence (drsftp/ftp/thirdparty.py) driven over the two control
connections, the relayed DRS (drsftp/ftp/relay.py) while it runs, ``-P
auto`` from the data path (drsftp/tuning/count/pathstreams.py), progress,
--max-time, and the abort of the other side when one fails
(docs/THIRDPARTY.md; docs/DESIGN.md, "Third-party transfers").

Each side's commands go through its own transfer flow (drsftp/ftp/flow.py:
checked against its table before they are sent, its replies read in
order), except on cached MODE E streams, whose one data address serves
many transfers, which that table does not describe (as the dataset jobs'
cached sessions)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...ftp.flow import FlowError
from ...ftp.relay import Relay, window_of
from ...ftp.replies import Reply
from ...ftp.thirdparty import Command, CopyError, CopyFlow, CopySpec, Done, Failed, Side
from ...tuning.count.pathstreams import PathStreams
from ...tuning.count.streams import StreamSample
from ...tuning.wirekeys import BYTES
from ..session.control import FTPError, Pending
from ..session.flowctl import FlowControl
from ..transfer.options import Deadline
from .pair import ServerPair

TICK = 0.02  # seconds between looks at the replies, the relay and the bar
ABORT_WAIT = 10.0  # seconds a server may take to answer ABOR
CAUSE_WAIT = 2.0  # seconds one side's failure waits for the other's error reply, which may name the cause
TIMELINE_LIMIT = 20_000
TRANSFER_VERBS = ("RETR", "STOR")


def relay_samples(relay: Relay) -> list[StreamSample]:
    """The data path as the sender reports it, for a job's fleet controller
    (one sample: the least RTT over its streams)."""
    rtt = relay.data_rtt()
    return [StreamSample(rtt, rtt, relay.retransmits())] if rtt else []


def drs_replied(relay: Relay, side: Side, fut: asyncio.Future) -> None:
    """A relayed DRS command's reply (None: its connection failed) to the relay."""
    reply = None if fut.cancelled() or fut.exception() is not None else fut.result()
    code, text = (reply.code, reply.first) if reply is not None else (None, "")
    relay.on_reply(side, time.monotonic(), code, text)


def copy_error(reason: str, reply: Reply | None, resumable: bool = True) -> FTPError:
    """A failed copy's sentence, with --continue's hint when a rerun can
    resume (``resumable``, and a lost connection or a 4yz reply)."""
    resume = resumable and (reply is None or 400 <= reply.code < 500)
    hint = "; --continue resumes what the destination lacks" if resume else ""
    return FTPError(reason.rstrip(".") + hint, reply)


@dataclass
class RunOutcome:
    seconds: float = 0.0
    timed_out: bool = False
    streams_start: int | None = None
    changes: list[dict] = field(default_factory=list)  # -P auto: when the stream count changed
    timeline: list[dict] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)  # B's 111 Range Markers (MODE E)


class CopyRun:
    """``view(done, rate_bps, rtt, window)``: the bar; ``on_marker(text)``:
    the text of B's range markers (MODE E resume record)."""

    def __init__(self, pair: ServerPair, spec: CopySpec, *, auto: PathStreams | None = None,
                 idle_timeout: float = 60.0, deadline: Deadline | None = None,
                 view: Callable[[int, float, float | None, int | None], None] | None = None,
                 on_marker: Callable[[str], None] | None = None) -> None:
        self.pair, self.spec = pair, spec
        self.flow = CopyFlow(spec, names={side: pair.label(side) for side in Side})
        self.relay = Relay(pair.drs(Side.SOURCE), pair.drs(Side.DEST))
        self.relay.bytes_base = pair.dest_bytes if spec.cached else 0
        self.auto, self.idle_timeout, self.deadline = auto, idle_timeout, deadline
        self.view, self.on_marker = view, on_marker
        self.flows = {side: FlowControl(pair.ctl(side)) for side in Side}
        self.steps: dict[Side, list[tuple[Command, Pending]]] = {Side.SOURCE: [], Side.DEST: []}
        self.transfer: dict[Side, Pending] = {}
        self.passive: tuple[Side, Pending] | None = None
        self.left = (spec.size - sum(b - a for a, b in spec.held)) if spec.size is not None else None
        self.moved = 0
        self.out = RunOutcome(streams_start=spec.streams if auto is not None else None)
        self.streams = spec.streams
        self.drs_answered: set[Side] = set()  # sides that answered a relayed DRS (any code) in this run

    # -- what the job's fleet controller reads (drsftp.client.trees.job.fleet) -------------
    def samples(self) -> list[StreamSample]:
        return relay_samples(self.relay)

    # -- sending -----------------------------------------------------------------------------
    def _send(self, cmd: Command) -> Pending:
        if self.spec.cached:
            pending = self.pair.ctl(cmd.side).start(cmd.line)
        else:
            try:
                pending = self.flows[cmd.side].send(cmd.line)
            except FlowError as exc:  # a sequence the table does not allow: a bug here, said plainly
                raise FTPError(f"{cmd.what} cannot be sent now: {exc}", transient=False) from exc
        verb = cmd.line.split(" ", 1)[0]
        if verb in TRANSFER_VERBS:
            self.transfer[cmd.side] = pending
            if cmd.side is Side.DEST and self.on_marker is not None:
                pending.on_mark = self._marker
        elif verb == "PASV":
            self.passive = (cmd.side, pending)
        else:
            self.steps[cmd.side].append((cmd, pending))
        return pending

    def _marker(self, reply: Reply) -> None:
        if reply.code == 111 and self.on_marker is not None:
            text = reply.first
            self.out.markers.append(text)
            self.on_marker(text)

    async def _reply(self, side: Side, pending: Pending, timeout: float = 60.0) -> Reply:
        """A reply in its side's order, through its flow (not on cached streams)."""
        if self.spec.cached:
            return await self.pair.ctl(side).final_reply(pending, timeout)
        return await self.flows[side].reply(pending, timeout)

    # -- the run ---------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        """The copy; an FTPError naming the side and command that failed it.
        Cancelled (Ctrl-C; a job that stops): both transfers are aborted
        before the cancellation goes on, so neither server keeps copying
        once the client is gone (its QUIT alone would let them finish,
        RFC 959 4.1.1)."""
        try:
            return await self._run()
        except asyncio.CancelledError:
            await self._abort(Failed(Side.DEST, "interrupted", None, tuple(Side)))
            raise

    async def _run(self) -> RunOutcome:
        for cmd in self.flow.opening():
            self._send(cmd)
        while self.passive is not None:  # (B's PASV; A's, where B refused it in stream mode)
            side, pending = self.passive
            self.passive = None
            try:
                failed = await self._steps(side)
                if failed is not None:
                    raise FTPError(failed.reason, failed.reply)
                reply = await self._reply(side, pending)
            except FTPError as exc:
                if exc.reply is not None:
                    raise
                raise FTPError(self.flow.lost(side, str(exc)).reason) from exc
            try:
                for cmd in self.flow.passive(side, reply):
                    self._send(cmd)
            except CopyError as exc:
                raise FTPError(str(exc), reply, transient=False) from exc
        if not self.spec.mode_e:  # stream mode: the transfer command after PORT's 200
            active = self.flow.active_side
            failed = await self._steps(active)
            if failed is not None:
                await self._abort(failed)
                raise FTPError(failed.reason, failed.reply)
            for cmd in self.flow.port_accepted():
                self._send(cmd)
        return await self._data_phase()

    async def _steps(self, side: Side) -> Failed | None:
        """The replies to ``side``'s commands sent so far before its
        transfer command, in order; a refusal fails the copy (ALLO's
        aside: a server may not need it, RFC 959 4.1.3)."""
        steps, self.steps[side] = self.steps[side], []
        for cmd, pending in steps:
            reply = await self._reply(side, pending)
            if not 200 <= reply.code < 400 and not cmd.line.startswith("ALLO"):
                return self.flow.refused(cmd, reply)
        return None

    async def _side(self, side: Side) -> Reply | Failed:
        """``side``'s replies in order: its steps, then its transfer
        command's final reply."""
        failed = await self._steps(side)
        if failed is not None:
            return failed
        pending = self.transfer[side]
        if not self.spec.cached:
            first = await self.pair.ctl(side).first_reply(pending, None)
            self.flows[side].flow.receive(pending.verb, first)
            if not first.preliminary:
                return first
        reply = await self.pair.ctl(side).final_reply(pending, None)
        if not self.spec.cached:
            self.flows[side].ended(pending, reply)
        return reply

    async def _data_phase(self) -> RunOutcome:
        started = time.monotonic()
        tasks = {side: asyncio.ensure_future(self._side(side)) for side in Side}
        last_progress = (started, -1)
        try:
            while True:
                await asyncio.wait([t for t in tasks.values() if not t.done()], timeout=TICK,
                                   return_when=asyncio.FIRST_COMPLETED)
                now = time.monotonic()
                for side, task in tasks.items():
                    if not task.done() or side in self.flow.finals:
                        continue
                    outcome = self._outcome(side, task)
                    if isinstance(outcome, Failed):
                        outcome = await self._cause(outcome)
                        connected = self._connected(outcome.side.other)  # (before the ABOR ends it)
                        await self._abort(outcome)
                        raise self._failure(outcome, connected)
                    if isinstance(outcome, Done):
                        self.out.seconds = now - started
                        self.moved = self.left if self.left is not None else self.relay.moved()
                        self._look(now, started)
                        return self.out
                self._relay(now)
                self._look(now, started)
                if self.deadline is not None and self.deadline.passed:
                    self.out.timed_out = True
                    self.out.seconds = now - started
                    await self._abort(Failed(Side.SOURCE, "--max-time", None, tuple(Side)))
                    return self.out
                if self.moved != last_progress[1]:
                    last_progress = (now, self.moved)
                elif self.relay.series[Side.DEST] and now - last_progress[0] > self.idle_timeout:
                    reason = f"the copy stalled: nothing reached the destination for {self.idle_timeout:.0f} s"
                    await self._abort(Failed(Side.DEST, reason, None, tuple(Side)))
                    raise FTPError(reason)
        finally:
            for task in tasks.values():
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            self.pair.dest_bytes = self.relay.latest(Side.DEST).get(BYTES, self.pair.dest_bytes)

    def _outcome(self, side: Side, task: asyncio.Future) -> Done | Failed | None:
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, FTPError) and exc.reply is None:
                return self.flow.lost(side, str(exc))
            raise exc
        result = task.result()
        if isinstance(result, Failed):
            return result
        return self.flow.final(side, result)

    async def _cause(self, failed: Failed) -> Failed:
        """A 426 (the data connection closed, RFC 959 4.2) from one side
        while the other's transfer runs: the other's error reply, if it
        comes within CAUSE_WAIT and is not a 426 too, is the cause (B's 452
        for a full disk closes A's connection, and A's 426 may come first)."""
        other = failed.side.other
        pending = self.transfer.get(other)
        if (failed.reply is None or failed.reply.code != 426 or other not in failed.abort
                or pending is None or self.pair.ctl(other).lost):
            return failed
        await asyncio.wait([pending.final], timeout=CAUSE_WAIT)
        if not pending.final.done() or pending.final.exception() is not None:
            return failed
        reply = pending.final.result()
        return self.flow.cause(failed, reply) if reply.code >= 400 and reply.code != 426 else failed

    def _failure(self, failed: Failed, connected: bool = True) -> FTPError:
        """The sentence for a failed copy: a server whose control
        connection was lost is the cause (its death also ends the other's
        transfer, whose error may come first); with --continue's hint when
        a rerun can resume (a lost connection, a 4yz reply)."""
        other = failed.side.other
        if failed.reply is not None and self.pair.ctl(other).lost:
            failed = self.flow.lost(other, "closed by the server")
        refused = self._refused(failed, connected)
        if refused is not None:
            return FTPError(refused, failed.reply, transient=False)
        return copy_error(failed.reason, failed.reply)

    def _refused(self, failed: Failed, connected: bool) -> str | None:
        """The sentence for a data connection the passive side did not take
        (ftp/thirdparty.py, data_refused), whichever reply comes first: the
        active side's reset, or the passive side's own 421/425 once its
        listener gave up (pyftpdlib's passive timeout).  In stream mode the
        active side answered PORT once connected (port_accepted), so a
        passive side that then took nothing left that connection untaken."""
        flow, passive = self.flow, self.flow.passive_side
        if (failed.side is passive and failed.reply is not None and failed.reply.code in (421, 425)
                and not self.spec.mode_e and not self.spec.cached and not self._passive_took()):
            failed, connected = Failed(flow.active_side, failed.reason, failed.reply, (passive,)), False
        return flow.data_refused(failed, connected, self._passive_took())

    def _passive_took(self) -> int:
        """Bytes the passive side's data channel took, by its own count once
        it answered a relayed DRS (a stream-mode server with no data channel
        answers 425, and reports nothing).  Not the active side's count:
        that is what the passive host's kernel acknowledged, and a
        connection waiting unaccepted holds such bytes until it is dropped.
        A side that never answered: the relay's count (moved)."""
        passive = self.flow.passive_side
        if self.spec.cached or passive not in self.drs_answered:
            return self.moved
        return max(0, self.relay.latest(passive).get(BYTES, 0))

    def _drs_answer(self, side: Side, fut: asyncio.Future) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.drs_answered.add(side)

    def _connected(self, side: Side) -> bool:
        """``side``'s transfer ended, or may have had its data: its byte
        count (the relayed reports) is what tells, as a 150 comes before
        the connection in both modes (pyftpdlib queues a stream-mode STOR)."""
        pending = self.transfer.get(side)
        return pending is None or pending.final.done() or self.relay.latest(Side.DEST).get(BYTES, 0) > 0

    async def _abort(self, failed: Failed) -> None:
        """ABOR to the transfers still running (RFC 959 4.1.3: 426, then
        226), their replies awaited a while; the other side's data then
        ends too (its connection closes).  The destination first: a
        stream-mode file ends at its connection's close (RFC 959 3.4.1),
        so the source's abort must not reach B as the end of the file."""
        for side in (Side.DEST, Side.SOURCE):
            if side not in failed.abort:
                continue
            ctl, pending = self.pair.ctl(side), self.transfer.get(side)
            if ctl.lost or pending is None or pending.final.done():
                continue
            try:
                waits = [ctl.start("ABOR").final, pending.final]
            except FTPError:
                continue
            await asyncio.wait(waits, timeout=ABORT_WAIT)

    # -- while it runs ---------------------------------------------------------------------------
    def _relay(self, now: float) -> None:
        """Relayed DRS: each server that takes part is sent the other's
        latest pairs, once per data-path RTT (drsftp/ftp/relay.py)."""
        for side in Side:
            if side not in self.transfer or side in self.flow.finals or not self.relay.due(side, now):
                continue
            line = self.relay.command(side)
            try:
                pending = (self.pair.ctl(side).start(line) if self.spec.cached
                           else self.flows[side].send(line))
            except (FTPError, FlowError):
                continue  # (the connection is gone, or its transfer has ended)
            self.relay.sent(side, now, line)
            pending.final.add_done_callback(functools.partial(drs_replied, self.relay, side))
            pending.final.add_done_callback(functools.partial(self._drs_answer, side))

    def _look(self, now: float, started: float) -> None:
        """Progress, the bar, the timeline, and -P auto's next decision."""
        self.moved = max(self.moved, self.relay.moved(self.left))
        rtt = self.relay.data_rtt()
        rate = self.relay.rate()
        if self.view is not None:
            self.view(self.moved, rate * 8, rtt, window_of(self.relay.latest(Side.DEST)))
        tl = self.out.timeline
        if len(tl) < TIMELINE_LIMIT and (not tl or now - started - tl[-1]["t"] >= 0.1):
            tl.append({"t": round(now - started, 4), "bytes": self.moved, "rate_bps": round(rate * 8),
                       "rtt_ms": round(rtt * 1000, 3) if rtt else None, "streams": self.streams})
        if self.auto is None or Side.SOURCE not in self.transfer:
            return
        left = self.left - self.moved if self.left is not None else None
        n = self.auto.update(now, rtt, self.moved, self.relay.retransmits(), left)
        if n is None:
            return
        if not self.relay.exchanges[Side.SOURCE].enabled:
            self.auto.refused(self.streams)  # (a server that cannot be asked: it keeps its streams)
            return
        self.relay.wanted_streams = n  # with A's next DRS
        self.streams = n
        self.out.changes.append({"t": round(now - started, 3), "streams": n})
