"""A dataset session's data commands, pipelined (docs/DATASETS.md).

RFC 959 replies come in command order (drsftp.ftp.routing's ReplyRouter
pairs them): the passive command and the transfer command go out
together, so the data connection's port and the transfer start take one
round trip, not two; and a get sends the next file's pair as soon as the
current file's data has ended, before its 226 arrives.  The pair is not
sent while a transfer runs: RFC 959 does not say what a server does with
PASV then, stock pyftpdlib closes the running data channel, and drsftp
serve answers 503 (docs/DESIGN.md).  A 503 for a pipelined pair (the
server had not yet closed the transfer) is retried once the 226 is in
(:class:`PairRefused`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ...ftp.replies import Reply
from ...io.tuner import SocketTuner
from ..session.control import ControlConnection, FTPError, Pending
from ..session.flowctl import FlowControl, data_address, epsv_refused, first_passive
from ..transfer.dataconn import open_data_socket
from ..transfer.onefile import REST_WHAT, transfer_done
from ..transfer.options import TransferOptions


@dataclass
class Started:
    """A transfer whose commands are on the wire, through a flow of its own
    (drsftp.ftp.flow: a data address serves one transfer in stream mode,
    and the next file's commands may go out before this one's 226)."""
    flow: FlowControl
    passive: Pending
    transfer: Pending | None  # None until sent (a transfer not pipelined)
    pipelined: bool
    extra: tuple[Pending, ...] = ()


class PairRefused(Exception):
    """A pipelined passive command refused with 503 (the server had not yet
    ended the transfer before it): send the pair again after the 226."""


class DataCommands:
    """The passive and transfer commands of one logged-in session, and
    the data connection each transfer opens."""

    def __init__(self, ctl: ControlConnection, opts: TransferOptions) -> None:
        self.ctl, self.opts = ctl, opts
        # learned from the first data command; a server that lists EPSV in FEAT
        # (RFC 2428 does not require it) has it pipelined from the start, and
        # PASV from the first one it refuses (flowctl.first_passive: the rule
        # a single file's transfer takes too)
        first = first_passive(ctl)
        self.passive_verb: str | None = first if first == "PASV" or "EPSV" in ctl.features else None
        self.pipeline = True  # False: one command at a time (to measure what pipelining saves)
        # transfers the server started (1yz): a session that breaks with this
        # unchanged broke before the one asked for began (drsftp.client.trees.job.treejob.lost_session)
        self.transfers = 0

    def start(self, *lines: str) -> Started:
        """Send the passive command, ``lines[:-1]`` and the transfer command
        ``lines[-1]`` together (once the passive verb is known)."""
        fc = FlowControl(self.ctl)
        passive = fc.send(self.passive_verb or "EPSV")
        if self.passive_verb is None or not self.pipeline:
            return Started(fc, passive, None, False)
        extra = tuple(fc.send(x) for x in lines[:-1])
        return Started(fc, passive, fc.send(lines[-1]), True, extra)

    async def connect(self, st: Started, tuner: SocketTuner | None, lines: tuple[str, ...]) -> socket.socket:
        """The data connection for ``st``; the transfer command is sent by
        now.  ``lines``: what start() was given (for the unpipelined path)."""
        address = await self._passive_address(st)
        if st.transfer is None:  # (not pipelined, or the pair was sent again after a refused EPSV)
            st.extra = tuple(st.flow.send(x) for x in lines[:-1])
            st.transfer = st.flow.send(lines[-1])
        return await open_data_socket(self.ctl, address, tuner, self.opts.connect_timeout)

    async def _passive_address(self, st: Started) -> tuple[str, int]:
        """The data address of ``st``'s passive command, by the rule a single
        file takes (flowctl.data_address): EPSV refused, PASV (the session
        keeps to it from then on).  A pipelined EPSV that is refused spent
        the commands sent behind it (with no data connection to come a
        server answers them 425 and runs nothing: drsftp serve's
        finalreply.py, vsftpd): their replies are read, and connect() sends
        them again behind PASV."""
        reply = await st.flow.reply(st.passive)
        if reply.code == 503 and st.pipelined:
            raise PairRefused()  # the previous transfer had not ended on the server yet
        if epsv_refused(st.passive.verb, reply):
            self.passive_verb = "PASV"
            if st.transfer is not None:
                await self._drain_tokens(st)
                st.flow, st.extra, st.transfer = FlowControl(self.ctl), (), None
            st.passive = st.flow.send("PASV")
            reply = await st.flow.reply(st.passive)
        address = data_address(self.ctl, reply)
        if self.passive_verb is None:
            self.passive_verb = st.passive.verb
        return address

    async def preliminary(self, st: Started, what: str) -> Reply:
        """The transfer command's 1yz (an FTPError naming ``what`` otherwise)."""
        first = await st.flow.started(sent(st), what)
        self.transfers += 1
        return first

    async def final(self, st: Started, what: str, timeout: float = 120) -> Reply:
        """The transfer's 226/250 (an FTPError naming ``what`` otherwise)."""
        reply = await self.ctl.final_reply(sent(st), timeout)
        return transfer_done(st.flow, sent(st), reply, what)

    async def _check_extra(self, st: Started) -> None:
        """The replies to the commands sent between the passive command and
        the transfer command, in order: a REST must have been accepted (350,
        RFC 959 sec. 4.1.3) before a byte is written at its offset; ALLO's
        reply is no error either way (a server may not need it)."""
        for token in st.extra:
            reply = await st.flow.reply(token)
            if token.verb == "REST" and reply.code != 350:
                raise FTPError(f"{REST_WHAT} failed: {reply}", reply)

    async def _drain_tokens(self, st: Started) -> None:
        """Wait for the replies of commands sent for a transfer that will
        not run, so the next command's reply is its own."""
        for token in (*st.extra, st.transfer):
            if token is not None:
                try:
                    await self.ctl.final_reply(token, 30)
                except FTPError:
                    pass


def sent(st: Started) -> Pending:
    """``st``'s transfer command, sent by now (connect sends it at the latest)."""
    assert st.transfer is not None
    return st.transfer
