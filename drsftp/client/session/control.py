"""The client's control connection: asyncio streams around the sans-IO
reply parser and router (drsftp.ftp)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...ftp.replies import ProtocolError, Reply, ReplyParser, parse_feat
from ...ftp.routing import ReplyRouter
from .tls import ClientTLS, failure_sentence


class FTPError(Exception):
    """A failure to report as one line to the user.

    ``transient``: worth a retry (--retries).  By default a 4yz reply is
    transient and a 5yz reply is not (RFC 959 4.2); with no reply (a lost
    connection) it is transient unless the caller says otherwise."""

    def __init__(self, message: str, reply: Reply | None = None, *, transient: bool | None = None) -> None:
        super().__init__(message)
        self.reply = reply
        if transient is None:
            transient = reply is None or 400 <= reply.code < 500
        self.transient = transient


def os_reason(exc: OSError) -> str:
    """The reason of an OSError as words, without errno or file name:
    "read-only file system", "connection refused"."""
    # (asyncio's connect errors carry "Connect call failed ('h', p)" as
    # strerror; a resolver's or OpenSSL's errno is no OS errno)
    errno = exc.errno if isinstance(exc.errno, int) and not isinstance(exc, (ssl.SSLError, socket.gaierror)) else 0
    text = (os.strerror(errno) if errno > 0 else exc.strerror) or str(exc)
    if not text:
        return "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]  # ("EOF ...", "TLS ..." keep theirs)


def size_of(reply: Reply) -> int | None:
    """The size in a 213 reply to SIZE (RFC 3659 4), else None."""
    if reply.code == 213:
        try:
            return int(reply.first.strip())
        except ValueError:
            return None
    return None


def expect(*codes: int, what: str) -> Check:
    """A check for :meth:`ControlConnection.settle`: ``what failed: reply``
    unless the reply's code is one of ``codes``."""
    def check(reply: Reply) -> FTPError | None:
        return None if reply.code in codes else FTPError(f"{what} failed: {reply}", reply)
    return check


Check = Callable[[Reply], "FTPError | None"]


@dataclass
class Pending:
    verb: str
    preliminary: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    final: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    # the 1yz replies after the first (GFD.20's 111/112 markers during a transfer)
    on_mark: Callable[[Reply], None] | None = None


class ControlConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host
        self.parser = ReplyParser()
        self.router = ReplyRouter()
        self.features: set[str] = set()
        self.tls: ClientTLS | None = None  # set once the control connection is encrypted
        self.pasv_address = False  # data connections go where PASV names (--pasv-address)
        self.data_hosts: set[str] = set()  # what PASV named then: the server's data interface
        self.pasv_named: str | None = None  # another host a PASV named, not taken (said if connecting fails)
        self._closed = False
        self._held: list[bytes] | None = None  # lines held while corked (cork)
        greeting = Pending("GREETING")
        self.router.sent("GREETING", greeting)
        self._greeting = greeting
        self._task = asyncio.get_running_loop().create_task(self._read_replies())

    @classmethod
    async def open(cls, host: str, port: int, timeout: float = 15.0,
                   tls: ClientTLS | None = None, greeting: bool = True) -> ControlConnection:
        """Connect and read the greeting (``greeting=False``: the caller
        checks it with :meth:`greeted`); with ``tls.implicit`` (ftps://)
        TLS starts with the first byte."""
        ssl_args: dict = {}
        if tls is not None and tls.implicit:
            ssl_args = {"ssl": tls.context, "server_hostname": host, "ssl_handshake_timeout": timeout}
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, **ssl_args), timeout)
        except TimeoutError as exc:
            raise FTPError(f"cannot connect to {host}:{port}: timed out") from exc
        except ssl.SSLError as exc:
            raise FTPError(failure_sentence(exc, host, "ftp://"), transient=False) from exc
        except OSError as exc:
            raise FTPError(f"cannot connect to {host}:{port}: {os_reason(exc)}") from exc
        conn = cls(reader, writer, host)
        if tls is not None and ssl_args:
            conn._encrypted(tls)
        if greeting:
            await conn.greeted(timeout)
        return conn

    async def greeted(self, timeout: float = 15.0) -> None:
        """The server's greeting was 220 (RFC 959 sec. 5.4: 120 and 421 are
        not ready / not available)."""
        reply = await self._wait(self._greeting.final, timeout)
        if reply.code != 220:
            await self.close()
            raise FTPError(f"server refused the session: {reply}", reply)

    async def secure(self, tls: ClientTLS, timeout: float = 15.0) -> None:
        """Explicit FTPS (RFC 4217 sec. 4): AUTH TLS, then the handshake.
        A refusal is an error: the password never goes in clear text
        after --tls was asked for."""
        if tls.implicit:
            return
        reply = await self.command("AUTH TLS", timeout)
        if reply.code != 234:
            raise FTPError(f"{self.host} refused AUTH TLS ({reply}); not logging in without encryption",
                           reply, transient=False)
        try:
            await self.writer.start_tls(tls.context, server_hostname=self.host, ssl_handshake_timeout=timeout)
        except ssl.SSLError as exc:
            raise FTPError(failure_sentence(exc, self.host), transient=False) from exc
        except (TimeoutError, OSError) as exc:
            raise FTPError(f"TLS handshake with {self.host} failed: {exc or 'timed out'}") from exc
        self._encrypted(tls)

    def _encrypted(self, tls: ClientTLS) -> None:
        self.tls = tls
        tls.reuse_sessions_of(self.tls_session)

    def tls_session(self) -> ssl.SSLSession | None:
        obj = self.writer.get_extra_info("ssl_object")
        return obj.session if obj is not None else None

    async def _read_replies(self) -> None:
        error: Exception = FTPError("control connection closed by the server")
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                for reply in self.parser.feed(data):
                    self._dispatch(reply)
        except ProtocolError as exc:
            error = FTPError(f"protocol error from server: {exc}")
        except (OSError, asyncio.IncompleteReadError) as exc:
            why = os_reason(exc) if isinstance(exc, OSError) else "the server closed it mid-reply"
            error = FTPError(f"control connection lost: {why}")
        for token in self.router.fail_all():
            for fut in (token.preliminary, token.final):
                if not fut.done():
                    fut.set_exception(error)
                    fut.exception()  # mark retrieved: a caller may never await it

    def _dispatch(self, reply: Reply) -> None:
        routed = self.router.route(reply)
        if routed is None:
            return  # unsolicited (e.g. 421 before a close): the reader sees EOF next
        token, final = routed
        if not token.preliminary.done():
            token.preliminary.set_result(reply)
        elif reply.preliminary and token.on_mark is not None:
            token.on_mark(reply)
        if final and not token.final.done():
            token.final.set_result(reply)

    async def _wait(self, fut: asyncio.Future, timeout: float | None) -> Reply:
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError as exc:
            raise FTPError("server did not answer in time") from exc

    async def first_reply(self, pending: Pending, timeout: float | None = 60.0) -> Reply:
        """A command's first reply: its 1yz, or its final reply if no 1yz
        came (an FTPError after ``timeout``)."""
        return await self._wait(pending.preliminary, timeout)

    async def final_reply(self, pending: Pending, timeout: float | None = 60.0) -> Reply:
        """A command's final reply (an FTPError after ``timeout``)."""
        return await self._wait(pending.final, timeout)

    @property
    def lost(self) -> bool:
        """The connection is of no more use: closed here, or the server
        closed it (an idle timeout's 421, RFC 959 sec. 4.2) and the
        reader has ended."""
        return self._closed or self.writer.is_closing() or self._task.done()

    def start(self, line: str) -> Pending:
        """Send a command; its futures resolve with the 1yz and final replies.
        A line holding CR, LF or NUL is refused: the Telnet end of line
        ends a command (RFC 959 sec. 4.1.3), so a name carrying one would
        send the server commands of its own."""
        if any(c in line for c in "\r\n\0"):
            raise FTPError(f"refusing to send {line.split(' ', 1)[0]} with a line break or NUL in it",
                           transient=False)
        if self._task.done() and not self._closed:
            raise FTPError("control connection closed by the server")
        if self._closed or self.writer.is_closing():
            raise FTPError("control connection is closed")
        verb = line.split(" ", 1)[0].upper()
        token = Pending(verb)
        self.router.sent(verb, token)
        if self._held is not None:
            self._held.append(line.encode("utf-8") + b"\r\n")
        else:
            self.writer.write(line.encode("utf-8") + b"\r\n")
        return token

    def cork(self) -> None:
        """Hold the lines sent from now to :meth:`flush` and send them in
        one write (pipelined commands: a file's and the next one's in one
        segment, not a send each); flushed at the next turn of the loop at
        the latest."""
        if self._held is None:
            self._held = []
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """The lines held since :meth:`cork`, sent."""
        held, self._held = self._held, None
        if held and not self.writer.is_closing():
            self.writer.write(b"".join(held))

    async def command(self, line: str, timeout: float | None = 60.0) -> Reply:
        return await self._wait(self.start(line).final, timeout)

    async def expect(self, line: str, *codes: int, what: str | None = None) -> Reply:
        reply = await self.command(line)
        if reply.code not in codes:
            raise FTPError(f"{what or line.split(' ')[0]} failed: {reply}", reply)
        return reply

    async def settle(self, batch: Sequence[tuple[Pending, Check | None]], timeout: float | None = 60.0) -> list[Reply]:
        """The final replies to pipelined commands, in command order (RFC 959
        4.2).  Every reply of the batch is read before the first failure is
        raised, so the error names the command that failed, not a later one
        refused because of it (docs/DESIGN.md "Pipelined session setup")."""
        replies: list[Reply] = []
        error: FTPError | None = None
        for pending, check in batch:
            reply = await self._wait(pending.final, timeout)
            replies.append(reply)
            if error is None and check is not None:
                error = check(reply)
        if error is not None:
            raise error
        return replies

    # -- session steps -----------------------------------------------------
    def start_login(self, user: str, password: str) -> tuple[Pending, Pending]:
        """USER and PASS sent together.  RFC 959 5.4: USER is answered 230
        (logged in, no password needed) or 331 (PASS next); a PASS after a
        230 is out of sequence and answered 503 (4.1.1, 4.2) or 230, which
        :meth:`login_done` takes as success.  Pipelined rather than waiting
        on USER: the password goes only to the server the session is with
        (after AUTH TLS when one was asked for), and one round trip less."""
        return self.start(f"USER {user}"), self.start(f"PASS {password}")

    async def login_done(self, user: str, sent: tuple[Pending, Pending], timeout: float | None = 60.0) -> None:
        first = await self._wait(sent[0].final, timeout)
        second = await self._wait(sent[1].final, timeout)
        if first.code in (230, 202):
            return  # the PASS was superfluous (503 "already logged in")
        reply = second if first.code == 331 else first
        if first.code != 331 or second.code not in (230, 202):
            raise FTPError(f"login refused for {user!r}: {reply}", reply)

    async def login(self, user: str, password: str) -> None:
        await self.login_done(user, self.start_login(user, password))

    async def feat(self) -> set[str]:
        reply = await self.command("FEAT")
        self.features = parse_feat(reply)
        return self.features

    async def size(self, path: str) -> int | None:
        return size_of(await self.command(f"SIZE {path}"))

    async def close(self) -> None:
        """QUIT and close without waiting for the 221 (a session closed out
        of step, after an ABOR, may never answer it in time)."""
        if self._closed:
            return
        self.flush()
        try:
            if not self.writer.is_closing():
                self.start("QUIT")
        except (FTPError, OSError, ConnectionError):
            pass
        self._closed = True
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except (TimeoutError, OSError, ConnectionError):
            pass
        self._task.cancel()

    def family(self) -> int:
        sock = self.writer.get_extra_info("socket")
        return sock.family if sock is not None else socket.AF_INET

    def data_source(self, host: str) -> tuple[str, int] | None:
        """Where a data connection to ``host`` binds: the control
        connection's own address when ``host`` is not its peer (a data
        interface PASV named, --pasv-address).  A server takes a data
        connection from its client's address only (the bounce rule, RFC
        2577 sec. 3: pyftpdlib, vsftpd, drsftp serve), and a multi-homed
        client's route to another address of the server may leave from
        another of its own.  None: the kernel's choice (the same route)."""
        sock = self.writer.get_extra_info("socket")
        if sock is None or host == self.writer.get_extra_info("peername")[0]:
            return None
        local = sock.getsockname()[0]
        return (local, 0) if (":" in local) == (":" in host) else None

    # -- commands whose replies are read later, or dropped; the close -----------
    def send_unwaited(self, line: str) -> Pending:
        """``line`` sent without waiting for the replies before it
        (pipelined: replies come in command order, RFC 959 sec. 4.2): a
        batch of MKD or DELE read with :meth:`settle`, an MFMT after a
        file, an idle session's NOOP (its reply paired and dropped)."""
        return self.start(line)

    @property
    def closed(self) -> bool:
        """Closed here (:meth:`close`); :attr:`lost` counts the server's close too."""
        return self._closed
