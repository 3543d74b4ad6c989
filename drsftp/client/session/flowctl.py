"""A control connection driven through the sans-IO transfer flow
(:mod:`drsftp.ftp.flow`): every command is checked against the flow's
table before it is sent, and every reply moves the flow's state.

Commands whose replies do not decide what is sent next go out in one batch
(docs/DESIGN.md "Pipelined session setup"); their replies are read in
order (RFC 959 4.2) and a refusal names the refused command, raised once
the batch's later replies are read."""

from __future__ import annotations

from collections.abc import Sequence

from ...ftp import flow
from ...ftp.replies import ProtocolError, Reply, parse_epsv, parse_pasv
from .control import ControlConnection, FTPError, Pending

Steps = Sequence[tuple[str, str | None]]  # (command line, what to call it in an error)


class FlowControl:
    def __init__(self, ctl: ControlConnection) -> None:
        self.ctl = ctl
        self.flow = flow.TransferFlow()

    def send(self, line: str) -> Pending:
        """A command, checked against the state its predecessors in flight
        lead to, sent without waiting for their replies."""
        self.flow.send(line)
        return self.ctl.start(line)

    async def step(self, line: str, what: str | None = None) -> Reply:
        """One command and its reply; a refusal is an FTPError."""
        return (await self.batch([(line, what)]))[0]

    async def batch(self, steps: Steps, timeout: float = 60.0) -> list[Reply]:
        """``steps`` sent back to back and their final replies, read in
        order; the first refusal is an FTPError naming that command, raised
        after the later replies are read."""
        replies, error = await self._read(self.send_all(steps), timeout)
        if error is not None:
            raise error
        return replies

    async def start_after(self, steps: Steps, line: str, timeout: float = 60.0) -> Pending:
        """``steps`` and then the transfer command ``line``, all sent before
        any reply is read (nothing follows a RETR/STOR: the server may refuse
        commands while a transfer runs).  A refused step is an FTPError
        naming it, raised after the transfer command's first reply is read
        (the caller then closes the session)."""
        sent, pending = self.send_all(steps), self.send(line)
        await self.check(sent, pending, timeout)
        return pending

    async def check(self, sent: list[tuple[Pending, str]], pending: Pending, timeout: float = 60.0) -> None:
        """The replies to steps sent before the transfer command ``pending``
        (see :meth:`start_after`)."""
        _, error = await self._read(sent, timeout)
        if error is not None:
            try:  # (the transfer command's refusal, or its start: the caller then closes)
                self.flow.receive(pending.verb, await self.ctl.first_reply(pending, timeout))
            except FTPError:
                pass
            raise error

    def send_all(self, steps: Steps) -> list[tuple[Pending, str]]:
        return [(self.send(line), what or line.split(" ", 1)[0].upper()) for line, what in steps]

    async def reply(self, pending: Pending, timeout: float = 60.0) -> Reply:
        """``pending``'s final reply, whatever it says (the flow takes it)."""
        reply = await self.ctl.final_reply(pending, timeout)
        self.flow.receive(pending.verb, reply)
        return reply

    async def _read(self, sent: list[tuple[Pending, str]], timeout: float) -> tuple[list[Reply], FTPError | None]:
        replies: list[Reply] = []
        error: FTPError | None = None
        for pending, what in sent:
            reply = await self.ctl.final_reply(pending, timeout)
            replies.append(reply)
            if isinstance(self.flow.receive(pending.verb, reply), flow.Refused) and error is None:
                error = FTPError(f"{what} failed: {reply}", reply)
        return replies, error

    async def passive_address(self, before: Steps | None = None) -> tuple[str, int]:
        """``before`` (e.g. MODE E) and the first passive command in one
        batch, then PASV where EPSV was refused; the address is
        :func:`data_address`'s (the one rule every data connection takes)."""
        sent = self.send_all(before or ())
        first = self.send(first_passive(self.ctl))
        _, error = await self._read(sent, 60.0)
        reply = await self.reply(first)
        if error is not None:
            raise error
        if epsv_refused(first.verb, reply):
            reply = await self.reply(self.send("PASV"))
        if reply.code not in (227, 229):
            raise FTPError(f"passive mode (PASV) failed: {reply}", reply)  # (EPSV fails only into PASV)
        return data_address(self.ctl, reply)

    async def started(self, pending: Pending, what: str, timeout: float = 60.0) -> Reply:
        """The transfer command's first reply: 125/150, or an FTPError."""
        first = await self.ctl.first_reply(pending, timeout)
        if not isinstance(self.flow.receive(pending.verb, first), flow.TransferStarted):
            raise FTPError(f"{what}: {first}", first)
        return first

    def ended(self, pending: Pending, reply: Reply) -> flow.Event:
        """The transfer command's final reply: TransferDone or TransferEnded."""
        return self.flow.receive(pending.verb, reply)


# -- the passive rule: one for every data connection the client opens ---------------------
# (a single file, a tree's files and listings, ls; docs/PROTOCOL.md, "Third-party transfers")

def first_passive(ctl: ControlConnection) -> str:
    """EPSV (RFC 2428), or PASV under --pasv-address: EPSV names no
    address, and the option is there to take the one PASV names."""
    return "PASV" if ctl.pasv_address else "EPSV"


def epsv_refused(verb: str, reply: Reply) -> bool:
    """EPSV answered with anything but 229: PASV next (RFC 2428 sec. 3
    leaves EPSV optional; drsftp serve refuses it with 502 on a control
    connection that is not on its --data-interface)."""
    return verb == "EPSV" and reply.code != 229


def data_address(ctl: ControlConnection, reply: Reply) -> tuple[str, int]:
    """Where the data connection goes for a 229 or 227 reply: the control
    connection's host (EPSV names a port only; PASV's address is not
    trusted, so a server cannot point the client at a third host), unless
    --pasv-address lets it go where PASV names (a server's data interface
    apart from its control address; that host may then also connect to
    us: ``data_hosts``).  A PASV address not taken is kept to be named if
    connecting fails (:func:`pasv_hint`)."""
    peer = ctl.writer.get_extra_info("peername")[0]
    try:
        if reply.code == 229:
            return peer, parse_epsv(reply)
        if reply.code == 227:
            host, port = parse_pasv(reply)
            if ctl.pasv_address:
                host = peer if host == "0.0.0.0" else host
                ctl.data_hosts.add(host)
                return host, port
            ctl.pasv_named = host if host not in (peer, "0.0.0.0") else None
            return peer, port
    except ProtocolError as exc:
        raise FTPError(str(exc), transient=False) from exc
    raise FTPError(f"server offers no passive mode: {reply}", reply)


def pasv_hint(ctl: ControlConnection, host: str) -> str:
    """What a failed data connection's sentence adds when PASV named
    another address than the one tried (data_address)."""
    if ctl.pasv_named and ctl.pasv_named != host:
        return f" (PASV named {ctl.pasv_named}: --pasv-address connects there)"
    return ""
