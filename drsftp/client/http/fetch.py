"""The connections of one HTTP download: ranged GETs into ``DEST.part``.

Ranges come from :class:`~drsftp.client.streams.rangeplan.RangePlan` (a
share per connection, work stealing at the end); each connection asks for
its whole share in one request (at most 64 MiB: drsftp/http/spans.py
``request_end``) and commits it to the plan.  A connection that is done
splits the largest range left, past a request if one is worth it, else
the request in flight (``take(cut=True)``): the victim stops reading at
its new end and closes its connection (RFC 9112 sec. 9.3), the thief
asks for the rest on its kept-alive one.  A connection yet to open (-P
auto's, or a victim's next) cuts nothing (it would trade the victim's
warm connection for one in slow start) and takes only what is worth a
new one (spans.steal_least).  -P auto's ``remove_stream`` lets the connection's
request finish.  A ``206`` must carry the ``Content-Range`` asked for, of
the size the transfer began with (else the file changed: an error, the
part kept).

A server whose ``HEAD`` does not say ``Accept-Ranges: bytes`` (XRootD's)
may serve ranges all the same (RFC 9110 sec. 14.3: a client may send
``Range`` anyway): the first range goes alone, and only its ``206``
starts the other connections; a ``200`` is the whole file, read from
that answer on the one connection.  Every ``Range`` is closed
(``bytes=A-B``): XRootD 5.5 answers ``bytes=A-`` with an empty ``206``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...http import spans
from ...io.fileio import pwrite_all
from ...tuning.count.streams import StreamSample
from ..streams.rangeplan import Assignment, RangePlan
from .errors import HTTPError
from .pool import Pool, Slot

log = logging.getLogger("drsftp.client")
WAKE = 0.25  # seconds between looks at connections added while running
SPEED_AFTER = 0.5  # seconds a request is read before its speed counts (past its slow start)


class NoRange(Exception):
    """A request that found no range to ask for once connected (its connection is kept)."""


class Download:
    """``begin`` gives the file (size, part, validator); connections opened
    before it (``open_early``: while the ``HEAD`` is answered) wait, once
    connected, for it to ask their ranges (``Slot.ready``: pool.py)."""

    def __init__(self, pool: Pool, path: str, connections: int) -> None:
        self.pool, self.path, self.fd, self.plan = pool, path, -1, RangePlan(0)
        self.wanted = connections
        self.validator: str | None = None  # a strong ETag: If-Range (RFC 9110 sec. 13.1.5)
        self.probing = False  # ranges not announced: the first request's answer tells (module docstring)
        self.whole = False  # that answer was 200: the whole file, on one connection
        self.resumed = 0  # what the part held at the start (0 once a 200 started it over)
        self.moved = 0
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.slots: dict[int, Slot] = {}
        self._next_id = 0
        self._retired: set[int] = set()  # connections -P auto ended: they take no new range
        self.requests = 0
        self._begun, self._go = asyncio.Event(), asyncio.Event()  # the file is known; ranges may be asked
        self._abandoned = False
        self._prober: int | None = None  # the connection whose range goes alone (probing)
        self._asked: dict[int, tuple[Assignment, int]] = {}  # a connection's request: its range, its end
        self._used: set[int] = set()  # ids of the Links that carried a request (kept alive: steal_least)
        self._reading: dict[int, tuple[float, int]] = {}  # a connection's request: its answer's time, offset
        self._speed: dict[int, float] = {}  # bytes/s of a connection's last request read to its end

    def begin(self, fd: int, plan: RangePlan, validator: str | None = None, probe: bool = False) -> None:
        self.fd, self.plan, self.validator, self.probing = fd, plan, validator, probe
        self.resumed = plan.held.total

    @property
    def held(self):  # type: ignore[no-untyped-def]
        return self.plan.held

    def left(self) -> int:
        return self.plan.missing

    def open_early(self, connections: int) -> None:
        """Open ``connections`` before :meth:`begin` (each asks once it is connected and the file known)."""
        for _ in range(connections):
            self._spawn()

    async def abandon(self) -> None:
        """No ranged download after all: the connections opened early end."""
        self._abandoned = True
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()

    async def run(self) -> None:
        self.plan.split(self.wanted)
        self._begun.set()
        if not self.probing:
            self._go.set()
        for _ in range((1 if self.probing else self.wanted) - len(self.tasks)):
            self._spawn()
        try:
            while self.tasks:
                done, _ = await asyncio.wait(list(self.tasks.values()), timeout=WAKE,
                                             return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    self.tasks = {k: t for k, t in self.tasks.items() if t is not task}
                    task.result()  # (a connection's error ends the transfer)
        finally:
            self._abandoned = True
            self._go.set()
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    # -- what -P auto steers (streams/autosteer.py) -----------------------------
    def add_stream(self) -> bool:
        if ((self.probing and self.tasks) or len(self.tasks) >= self.pool.connections
                or not self.plan.can_take(least=spans.steal_least(False))):
            return False
        self._spawn()
        return True

    def _spawn(self) -> None:
        wid, self._next_id = self._next_id, self._next_id + 1
        self.tasks[wid] = asyncio.ensure_future(self._worker(wid))

    def remove_stream(self) -> bool:
        """The newest connection stops once its request ends (what it had
        left past it goes back to the plan)."""
        running = [w for w in self.tasks if w in self.plan.active and w not in self._retired]
        if len(running) <= 1:
            return False
        self._retired.add(max(running))
        self.plan.give_back(max(running))
        return True

    def samples(self) -> list[StreamSample]:
        out = []
        for wid, slot in self.slots.items():
            if wid in self.tasks and slot.link is not None:
                ctl = slot.link.tuner.ctl
                out.append(StreamSample(ctl.last_rtt, ctl.stats.rtt_min, ctl.stats.retransmits))
        return out

    # -- one connection ----------------------------------------------------------
    async def _worker(self, wid: int) -> None:
        try:
            while wid not in self._retired and not self.whole:
                if not await self._fetch(wid) and not self.plan.can_take(least=spans.steal_least(False)):
                    break  # (cut: no range worth a new connection, none opened to learn it)
        except NoRange:
            pass
        finally:
            self.plan.release(wid)

    async def _ask(self, wid: int, slot: Slot) -> dict[str, str]:
        """The headers of ``wid``'s next GET, once its connection is up: its
        range's next request, or a range taken now (a free share, or a steal:
        a cut only on a connection kept alive, module docstring)."""
        await self._begun.wait()
        if self.probing and self._prober is None:
            self._prober = wid  # (its range goes alone)
        elif wid != self._prober:
            await self._go.wait()
        if self._abandoned or self.whole or wid in self._retired:
            raise NoRange
        asg = self.plan.active.get(wid)
        if asg is None:
            kept = slot.link is not None and id(slot.link) in self._used
            asg = self.plan.take(wid, cut=kept, least=spans.steal_least(kept), speeds=self._speeds(wid),
                                 delay=self.pool.handshake_rtt() or 0.0)
            if asg is None:
                raise NoRange
        end = spans.request_end(asg.pos, asg.end)
        self.plan.commit(wid, end)
        self._asked[wid] = (asg, end)
        self.requests += 1
        if slot.link is not None:  # (its window opens for the range before it comes: DESIGN.md#drs-demand)
            slot.link.tuner.expect(end - asg.pos)
        headers = {"Range": spans.range_header(asg.pos, end)}
        if self.validator:
            headers["If-Range"] = self.validator
        return headers

    def _speeds(self, thief: int) -> dict[int, float]:
        """Each reading connection's speed in its request (once it has read
        for SPEED_AFTER), and the thief's in its last one (rangeplan.cut_point)."""
        now, out = time.monotonic(), {}
        for w, (t0, p0) in self._reading.items():
            asg = self.plan.active.get(w)
            if asg is not None and now - t0 >= SPEED_AFTER:
                out[w] = (asg.pos - p0) / (now - t0)
        if thief in self._speed:
            out[thief] = self._speed[thief]
        return out

    async def _fetch(self, wid: int) -> bool:
        """One ranged GET, its range asked once connected (:meth:`_ask`),
        read to its end or to where a thief split it (then its connection
        is closed: module docstring, and False)."""
        async with self.pool.request("GET", self.path, ok=(200, 206),
                                     ready=lambda slot: self._ask(wid, slot)) as (resp, slot):
            asg, end = self._asked.pop(wid)
            self.slots[wid] = slot
            if slot.link is not None:
                self._used.add(id(slot.link))
            if resp.status == 200 and self.probing:
                asg = self._start_over(wid, resp.content_length)
                stop = asg.end
                self.plan.commit(wid, stop)
            elif resp.status == 200:  # (a Range ignored, or If-Range failed: RFC 9110 sec. 13.1.5)
                raise HTTPError(f"{self.pool.loc.url(self.path)}: the server sent the whole file to a ranged"
                                " request (HTTP 200): it changed since the transfer began, or ignores ranges"
                                " it said it serves; --continue resumes", 200, transient=False)
            else:
                got = spans.parse_content_range(resp.headers.get("Content-Range"))
                if got is None or got[0] != asg.pos or got[1] > end or got[2] != self.plan.size:
                    raise HTTPError(f"{self.pool.loc.url(self.path)}: the server answered bytes"
                                    f" {resp.headers.get('Content-Range', '(none)')[:60]} to a request for"
                                    f" {asg.pos}-{end - 1} of {self.plan.size} (did the file change?); --continue"
                                    " resumes", transient=False)
                stop = got[1]
                if self.probing:  # it serves ranges: the other connections start
                    self.probing = False
                    self._go.set()
                    for _ in range(self.wanted - len(self.tasks)):
                        self.add_stream()
            # read to ``stop``, or to where a thief split this request (asg.end)
            t0, p0 = self._reading[wid] = (time.monotonic(), asg.pos)  # (its answer came: its first bytes)
            link = slot.link
            whole = resp.status == 200
            async for chunk in resp.content.iter_any():
                n = min(len(chunk), min(stop, asg.end) - asg.pos)
                if whole and n < len(chunk):  # (the whole file, longer than its size: it changed)
                    raise HTTPError(f"{self.pool.loc.url(self.path)}: the server sent more than the"
                                    f" {self.plan.size} bytes it gave as the file's size (did the file change?);"
                                    " --continue resumes", 200, transient=False)
                if n > 0:
                    pwrite_all(self.fd, memoryview(chunk)[:n], asg.pos)
                    self.plan.advance(wid, n)
                    self.moved += n
                    if link is not None:
                        link.moved(n)
                if asg.end < stop and asg.done:
                    break
            if asg.pos < min(stop, asg.end):
                raise HTTPError(f"{self.pool.loc.url(self.path)}: the server ended a range at {asg.pos},"
                                f" before {min(stop, asg.end)} (--continue resumes)")
            cut = asg.end < stop
            if cut:  # the connection cannot carry another request (RFC 9112 sec. 9.3)
                resp.close()
            del self._reading[wid]
            elapsed = time.monotonic() - t0
            if elapsed >= SPEED_AFTER and not cut:
                self._speed[wid] = (asg.pos - p0) / elapsed
        if asg.done:
            self.plan.release(wid)
        return not cut

    def _start_over(self, wid: int, length: int | None) -> Assignment:
        """The first range was answered 200: the whole file follows, which
        this connection reads from byte 0 (the other connections never
        start); a part resumed is written over."""
        if length is not None and length != self.plan.size:
            raise HTTPError(f"{self.pool.loc.url(self.path)}: the server sent {length} bytes as the whole file,"
                            f" not the {self.plan.size} it gave first (did the file change?)", 200, transient=False)
        if self.resumed:
            log.warning("%s does not serve byte ranges: --continue starts over", self.pool.loc.url(self.path))
        self.probing, self.whole, self.resumed = False, True, 0
        self._go.set()  # (the connections waiting for ranges end: NoRange)
        self.plan.release(wid)
        self.plan = RangePlan(self.plan.size)
        asg = self.plan.take(wid)
        assert asg is not None  # (a probe is sent only for a file of a byte or more)
        return asg


class WholeDownload:
    """One plain GET from byte 0 (a server that does not take ranges)."""

    def __init__(self, pool: Pool, path: str, fd: int, size: int | None) -> None:
        self.pool, self.path, self.fd, self.size = pool, path, fd, size
        self.moved = 0
        self.resumed = 0  # (it starts over)
        self.slot: Slot | None = None

    def left(self) -> int:
        return max(0, (self.size or 0) - self.moved)

    def samples(self) -> list[StreamSample]:
        link = self.slot.link if self.slot is not None else None
        return [] if link is None else [StreamSample(link.tuner.ctl.last_rtt, link.tuner.ctl.stats.rtt_min)]

    async def run(self) -> None:
        async with self.pool.request("GET", self.path, ok=(200,)) as (resp, slot):
            self.slot = slot
            if None not in (self.size, resp.content_length) and resp.content_length != self.size:
                raise HTTPError(f"{self.pool.loc.url(self.path)}: the server sent {resp.content_length} bytes"
                                f" as the whole file, not the {self.size} it gave first (did the file change?)",
                                200, transient=False)
            expected = resp.content_length if resp.content_length is not None else self.size
            async for chunk in resp.content.iter_any():
                if expected is not None and self.moved + len(chunk) > expected:  # (nothing past it is written)
                    raise HTTPError(f"{self.pool.loc.url(self.path)}: the server sent more than the {expected}"
                                    " bytes it gave as the file's size (did the file change?)", 200, transient=False)
                pwrite_all(self.fd, chunk, self.moved)
                self.moved += len(chunk)
                if slot.link is not None:
                    slot.link.moved(len(chunk))
            if expected is not None and self.moved != expected:
                raise HTTPError(f"{self.pool.loc.url(self.path)}: short transfer: {self.moved} of {expected} bytes")
