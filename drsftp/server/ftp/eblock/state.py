"""The phase of one control connection's MODE E session, sans-IO: one table
of its legal moves (as drsftp/ftp/flow.py is the client's; docs/EBLOCK.md,
"Session phases").

    STREAM --MODE E--> READY --MODE S--> STREAM       (either MODE again: no move)
    READY --RETR/STOR/MLSD started--> TRANSFER --ended--> READY
    TRANSFER --QUIT--> QUITTING --ended--> CLOSING    (RFC 959 QUIT: the final reply, then the close)

Commands wait while a transfer runs (eblock/commands.py, "Pipelined
transfers" in docs/EBLOCK.md) and none run after QUIT, so MODE and a second
transfer never come during one.  A move the table lacks raises
IllegalMove and leaves the phase as it was.
"""

from __future__ import annotations

import enum


class Phase(enum.Enum):
    __hash__ = object.__hash__  # (members are singletons: Enum's own hash is a Python call, a few a command)

    STREAM = "stream mode"  # MODE S: the stock handler's data path, none of this session's
    READY = "ready"  # MODE E in force, no transfer running
    TRANSFER = "transfer"  # a RETR, STOR or MLSD runs on the streams
    QUITTING = "quitting"  # QUIT came during the transfer: it runs on, then the session closes
    CLOSING = "closing"  # the transfer QUIT waited for ended: the session closes after its final reply


class Event(enum.Enum):
    __hash__ = object.__hash__

    MODE_E = "MODE E"
    MODE_S = "MODE S"
    START = "transfer started"  # its job set, before its 125/150
    END = "transfer ended"  # before its final reply (226, 426, 451...)
    QUIT = "QUIT"  # during a transfer (before one, the stock handler closes at once)


P, E = Phase, Event

# (phase, event) -> the phase after it
TRANSITIONS: dict[tuple[Phase, Event], Phase] = {
    (P.STREAM, E.MODE_E): P.READY,
    (P.STREAM, E.MODE_S): P.STREAM,
    (P.READY, E.MODE_E): P.READY,
    (P.READY, E.MODE_S): P.STREAM,
    (P.READY, E.START): P.TRANSFER,
    (P.TRANSFER, E.END): P.READY,
    (P.TRANSFER, E.QUIT): P.QUITTING,
    (P.QUITTING, E.END): P.CLOSING,
}

RUNNING = frozenset({P.TRANSFER, P.QUITTING})  # a transfer runs
QUIT_CAME = frozenset({P.QUITTING, P.CLOSING})  # the session closes after the transfer's final reply


class IllegalMove(Exception):
    """An event the session's phase does not allow (a bug, never a client's doing)."""


class SessionPhase:
    """Where one MODE E session stands; :meth:`move` is its only way on."""

    def __init__(self) -> None:
        self.now = Phase.STREAM

    def move(self, event: Event) -> Phase:
        nxt = TRANSITIONS.get((self.now, event))
        if nxt is None:
            raise IllegalMove(f"{event.value} in phase {self.now.value}")
        self.now = nxt
        return nxt

    @property
    def extended(self) -> bool:
        """MODE E in force."""
        return self.now is not Phase.STREAM

    @property
    def running(self) -> bool:
        return self.now in RUNNING

    @property
    def quit_came(self) -> bool:
        return self.now in QUIT_CAME
