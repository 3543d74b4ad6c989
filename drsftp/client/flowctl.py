"""A control connection driven through the sans-IO transfer flow
(:mod:`drsftp.ftp.flow`): every command is checked against the flow's
table before it is sent, and every reply moves the flow's state."""

from __future__ import annotations

import asyncio

from ..ftp import flow
from ..ftp.replies import Reply, parse_epsv, parse_pasv
from .control import ControlConnection, FTPError, Pending


class FlowControl:
    def __init__(self, ctl: ControlConnection) -> None:
        self.ctl = ctl
        self.flow = flow.TransferFlow()

    async def step(self, line: str, what: str | None = None) -> Reply:
        """One command and its reply; a refusal is an FTPError."""
        verb = line.split(" ", 1)[0].upper()
        self.flow.send(line)
        reply = await self.ctl.command(line)
        if isinstance(self.flow.receive(verb, reply), flow.Refused):
            raise FTPError(f"{what or verb} failed: {reply}", reply)
        return reply

    async def passive_address(self) -> tuple[str, int]:
        """EPSV (RFC 2428), else PASV; the data connection goes to the
        control connection's host whatever PASV names (RFC 2577 sec. 5)."""
        peer = self.ctl.writer.get_extra_info("peername")[0]
        try:
            return peer, parse_epsv(await self.step("EPSV"))
        except FTPError:
            pass
        return peer, parse_pasv(await self.step("PASV", "passive mode (PASV)"))[1]

    def start_transfer(self, line: str) -> Pending:
        self.flow.send(line)
        return self.ctl.start(line)

    async def started(self, pending: Pending, what: str, timeout: float = 60.0) -> Reply:
        """The transfer command's first reply: 125/150, or an FTPError."""
        first = await asyncio.wait_for(asyncio.shield(pending.preliminary), timeout)
        if not isinstance(self.flow.receive(pending.verb, first), flow.TransferStarted):
            raise FTPError(f"{what}: {first}", first)
        return first

    def ended(self, pending: Pending, reply: Reply) -> flow.Event:
        """The transfer command's final reply: TransferDone or TransferEnded."""
        return self.flow.receive(pending.verb, reply)
