"""One MODE E transfer (RETR, STOR, MLSD) in ``drsftp serve``: the streams
that carry it, its data timeout, its end (docs/EBLOCK.md, "Replies during
and after a transfer"; docs/DESIGN.md, "Extended block mode in the server").

A transfer that moves no byte for ``--data-timeout`` seconds fails with
426; a failed transfer's streams leave the cache (their state is unknown).
The kinds are esend.Send (RETR, MLSD) and ereceive.Receive (STOR).
"""

from __future__ import annotations

import time
from typing import Protocol

from ....tuning import Role
from .streams import Session, Stream


class TransferSession(Session, Protocol):
    """One control connection's MODE E state as its transfers see it
    (esession.ESession)."""

    @property
    def data_timeout(self) -> float: ...

    def connect(self) -> Stream | None:
        """A new outgoing stream (connecting), or None."""
        ...

    def job_ended(self, job: Job, complete: bool, failed: bool) -> None:
        """``job`` ended, before its final reply."""
        ...

    def receive_buffer(self) -> bytearray:
        """The session's buffer for reading its streams (one transfer at a time)."""
        ...

    last_markers: float  # when its last 111/112 markers went (time.monotonic; ftp/eblock/receive.py)

    def watch_data(self) -> None:
        """The running transfer's data timeout is watched (one timer a
        session, not one a transfer: Job.check_timeout)."""
        ...


class Job:
    """One RETR/STOR/MLSD in MODE E: its streams, its data timeout."""

    role: Role  # the server's end: its streams of this role carry the transfer

    def __init__(self, session: TransferSession) -> None:
        self.session = session
        self.members: set[Stream] = set()  # the streams that carried it
        self.path: str | None = None  # the file as the client names it (None: a listing)
        self.finished = False
        self.started = self.last = time.monotonic()
        self.timeout = session.data_timeout  # (0: no limit, as pyftpdlib's DTP)

    def arm(self) -> None:
        """Its timers start, once its command's start is done: a transfer
        that ended there (a small file on cached streams) needs none."""
        if not self.finished and self.timeout:
            self.session.watch_data()

    def touch(self) -> None:
        self.last = time.monotonic()

    def check_timeout(self) -> float | None:
        """The session's data timer came: fail if no byte moved for
        ``timeout`` s; else the seconds until it may have (None: it ended)."""
        if self.finished or not self.timeout:
            return None
        idle = time.monotonic() - self.last
        if idle >= self.timeout:
            self.fail(f"426 Data connection timed out ({self.timeout:g} s without data); transfer aborted.")
            return None
        return self.timeout - idle

    @property
    def moved(self) -> int:
        """Payload bytes this transfer moved."""
        raise NotImplementedError

    # -- what a stream's events hand its transfer (estreams.StreamsJob) -----------
    def pump(self, s: Stream) -> None:
        """Send on ``s`` (a sender's: esend.Send)."""
        raise NotImplementedError

    def read(self, s: Stream) -> None:
        """Read from ``s`` (a receiver's: ereceive.Receive)."""
        raise NotImplementedError

    # -- the end -------------------------------------------------------------------
    def _end(self, complete: bool, failed: bool = False) -> bool:
        """The transfer ends (``complete``: with 226), before its final
        reply; ``failed``: the commands held behind it are not run."""
        if self.finished:
            return False
        self.finished = True
        self.session.job_ended(self, complete, failed)
        return True

    def fail(self, reply: str | None) -> None:
        """End with an error reply (None: the session is gone); the
        streams' state is unknown, so they leave the cache."""
        if not self._end(complete=False, failed=True):
            return
        for s in [s for s in self.session.streams if s.role is self.role]:
            s.close()
        self.cleanup()
        if reply:
            self.session.h.respond(reply)

    def cleanup(self) -> None:
        pass
