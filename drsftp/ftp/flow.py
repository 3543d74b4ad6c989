"""The client's command sequence for one data transfer, sans-IO (h11 style).

Commands go out through :meth:`TransferFlow.send`, which refuses one the
current state does not allow; replies come in through
:meth:`TransferFlow.receive`, which returns an event and moves the state.
The legal transitions are the one table ``TRANSITIONS``:

    READY --PORT/EPRT/PASV/EPSV--> DATA_SET --(ALLO)--(REST)--> RESTARTED
    DATA_SET/RESTARTED --RETR/STOR 1yz--> TRANSFER --226/250--> READY
    DATA_SET --LIST/NLST/MLSD 1yz--> TRANSFER (a listing is a transfer too)
    TRANSFER --426/451/...--> READY (the transfer failed or was cut short)

(RFC 959 5.4: REST must be followed at once by the transfer command; a
data address serves one transfer in stream mode.)  TYPE, MODE, OPTS, ALLO
set parameters in READY; SIZE, MDTM, FEAT, NOOP, HASH, CKSM are allowed
outside a transfer, DRS and ABOR only during one (docs/PROTOCOL.md).  A
refused command leaves the state as it was, except that a refused
transfer command ends the set-up (a new data address is needed).  Replies
to RETR, STOR and the listings (RFC 959 4.1.3; RFC 3659 7) count alike.

Pipelining (docs/DESIGN.md "Pipelined session setup"): commands may be
sent before the replies to earlier ones, as long as each is allowed in the
state the earlier ones lead to if they succeed (``expected``).  Replies
come in command order (RFC 959 4.2), so :meth:`TransferFlow.receive` checks
that a reply answers the oldest command still waiting.  After a refusal
with commands still in flight the expected state is unknown: nothing more
may be sent until their replies are in; a refused command that would not
have moved the state (ALLO, TYPE, a query) leaves the expectation as it was.  DRS and ABOR are answered out of
band (drsftp.ftp.routing.ReplyRouter) and are not queued.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from .replies import Reply


class State(enum.Enum):
    READY = "ready"  # logged in; no data address set
    DATA_SET = "data set"  # PORT/EPRT or PASV/EPSV accepted
    RESTARTED = "restarted"  # REST accepted: RETR or STOR next
    TRANSFER = "transfer"  # RETR/STOR accepted (1yz); data flows


class FlowError(Exception):
    """The local side tried a command the state does not allow."""


S = State
SETUP = ("TYPE", "MODE", "OPTS", "ALLO")
QUERIES = ("SIZE", "MDTM", "FEAT", "NOOP", "HASH", "CKSM")
ADDRESS = ("PORT", "EPRT", "PASV", "EPSV")
XFER = ("RETR", "STOR")
LISTINGS = ("LIST", "NLST", "MLSD")  # data from a directory: from DATA_SET only (no REST before them)
DATA_VERBS = XFER + LISTINGS
OUT_OF_BAND = ("DRS", "ABOR")  # replies routed by mark or awaited directly, not matched in order

# (state, verb) -> state after the command's positive completion
TRANSITIONS: dict[tuple[State, str], State] = {
    **{(S.READY, v): S.READY for v in SETUP + QUERIES},
    **{(S.READY, v): S.DATA_SET for v in ADDRESS},
    **{(S.DATA_SET, v): S.DATA_SET for v in SETUP + QUERIES},
    (S.DATA_SET, "REST"): S.RESTARTED,
    **{(S.DATA_SET, v): S.TRANSFER for v in XFER},
    **{(S.RESTARTED, v): S.TRANSFER for v in XFER},
    **{(S.DATA_SET, v): S.TRANSFER for v in LISTINGS},
    (S.TRANSFER, "DRS"): S.TRANSFER,
    (S.TRANSFER, "ABOR"): S.TRANSFER,
}

# the positive completion of each verb (RFC 959 4.2, 5.4; RFC 2428; RFC 3659)
POSITIVE: dict[str, tuple[int, ...]] = {
    "TYPE": (200,), "MODE": (200,), "OPTS": (200,), "ALLO": (200, 202), "PORT": (200,), "EPRT": (200,),
    "PASV": (227,), "EPSV": (229,), "REST": (350,), "SIZE": (213,), "MDTM": (213,), "FEAT": (211,),
    "NOOP": (200,), "HASH": (213,), "CKSM": (213,), "DRS": (200,), "ABOR": (225, 226),
    **{v: (226, 250) for v in XFER + LISTINGS},
}


@dataclass(frozen=True)
class Accepted:
    verb: str
    reply: Reply


@dataclass(frozen=True)
class Refused:
    verb: str
    reply: Reply


@dataclass(frozen=True)
class TransferStarted:
    reply: Reply  # 125/150


@dataclass(frozen=True)
class Marker:
    reply: Reply  # 111 range marker, 112 perf marker (GFD.20) during a transfer


@dataclass(frozen=True)
class TransferDone:
    reply: Reply  # 226/250


@dataclass(frozen=True)
class TransferEnded:
    reply: Reply  # 4yz/5yz after the transfer began: failed, or cut short by us


Event = Accepted | Refused | TransferStarted | Marker | TransferDone | TransferEnded


class TransferFlow:
    def __init__(self) -> None:
        self.state = State.READY
        self.expected: State | None = State.READY  # after every command in flight succeeds; None: unknown
        self.in_flight: deque[str] = deque()  # verbs sent, final reply not yet received, oldest first

    def allowed(self, verb: str) -> bool:
        return self.expected is not None and (self.expected, verb.upper()) in TRANSITIONS

    def send(self, line: str) -> bytes:
        """The command's bytes, if the state its predecessors lead to allows it."""
        verb = line.split(" ", 1)[0].upper()
        if self.expected is None:
            raise FlowError(f"{verb} sent before the replies to a batch with a refused command")
        if not self.allowed(verb):
            raise FlowError(f"{verb} is not allowed in state {self.expected.value}")
        if verb not in OUT_OF_BAND:
            self.expected = TRANSITIONS[(self.expected, verb)]
            self.in_flight.append(verb)
        return line.encode("utf-8") + b"\r\n"

    def receive(self, verb: str, reply: Reply) -> Event:
        """A reply to ``verb`` (routed by the caller, drsftp.ftp.routing)."""
        verb = verb.upper()
        if verb not in OUT_OF_BAND and self.in_flight and self.in_flight[0] != verb:
            raise FlowError(f"a reply to {verb} while {self.in_flight[0]} waits for its own (RFC 959 4.2)")
        event = self._transfer_reply(verb, reply) if verb in DATA_VERBS else self._reply(verb, reply)
        if verb not in OUT_OF_BAND and not reply.preliminary and self.in_flight:
            self.in_flight.popleft()
        if isinstance(event, Refused | TransferEnded) and self.in_flight and not self._no_op(verb):
            self.expected = None  # what was sent after it assumed it succeeded
        if not self.in_flight:
            self.expected = self.state
        return event

    def _no_op(self, verb: str) -> bool:
        """Whether ``verb`` would have left the state as it is."""
        return TRANSITIONS.get((self.state, verb)) is self.state

    def _reply(self, verb: str, reply: Reply) -> Event:
        if reply.code in POSITIVE.get(verb, ()):
            nxt = TRANSITIONS.get((self.state, verb))
            if nxt is not None:
                self.state = nxt
            return Accepted(verb, reply)
        return Refused(verb, reply)

    def _transfer_reply(self, verb: str, reply: Reply) -> Event:
        if self.state is not State.TRANSFER:
            if reply.preliminary and reply.code in (125, 150):
                self.state = State.TRANSFER
                return TransferStarted(reply)
            if reply.code in POSITIVE[verb]:  # done at once, no 1yz first (not RFC 959's order)
                self.state = State.READY
                return TransferDone(reply)
            # refused before any data: the data address is spent
            self.state = State.READY
            return Refused(verb, reply)
        if reply.preliminary:
            return Marker(reply)
        self.state = State.READY
        if reply.code in POSITIVE[verb]:
            return TransferDone(reply)
        return TransferEnded(reply)
