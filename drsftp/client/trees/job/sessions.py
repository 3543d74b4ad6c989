"""A dataset job's sessions: opened ahead while the job walks and plans,
handed to its workers and listers, kept alive by NOOP while they wait,
and dropped and replaced once the server closed them (docs/DATASETS.md,
"What a job does", "Idle sessions"); and what a failure says of the
session it happened on."""

from __future__ import annotations

import asyncio
import time

from ....ftp.safepath import UnsafePath
from ....ftp.url import FTPLocation
from ...session.control import FTPError
from ...transfer.getput import TransferOptions
from ..remote import RemoteSession

# s: a session idle this long sends NOOP (RFC 959 sec. 4.1.3), well within
# servers' idle timeouts (pyftpdlib, vsftpd: 300 s) (DATASETS.md#idle)
KEEPALIVE = 30.0
LOST_AGAIN = 3  # times a file or directory goes back free when its session broke before it started
ERRORS = (FTPError, OSError, UnsafePath, UnicodeError, asyncio.TimeoutError)  # one entry's failure, not the job's


class JobSessions:
    """The sessions of one job: ``spare`` ones waiting for a worker or a
    lister, ``opening`` ones still logging in (prefetched), ``live`` the
    count from log-in to close; ``allowed``, how many the job may hold
    (-c N, or the fleet controller's count)."""

    def __init__(self, loc: FTPLocation, topts: TransferOptions, pipeline: bool, allowed: int) -> None:
        self.loc, self.topts, self.pipeline = loc, topts, pipeline
        self.allowed = allowed
        self.spare: list[RemoteSession] = []
        self.opening: list[asyncio.Future] = []  # sessions prefetched, still logging in
        self._closing: set[asyncio.Future] = set()  # sessions the server closed, closing here
        self.live = 0  # sessions open now
        self.most_live = 0
        self.rtt: float | None = None
        self.pinged = time.monotonic()  # the last round of NOOPs on idle sessions (ping_idle_if_due)

    def prefetch(self, n: int) -> None:
        """Open up to ``n`` more sessions in the background, while the job
        still walks and plans: a session costs three round trips before its
        first command (connection, greeting, log-in)."""
        for _ in range(max(0, n - len(self.opening))):
            fut = asyncio.ensure_future(self._open())
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # read by session() or dropped
            self.opening.append(fut)

    async def first_session(self, queries: tuple[str, ...], listing: str | None = None) -> RemoteSession:
        """The job's first session, ``queries`` (and ``listing``) sent with its log-in."""
        sess = await RemoteSession.open_asking(self.loc, self.topts, queries, listing)
        self._count(sess)
        return sess

    async def session(self) -> RemoteSession:
        sess = self.take_spare()
        if sess is not None:
            return sess
        while self.opening:
            try:
                sess = await self.opening.pop(0)
            except ERRORS:
                continue  # (the server may take fewer sessions: open one the usual way)
            if not sess.ctl.lost:
                return sess
            self.discard(sess)
        return await self._open()

    def take_spare(self) -> RemoteSession | None:
        """A spare session still open; those the server closed while they
        waited (its idle timeout) are dropped (DATASETS.md#idle)."""
        while self.spare:
            sess = self.spare.pop()
            if not sess.ctl.lost:
                return sess
            self.discard(sess)
        return None

    def give_back(self, sess: RemoteSession | None) -> None:
        """A worker's session at its end: spare for the others unless closed here."""
        if sess is not None and not sess.ctl.closed:
            self.spare.append(sess)

    def discard(self, sess: RemoteSession) -> None:
        """A session the server closed: out of the count now, closed here
        in the background (close_spare waits for it)."""
        self.live -= 1
        task = asyncio.ensure_future(sess.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def idle_sessions(self) -> list[RemoteSession]:
        """Spare sessions and prefetched ones that have logged in."""
        opened = [f.result() for f in self.opening if f.done() and not f.cancelled() and f.exception() is None]
        return self.spare + opened

    async def trim_spare(self) -> None:
        """After the walk: spare sessions beyond what the workers can still
        take (the walk's own, DATASETS.md#walk) are closed, not left idle.
        With no worker holding one, the walk's are all the job has (run_queue)."""
        # (a prefetched session that has logged in is counted live, and is
        # the workers' as those still opening are: not busy)
        busy = self.live - len(self.spare) - (len(self.idle_sessions()) - len(self.spare))
        if busy <= 0:
            return
        extra = len(self.spare) - max(0, self.allowed - busy - len(self.opening))
        if extra > 0:
            closing, self.spare = self.spare[:extra], self.spare[extra:]
            await asyncio.gather(*(self.drop(s) for s in closing), return_exceptions=True)

    async def _open(self) -> RemoteSession:
        return self._count(await RemoteSession.open(self.loc, self.topts))

    def _count(self, sess: RemoteSession) -> RemoteSession:
        sess.pipeline = self.pipeline
        self.live += 1
        self.most_live = max(self.most_live, self.live)
        self.rtt = self.rtt or sess.rtt
        return sess

    async def drop(self, sess: RemoteSession) -> None:
        self.live -= 1
        await sess.close()

    async def close_spare(self) -> None:
        for fut in self.opening:
            fut.cancel()
        opened = await asyncio.gather(*self.opening, return_exceptions=True)
        self.opening.clear()
        self.spare.extend(s for s in opened if isinstance(s, RemoteSession))
        spare, self.spare = self.spare, []
        await asyncio.gather(*(self.drop(s) for s in spare), *self._closing, return_exceptions=True)

    # -- keeping idle sessions alive (DATASETS.md#idle) ----------------------------------
    def ping_idle_if_due(self, now: float) -> None:
        """A NOOP on each idle session once KEEPALIVE s have passed since
        the last round (from a loop that ticks more often: the job's monitor)."""
        if now - self.pinged >= KEEPALIVE:
            self.pinged = now
            for sess in self.idle_sessions():
                keep_alive(sess)

    async def keep_idle_alive(self) -> None:
        """A NOOP on each idle session every KEEPALIVE s, until cancelled
        (while a walk runs)."""
        for _ in range(10 ** 7):  # bounded: cancelled when the walk ends
            await asyncio.sleep(KEEPALIVE)
            for sess in self.idle_sessions():
                keep_alive(sess)


def keep_alive(sess: RemoteSession) -> None:
    """A NOOP on an idle session (RFC 959 sec. 4.1.3), so the server's
    idle timeout does not close it; only while no reply is awaited on it:
    never beside a transfer (on a MODE E session, nor between the
    commands of one)."""
    ctl = sess.ctl
    if ctl.lost or ctl.router.pending:
        return
    try:
        ctl.send_unwaited("NOOP")  # (its reply is paired and dropped: replies come in order)
    except FTPError:
        pass


async def idle_wait(event: asyncio.Event, sess: RemoteSession | None) -> None:
    """Until ``event`` is set; ``sess``, idle meanwhile, sends a NOOP
    every KEEPALIVE s (DATASETS.md#idle)."""
    for _ in range(10 ** 7):  # bounded: the event comes with the walk's end
        if sess is None or sess.ctl.lost:
            await event.wait()
            return
        try:
            await asyncio.wait_for(event.wait(), KEEPALIVE)
            return
        except TimeoutError:
            keep_alive(sess)


def check_cancelled() -> None:
    """Python 3.11's wait_for returns a result that arrived together with
    a cancel and drops the cancel (gh-86296, fixed in 3.12); the task
    still counts it, so a worker stops here on Ctrl-C."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def broken(exc: BaseException) -> bool:
    """The session is unusable after this: the connection is gone, or the
    server said it closes it (421 answers any command then: RFC 959 sec. 4.2)."""
    if not isinstance(exc, (FTPError, asyncio.TimeoutError)):
        return False
    reply = getattr(exc, "reply", None)
    return reply is None or reply.code == 421


def lost_before(sess: RemoteSession, begun: int, exc: BaseException) -> bool:
    """The session was lost (closed, or a 421) before the server started
    the transfer or listing asked for: no 1yz since it had ``begun``
    (RemoteSession.transfers).  A data connection refused on a live
    session is the file's own failure."""
    reply = getattr(exc, "reply", None)
    closed = sess.ctl.lost or (reply is not None and reply.code == 421)
    return broken(exc) and closed and sess.transfers == begun
