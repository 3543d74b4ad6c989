"""Commands that wait, so a pipelining client's replies come in its
commands' order (RFC 959 4.2; docs/EBLOCK.md, "Pipelined transfers"):

- behind a refused PASS: pyftpdlib answers it after auth_failed_timeout
  (3 s, against password guessing) but meanwhile ran the commands already
  read behind it, whose "530 Log in first" a client paired with the PASS;
- behind a stream-mode PORT/EPRT still connecting: pyftpdlib answers it
  once connected, and a RETR sent with it got its 150 first
  (ftp/stream/channel.py);
- behind a running MODE E transfer (ftp/eblock/commands.py), all but
  PASSING;
- and once some wait, every command after them, also behind a HASH or
  CKSM that their release started (ftp/hashing.py).

DRS passes even commands that wait: its replies are marked and paired by
the mark (docs/PROTOCOL.md).  Whether the queue itself holds or releases
is :class:`Gate`, moved only by ``TRANSITIONS``; the transfer, the PORT and
the digest are read from their owners.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING

from . import compat

MAX_HELD = 64  # commands one session may have waiting
# what a running MODE E transfer does not make wait: the transfer's own
# controls and a keepalive (docs/EBLOCK.md, "Pipelined transfers")
PASSING = frozenset({"DRS", "ABOR", "STAT", "QUIT", "NOOP"})


class Gate(enum.Enum):
    __hash__ = object.__hash__  # (members are singletons: Enum's own hash is a Python call, two a command)

    OPEN = "open"  # commands run as they come, unless something else holds them
    REFUSED_PASS = "refused pass"  # a refused PASS's reply is still to come: every command waits
    RELEASING = "releasing"  # a waiting command runs: it is not queued again


# (gate, event) -> gate; any other move is a fault of this module (GateError)
TRANSITIONS: dict[tuple[Gate, str], Gate] = {
    (Gate.OPEN, "pass refused"): Gate.REFUSED_PASS,
    (Gate.RELEASING, "pass refused"): Gate.REFUSED_PASS,  # the released command was a PASS, refused
    (Gate.REFUSED_PASS, "pass answered"): Gate.OPEN,
    (Gate.OPEN, "release"): Gate.RELEASING,
    (Gate.RELEASING, "released"): Gate.OPEN,
    (Gate.REFUSED_PASS, "released"): Gate.REFUSED_PASS,  # ... the rest wait for its reply
}


class GateError(RuntimeError):
    """A move ``TRANSITIONS`` does not allow."""


class CommandQueue:
    """The waiting commands, oldest first, and the gate."""

    def __init__(self) -> None:
        self.gate = Gate.OPEN
        self._held: deque[tuple[str, str, str]] = deque()

    def move(self, event: str) -> None:
        try:
            self.gate = TRANSITIONS[(self.gate, event)]
        except KeyError:
            raise GateError(f"{event!r} while the gate is {self.gate.value!r}") from None

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, line: str, cmd: str, arg: str) -> bool:
        """Queue a command; False, not queued, past MAX_HELD."""
        if len(self._held) >= MAX_HELD:
            return False
        self._held.append((line, cmd, arg))
        return True

    def next(self) -> tuple[str, str, str]:
        return self._held.popleft()

    def drop(self) -> list[str]:
        """Empty the queue: the verbs it held, oldest first."""
        held, self._held = self._held, deque()
        return [cmd for _line, cmd, _arg in held]


if TYPE_CHECKING:  # its super() calls go to the stream-mode handler
    from pyftpdlib.handlers import FTPHandler as _Handler
else:
    _Handler = object


class WaitingCommands(_Handler):
    """Mixed in before DRSControlMixin: a released command meets its
    refusals as any other.  ``holding_transfer`` and
    ``abort_holding_transfer`` are the MODE E transfer's
    (ftp/eblock/commands.py)."""

    def __init__(self, conn, server, ioloop=None):
        self.waiting = CommandQueue()
        super().__init__(conn, server, ioloop)

    def holding_transfer(self) -> bool:
        """A running transfer makes the commands after it wait."""
        return False

    def abort_holding_transfer(self) -> None:
        """ABOR with commands waiting: the running transfer's 426 first."""

    def pre_process_command(self, line, cmd, arg):
        q = self.waiting
        if cmd == "ABOR" and q and q.gate is not Gate.REFUSED_PASS and not compat.port_connecting(self):
            self.abort_holding_transfer()
            self.drop_held()
            self.respond("226 ABOR command successful.")
            return
        if q.gate is not Gate.RELEASING and self._must_wait(cmd):
            if not q.hold(line, cmd, arg):
                self.respond(f"421 More than {MAX_HELD} commands waiting for the running transfer; closing.")
                self.close_when_done()
            return
        super().pre_process_command(line, cmd, arg)

    def _must_wait(self, cmd: str) -> bool:
        if self.waiting.gate is Gate.REFUSED_PASS or compat.port_connecting(self):
            return True
        if cmd == "DRS":
            return False
        return bool(self.waiting) or (cmd not in PASSING and self.authenticated and self.holding_transfer())

    def _held_back(self) -> bool:
        """Something the waiting commands wait for has not answered yet."""
        return (self.waiting.gate is not Gate.OPEN or compat.port_connecting(self) or self.hash_running()
                or self.holding_transfer())

    def release_held(self) -> None:
        """What the commands waited for answered (a transfer's final reply,
        a PASS's, a PORT's or a digest's is out): run them, oldest first,
        until one makes the rest wait again.  While one runs, a call from
        inside it returns at once and the loop under way goes on."""
        q = self.waiting
        while q and not compat.closed(self) and not self._held_back():
            line, cmd, arg = q.next()
            q.move("release")
            try:
                self.pre_process_command(line, cmd, arg)
            finally:
                q.move("released")

    def drop_held(self) -> None:
        """ABOR or a failed transfer: the waiting commands are answered, in
        order, as not run."""
        for cmd in self.waiting.drop():
            self.respond(f"426 {cmd} not run: the transfer before it was aborted or failed.")

    # -- what the commands wait for answered --------------------------------------
    def handle_auth_failed(self, msg, password):
        self.waiting.move("pass refused")
        super().handle_auth_failed(msg, password)

    def on_login_failed(self, username, password):
        super().on_login_failed(username, password)
        self.waiting.move("pass answered")  # (called right after the PASS's 530)
        self.release_held()

    def port_settled(self) -> None:
        """A stream-mode PORT/EPRT got its reply (200 connected, 425, 421)."""
        self.ioloop.call_later(0, self.release_held, _errback=self.handle_error)

    def hash_done(self) -> None:
        self.release_held()
