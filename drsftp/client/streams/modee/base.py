"""What a client's extended-block-mode transfers share (GFD.20;
docs/PARALLEL.md, "Extended block mode"): their streams, each with its own
SocketTuner, the streams' tasks, and one DRS exchange per session.

The side that sends the data connects: a put connects its streams
(:meth:`ModeESession.connect_stream`), a get accepts the server's
(:meth:`ModeESession.accept_streams`), both through the one opener
(:mod:`.dataconn`).  Over TLS (PROT P) every stream runs TLS with the
client as TLS client whichever side connected (RFC 4217 sec. 10), checked
as the control connection and offered its session (docs/EBLOCK.md, "TLS on
the streams").  Against a server that offers DRS one DRS command carries
the session's sums over its live streams (the least RTT; a sender adds
``streams=N``) and the peer's sums are split evenly before each tuner
takes them (docs/PARALLEL.md; :mod:`drsftp.ftp.drsexchange`).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections import deque
from dataclasses import replace

from ....ftp import drsexchange
from ....io.tuner import SocketTuner
from ....tuning import Role
from ....tuning.count import sharing
from ....tuning.count.streams import StreamSample
from ....tuning.wirekeys import STREAMS
from ...session.control import ControlConnection, FTPError
from ...transfer.dataconn import accept_data, connect_data, open_tls_stream, tls_handshake
from ...transfer.drsclient import DRSDriver, DRSFigures, Send, drs_enabled
from ...transfer.options import TransferOptions
from .stream import BlockStream

ACCEPT_LIMIT = 256  # data connections one RETR may open, at most (a hostile server's flood)


class ModeESession(DRSFigures):
    """What get and put share: the streams, their tuners, the DRS sums."""

    role: Role
    timeline = True  # the streams' tuners keep a timeline (a cached session's do not: CachedSession)

    def __init__(self, ctl: ControlConnection, opts: TransferOptions, wanted: int) -> None:
        self.ctl, self.opts = ctl, opts
        self.wanted = wanted  # the streams asked for (-P, or -P auto's number now)
        self.opened: list[BlockStream] = []  # every stream opened, in order; ended ones too
        self.drs = DRSDriver(drs_enabled(ctl, opts), self._on_peer_report)
        # how a DRS command goes out: through the transfer's flow where there
        # is one (DRS only while it runs); a cached session's many transfers
        # on one data address are not the flow's (docs/PARALLEL.md)
        self.send_drs: Send = ctl.start
        self.done = False
        self._tasks: set[asyncio.Task] = set()
        self._rate_marks: deque[tuple[float, int]] = deque()  # (time, received): rate(window)

    def spawn(self, coro) -> None:
        """A background task, referenced until it ends (the loop keeps only
        weak references)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def end_tasks(self) -> None:
        """Cancel the background tasks and wait for them: a cancelled
        sock_accept removes its reader one loop turn later, by which time a
        closed listener's descriptor may belong to a new transport."""
        tasks = list(self._tasks)
        self.cancel_tasks()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def moved(self) -> int:
        return sum(s.bytes for s in self.opened)

    @property
    def received(self) -> int:
        """Bytes the streams carried (the cached sessions' ``moved`` counts
        only their open files)."""
        return sum(s.bytes for s in self.opened)

    def rate(self, window: float | None = None) -> float:
        """Bytes per second the streams carried since the first opened; with
        ``window``, over about the last ``window`` seconds (from a mark kept
        at each call): what they carry now, not an average that lags a slow
        start by its whole length."""
        first = min((st.started for st in self.opened), default=None)
        if first is None:
            return 0.0
        now, got = time.monotonic(), self.received
        overall = got / max(now - first, 1e-3)
        if window is None:
            return overall
        marks = self._rate_marks
        marks.append((now, got))
        while len(marks) > 2 and now - marks[1][0] >= window:
            marks.popleft()
        t0, b0 = marks[0]
        return (got - b0) / (now - t0) if now - t0 >= window / 2 else overall

    async def connect_stream(self, host: str, port: int) -> BlockStream:
        """One stream connected to the server (the side that sends connects,
        GFD.20), tuned from before its handshake; OSError/TimeoutError if
        it cannot be."""
        tuner = self.new_tuner()
        sock = await connect_data(self.ctl, (host, port), tuner, self.opts.connect_timeout)
        tuner.attach(sock)
        pipe = None
        if self.ctl.tls is not None:
            try:
                pipe = await tls_handshake(sock, self.ctl.tls, self.ctl.host, self.opts.connect_timeout)
            except BaseException:
                sock.close()
                raise
        stream = BlockStream(len(self.opened), sock, tuner, tls=pipe)
        self.opened.append(stream)
        return stream

    def fail(self, exc: FTPError) -> None:
        """A stream the server connected failed its TLS: the transfer cannot
        go on (gets end it here; a put's streams raise from connect_stream)."""
        raise exc

    async def accept_streams(self, listener: socket.socket, protocol) -> None:
        """The server's streams, from the control connection's peer only
        (RFC 2577 sec. 5), each tuned and read by ``protocol(stream)``."""
        loop = asyncio.get_running_loop()
        peer = self.ctl.writer.get_extra_info("peername")[0]
        for _ in range(ACCEPT_LIMIT):
            accepted = await accept_data(listener, {peer, *self.ctl.data_hosts}, self.new_tuner)
            if accepted is None:
                continue
            conn, tuner = accepted
            tuner.attach(conn)
            stream = BlockStream(len(self.opened), conn, tuner)
            self.opened.append(stream)
            factory = functools.partial(protocol, stream)
            if self.ctl.tls is None:
                await loop.create_connection(factory, sock=conn)
                self.spawn(self.tick(stream))
            else:  # each stream's handshake on its own: N round trips at once
                self.spawn(self._secure_stream(conn, factory, stream))

    async def _secure_stream(self, conn: socket.socket, factory, stream: BlockStream) -> None:
        """An accepted stream's TLS, the client's end; a failure fails
        the transfer with its one sentence."""
        assert self.ctl.tls is not None
        try:
            await open_tls_stream(conn, factory, self.ctl.tls, self.ctl.host, self.opts.connect_timeout)
        except FTPError as exc:
            conn.close()
            stream.ended = time.monotonic()
            self.fail(exc)
            return
        except BaseException:  # cancelled with the transfer mid-handshake
            conn.close()
            raise
        self.spawn(self.tick(stream))

    def samples(self) -> list[StreamSample]:
        return [s.sample() for s in self.opened if s.ended is None]

    def path_sample(self) -> sharing.PathSample | None:
        """The path as the senders see it (tuning/count/sharing.py): a get's from
        the server's last DRS report, a put's from our own streams."""
        if self.role is Role.RECEIVER:
            return sharing.from_pairs([self.server_last])
        path = sharing.from_infos(s.tuner.last_info for s in self.opened if s.ended is None)
        # a put's window is our send buffer, and Linux counts no time held by
        # it (tuning/count/sharing.py): its buffer test is left out
        return None if path is None else replace(path, busy_us=None, limited_us=None)

    def cap_windows(self, per_stream: int | None) -> None:
        """-P auto's window for each live stream (None: the host's cap)."""
        for s in self.opened:
            if s.ended is None:
                s.tuner.cap_size(per_stream)

    def new_tuner(self) -> SocketTuner:
        # no read batching: a cached MODE E connection ends with a 17-byte
        # EOD and stays open, below any SO_RCVLOWAT
        tuner = SocketTuner(self.opts.tuning, self.role, allow_force=self.opts.force_buffers, batch_reads=False,
                            parallel=True, timeline=self.timeline)
        tuner.note_control_rtt(self.ctl.writer.get_extra_info("socket"))
        return tuner

    async def tick(self, stream: BlockStream) -> None:
        """The stream's tuner, every fraction of an RTT, while it runs."""
        while stream.ended is None and not self.done:
            delay = max(stream.tuner.tick(stream.bytes) or 0.1, self.tick_floor())
            if stream is next((s for s in self.opened if s.ended is None), None) and self.drs_wanted():
                # one exchange per session, from the first live stream's ticks
                rtt = min((s.tuner.last_rtt for s in self.opened if s.tuner.last_rtt), default=None)
                self.drs.maybe_send(self.send_drs, rtt, self.session_report)
            await asyncio.sleep(delay)

    def tick_floor(self) -> float:
        """Seconds the streams' ticks are at least apart (a cached session
        of small files: CachedSession.tick_floor)."""
        return 0.0

    def drs_wanted(self) -> bool:
        """Whether a DRS exchange says anything now (a cached session: only
        while a file is on the wire)."""
        return True

    def session_report(self) -> dict[str, int]:
        """Sums over the live streams (rtt_us: the least).  A sender adds
        ``streams=N``, the number running; a drsftp server sending (RETR)
        takes streams=N as the number to run, so a receiver sends it only
        to change it (request_streams; docs/EBLOCK.md, "DRS")."""
        live = [s for s in self.opened if s.ended is None] or self.opened[:1]
        streams = len(live) if self.role is Role.SENDER else None
        return drsexchange.session_report((s.tuner.report() for s in live), streams)

    def request_streams(self, n: int) -> None:
        """Ask a drsftp server (the sender) to run ``n`` streams from now on."""
        self.drs.ask(self.send_drs, {STREAMS: n})

    def _on_peer_report(self, pairs: dict[str, int], seconds: float) -> None:
        """The peer's session sums, shared evenly by the live streams' tuners."""
        live = [s for s in self.opened if s.ended is None]
        share = drsexchange.stream_share(pairs, len(live))
        for s in live:
            s.tuner.on_peer_pairs(share)

    def summary(self) -> dict:
        rows = [s.as_dict() for s in self.opened]
        rtts = [r["rtt_min_ms"] for r in rows if r["rtt_min_ms"] is not None]
        avgs = [r["rtt_avg_ms"] for r in rows if r["rtt_avg_ms"] is not None]
        return {"tuning": self.opened[0].tuner.tuning.describe() if self.opened else self.opts.tuning,
                "rtt_min_ms": min(rtts) if rtts else None,
                "rtt_avg_ms": round(sum(avgs) / len(avgs), 3) if avgs else None,
                "retransmits": sum(r["retransmits"] or 0 for r in rows),
                "per_stream": rows}
