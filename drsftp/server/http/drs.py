"""The socket controllers of the HTTP side (docs/HTTP.md, "DRS").

Each connection gets a SocketTuner per direction as a body first moves on
it: SENDER while a response body streams, RECEIVER while a request body
is read (docs/DESIGN.md#socket-controller).  A tuner outlives its request,
so the ranged requests a drsftp client sends one after another on a
connection are tuned as one flow; it is ticked by the loop while a body
moves, and closed (its share of the buffer budget given back, after the
queued data drains: SocketController.close) when the connection closes or
has moved nothing in that direction for IDLE_RELEASE seconds.  A request's
``DRS`` header (http/drsheader.py) feeds its pairs to the tuner of the
direction the request's body travels (the response's, for a request
without one), and the response carries that tuner's report.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...io import sockopt
from ...io.tuner import SocketTuner
from ...tuning import Role
from ...tuning.budget import BufferBudget

if TYPE_CHECKING:
    from .auth import Login

log = logging.getLogger("drsftp.server")

FIRST_TICK = 0.005  # s: the tunings' shortest tick (docs/decisions/0007-five-ms-ticks.md)
IDLE_RELEASE = 5.0  # s a direction may rest before its tuner gives its budget back


@dataclass(frozen=True)
class Settings:
    spec: str = "drs"
    allow_force: bool = False
    limits: sockopt.HostLimits | None = None
    budget: BufferBudget | None = None

    def tuner(self, role: Role) -> SocketTuner:
        """A socket tuner of the HTTP side: reads unbatched (decision 0046), no timeline."""
        return SocketTuner(self.spec, role, allow_force=self.allow_force, limits=self.limits, budget=self.budget,
                           batch_reads=False, timeline=False)


@dataclass
class _Flow:
    tuner: SocketTuner
    moved: int = 0  # bytes, since the tuner started
    active: int = 0  # bodies moving now
    tick: asyncio.TimerHandle | None = None
    idle: asyncio.TimerHandle | None = None


@dataclass
class Connection:
    """One connection: its tuners, by direction, and whether a request is
    being answered on it (front.py's watchdog closes one idle too long)."""

    sock: object
    settings: Settings
    peer: str = "?"  # the client's address (front.py counts connections by it)
    flows: dict[Role, _Flow] = field(default_factory=dict)
    closed: bool = False
    busy: int = 0  # requests being answered
    idle_since: float = field(default_factory=time.monotonic)

    def request_ended(self) -> None:
        self.busy -= 1
        self.idle_since = time.monotonic()

    def tuner(self, role: Role, create: bool = True) -> SocketTuner | None:
        """``role``'s tuner; with ``create`` False, only one already made."""
        flow = self._flow(role) if create else self.flows.get(role)
        return flow.tuner if flow is not None else None

    def _flow(self, role: Role) -> _Flow | None:
        if self.closed:
            return None
        flow = self.flows.get(role)
        if flow is None:
            # One direction's tuner sets both buffers (a sender keeps its
            # receive buffer to ACKs' size and locks it): a resting tuner of
            # the other direction steps aside before this one attaches, which
            # then sets both anew (docs/HTTP.md, "DRS").
            other = Role.RECEIVER if role is Role.SENDER else Role.SENDER
            if other in self.flows and not self.flows[other].active:
                self._drop(other)
            try:
                tuner = self.settings.tuner(role)
                tuner.note_control_rtt(self.sock)  # the connection's RTT so far: the same path's
                tuner.attach(self.sock)  # type: ignore[arg-type]
            except OSError as exc:  # the socket closed under us
                log.debug("http: no tuning on a closing socket: %s", exc)
                return None
            flow = self.flows[role] = _Flow(tuner)
            # (a tuner made for a report, whose body never moves, rests from now)
            flow.idle = asyncio.get_running_loop().call_later(IDLE_RELEASE, self._drop, role)
        return flow

    def begin(self, role: Role) -> None:
        """A body starts moving in ``role``'s direction."""
        flow = self._flow(role)
        if flow is None:
            return
        flow.active += 1
        if flow.idle is not None:
            flow.idle.cancel()
            flow.idle = None
        if flow.tick is None:
            flow.tick = asyncio.get_running_loop().call_later(FIRST_TICK, self._tick, role)

    def expect(self, role: Role, n: int) -> None:
        """``n`` bytes asked of the peer in ``role``'s direction (a request
        sent): that tuner, if it has run, opens its window for them now."""
        flow = self.flows.get(role)
        if flow is not None:
            flow.tuner.expect(n, flow.moved)

    def moved(self, role: Role, n: int) -> None:
        flow = self.flows.get(role)
        if flow is not None:
            flow.moved += n

    def end(self, role: Role) -> None:
        flow = self.flows.get(role)
        if flow is None:
            return
        flow.active = max(flow.active - 1, 0)
        if not flow.active:
            if flow.tick is not None:
                flow.tick.cancel()
                flow.tick = None
            flow.idle = asyncio.get_running_loop().call_later(IDLE_RELEASE, self._drop, role)

    def _tick(self, role: Role) -> None:
        flow = self.flows.get(role)
        if flow is None:
            return
        flow.tick = None
        try:
            delay = flow.tuner.tick(flow.moved)
        except OSError:  # the socket closed: the connection's end closes the tuner
            return
        if delay is not None and flow.active:
            flow.tick = asyncio.get_running_loop().call_later(delay, self._tick, role)

    def _drop(self, role: Role, lost: bool = False) -> None:
        flow = self.flows.pop(role, None)
        if flow is not None:
            _close(flow, lost)

    def close(self, lost: bool = False) -> None:
        """The connection closed (or the server stops): every tuner's budget
        back; ``lost``: by an error (a reset), so nothing queued drains."""
        self.closed = True
        for role in list(self.flows):
            self._drop(role, lost)


def _close(flow: _Flow, lost: bool = False) -> None:
    for handle in (flow.tick, flow.idle):
        if handle is not None:
            handle.cancel()
    try:
        drain = flow.tuner.close()
    except OSError:
        drain = None
    if drain and not lost:
        asyncio.get_running_loop().call_later(drain, flow.tuner.release)
    else:
        flow.tuner.release()


class Exchange:
    """One request's bodies on its connection: tuned, counted, and bounded
    in time (``timeout``: seconds a body may make no progress; None: no limit)."""

    def __init__(self, request, conn: Connection | None, timeout: float | None) -> None:
        self.request = request
        self.conn = conn
        self.timeout = timeout
        self.sent = self.received = 0
        self.who: Login | None = None  # a transfer's login and path, for its log line
        self.href: str | None = None
        self.headers: dict[str, str] = {}  # the driver's response headers (DRS), refusals' too
        self.drs_peer = False  # the request carried a DRS header
        self.began = False  # a PUT's body began to be stored (a refused one has no log line)
        self.complete = False  # its body went out (GET) or arrived (PUT) whole

    async def send(self, resp, body) -> None:
        """Prepare ``resp`` and stream ``body()`` with the sender's tuner."""
        if self.conn is not None:
            self.conn.begin(Role.SENDER)
        try:
            await self._bounded(resp.prepare(self.request))
            await body()
        finally:
            if self.conn is not None:
                self.conn.end(Role.SENDER)

    async def write(self, resp, data: bytes) -> None:
        await self._bounded(resp.write(data))
        self.sent += len(data)
        if self.conn is not None:
            self.conn.moved(Role.SENDER, len(data))

    async def read(self) -> bytes:
        """The next bytes of the request body (b"" at its end)."""
        data = await self._bounded(self.request.content.readany())
        self.received += len(data)
        if self.conn is not None:
            self.conn.moved(Role.RECEIVER, len(data))
        return data

    async def _bounded(self, aw):
        if self.timeout:
            try:
                return await asyncio.wait_for(aw, self.timeout)
            except TimeoutError:
                raise ConnectionAbortedError(f"no progress for {self.timeout:g} seconds") from None
        return await aw

    def receiving(self) -> _Receiving:
        return _Receiving(self.conn)


class _Receiving:
    """``with exchange.receiving():`` the receiver's tuner runs."""

    def __init__(self, conn: Connection | None) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        if self.conn is not None:
            self.conn.begin(Role.RECEIVER)

    def __exit__(self, *exc) -> None:
        if self.conn is not None:
            self.conn.end(Role.RECEIVER)
