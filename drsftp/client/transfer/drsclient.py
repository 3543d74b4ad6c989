"""The client's end of the DRS exchange (docs/PROTOCOL.md, "DRS"): the
transfer core's rules (:mod:`drsftp.ftp.drsexchange`: when a command is
due, what a reply means) driven over a control connection, once per
stream-mode transfer or per extended-block session (docs/PARALLEL.md,
"Extended block mode").  The caller makes the report and takes the peer's.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

from ...ftp import drsexchange
from ...ftp.drsexchange import Pairs
from ...ftp.flow import FlowError
from ...ftp.replies import Reply
from ..session.control import ControlConnection, FTPError, Pending
from .options import TransferOptions

Send = Callable[[str], Pending]  # sends one command line: ControlConnection.start, FlowControl.send


class DRSDriver:
    """``on_pairs(pairs, seconds)``: the peer's report from a 200 reply,
    and how long the exchange took (a round trip on the control path)."""

    def __init__(self, enabled: bool, on_pairs: Callable[[Pairs, float], None]) -> None:
        self.exchange = drsexchange.Exchange(enabled)
        self.on_pairs = on_pairs

    def maybe_send(self, send: Send, rtt: float | None, report: Callable[[], Pairs]) -> None:
        """Our ``report()`` to the peer if the exchange is due (one at a
        time, at most one per ``rtt``)."""
        now = time.monotonic()
        if not self.exchange.due(now, rtt):
            return
        try:
            token = send(drsexchange.command(report()))
        except (FTPError, FlowError):
            return  # the connection is gone, or the transfer has ended
        self.exchange.sent(now)
        token.final.add_done_callback(functools.partial(self._on_final, now))

    def _on_final(self, sent_at: float, fut: asyncio.Future) -> None:
        reply = _reply(fut)
        code, text = (reply.code, reply.first) if reply is not None else (None, "")
        pairs = self.exchange.on_reply(code, text)
        if pairs is not None:
            self.on_pairs(pairs, time.monotonic() - sent_at)

    def ask(self, send: Send, pairs: Pairs) -> None:
        """A command outside the pacing (a receiver's ``streams=N``: docs/EBLOCK.md,
        "DRS"); its 200 counts as a report exchanged, as the server counts it."""
        if not self.exchange.enabled:
            return
        try:
            send(drsexchange.command(pairs)).final.add_done_callback(self._count)
        except (FTPError, FlowError):
            pass

    def _count(self, fut: asyncio.Future) -> None:
        reply = _reply(fut)
        if reply is not None and reply.code == 200:
            self.exchange.replies += 1


def _reply(fut: asyncio.Future) -> Reply | None:
    return None if fut.cancelled() or fut.exception() is not None else fut.result()


class DRSFigures:
    """What results and other modules read of a transfer's exchange."""

    drs: DRSDriver

    @property
    def use_drs(self) -> bool:
        """The exchange runs (the peer offers DRS and has not refused it)."""
        return self.drs.exchange.enabled

    @use_drs.setter
    def use_drs(self, on: bool) -> None:
        self.drs.exchange.enabled = on

    @property
    def drs_replies(self) -> int:
        return self.drs.exchange.replies

    @property
    def server_last(self) -> Pairs:
        """The peer's last report."""
        return self.drs.exchange.peer_last


def drs_enabled(ctl: ControlConnection, opts: TransferOptions) -> bool:
    """Only a DRS client exchanges measurements, with a peer that lists DRS
    in FEAT (the fixed and kernel tunings emulate stock peers)."""
    return opts.use_drs_command and opts.tuning.startswith("drs") and "DRS" in ctl.features
