"""One dataset session: a logged-in control connection that lists
directories and moves file after file, with its commands pipelined.

Pipelining (RFC 959 replies come in command order, drsftp.ftp.routing's
ReplyRouter pairs them): the passive command and the transfer command go
out together, so the data connection's port and the transfer start take
one round trip, not two; and a get sends the next file's pair as soon as
the current file's data has ended, before its 226 arrives.  The pair is
not sent while a transfer runs: RFC 959 does not say what a server does
with PASV then, stock pyftpdlib closes the running data channel, and
drsftp serve answers 503 (docs/DESIGN.md).  A 503 for a pipelined pair
(the server had not yet closed the transfer) is retried once the 226 is in.

Over TLS (PROT P) every data connection, listings included, runs in TLS
once the transfer command's 1yz is in (:mod:`.dataconn`), resuming the
control connection's session (RFC 4217 sec. 10).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...ftp.flow import TransferDone
from ...ftp.listing import DIR, FILE, Entry, format_time_val, parse_list, parse_mlsd, parse_mlst_reply
from ...ftp.partname import download_part
from ...ftp.replies import Reply
from ...ftp.url import FTPLocation
from ...io.tuner import SocketTuner
from ...tuning import Role
from ..session.control import ControlConnection, FTPError, Pending
from ..session.flowctl import FlowControl, data_address, epsv_refused, first_passive
from ..session.login import open_logged_in, open_session
from ..transfer.dataconn import open_data_socket, send_tls, settle, start_data
from ..transfer.getput import TransferResult, open_part
from ..transfer.options import TransferOptions
from ..transfer.streammode import (
    StreamTransfer,
    check_sent,
    close_data,
    drive_data,
    receive_file,
    send_file,
    server_says_why,
)

LISTING_LIMIT = 64 << 20  # bytes of one directory listing: more is a hostile or broken server


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


class RemoteSession:
    def __init__(self, ctl: ControlConnection, opts: TransferOptions) -> None:
        self.ctl, self.opts = ctl, opts
        # learned from the first data command; a server that lists EPSV in FEAT
        # (RFC 2428 does not require it) has it pipelined from the start, and
        # PASV from the first one it refuses (flowctl.first_passive: the rule
        # a single file's transfer takes too)
        first = first_passive(ctl)
        self.passive_verb: str | None = first if first == "PASV" or "EPSV" in ctl.features else None
        self.pipeline = True  # False: one command at a time (to measure what pipelining saves)
        self.mlsd = "MLST" in ctl.features
        self.early: dict[str, Reply] = {}  # replies to queries sent with the log-in
        self.early_listing: tuple[str, Started] | None = None  # a listing asked with the log-in
        # transfers the server started (1yz): a session that breaks with this
        # unchanged broke before the one asked for began (drsftp.client.trees.job.treejob.lost_session)
        self.transfers = 0

    @classmethod
    async def open(cls, loc: FTPLocation, opts: TransferOptions) -> RemoteSession:
        return cls(await open_logged_in(loc, opts), opts)

    @classmethod
    async def open_asking(cls, loc: FTPLocation, opts: TransferOptions, queries: tuple[str, ...],
                          listing: str | None = None) -> RemoteSession:
        """A session whose log-in batch also carries ``queries`` (MLST of
        the sources: one round trip less); stat() uses their replies.
        ``listing``: a directory likely to be listed next (``get -r``'s
        source): its EPSV and MLSD go out with the log-in too, before
        FEAT says whether there is MLSD (a refusal is answered by the
        usual listing); listing() or settle_early() takes its replies."""
        early: list[Started] = []

        def ask(ctl: ControlConnection) -> None:
            fc = FlowControl(ctl)
            passive = fc.send(first_passive(ctl))
            early.append(Started(fc, passive, fc.send(f"MLSD {listing}"), True))

        ctl, replies = await open_session(loc, opts, queries, ask if listing is not None else None)
        sess = cls(ctl, opts)
        sess.early = dict(zip(queries, replies, strict=True))
        if listing is not None:
            sess.early_listing = (listing, early[0])
        return sess

    async def settle_early(self) -> None:
        """The listing asked with the log-in, read and dropped: the session
        is then free for other commands (its replies come first)."""
        if self.early_listing is not None:
            try:
                await self.listing(self.early_listing[0])
            except FTPError as exc:
                if exc.reply is None:
                    raise

    async def close(self) -> None:
        await self.ctl.close()

    @property
    def rtt(self) -> float | None:
        from ...io import sockopt

        sock = self.ctl.writer.get_extra_info("socket")
        us = sockopt.tcp_info(sock).get("rtt") if sock is not None else None
        return us / 1e6 if us else None

    # -- data commands -------------------------------------------------------
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
        first = await st.flow.started(_sent(st), what)
        self.transfers += 1
        return first

    async def final(self, st: Started, what: str, timeout: float = 120) -> Reply:
        """The transfer's 226/250 (an FTPError naming ``what`` otherwise)."""
        reply = await self.ctl.final_reply(_sent(st), timeout)
        if not isinstance(st.flow.ended(_sent(st), reply), TransferDone):
            raise FTPError(f"{what}: {reply}", reply)
        return reply

    # -- listings ---------------------------------------------------------------
    async def listing(self, path: str, on_entries: Callable[[list[Entry]], None] | None = None) -> list[Entry]:
        """The entries of directory ``path``; ``on_entries`` is also given
        them as their lines arrive (a job starts on the first ones while
        a long listing is still on its way)."""
        what = f"cannot list {path}"
        early, self.early_listing = self.early_listing, None
        if early is not None:
            line = f"MLSD {early[0]}"
            ours = early[0] == path and self.mlsd  # (FEAT had not been read when it was sent)
            feed = _Feeder(parse_mlsd, on_entries) if ours and on_entries is not None else None
            try:
                data = await self.read_data(line, what, early[1], feed)
            except PairRefused:
                pass  # (a 503 to the early EPSV: refused, listed the usual way below)
            except FTPError as exc:
                if exc.reply is None or (feed is not None and feed.fed):
                    raise  # the connection, not the command; or entries already taken
            else:
                if ours:
                    return parse_mlsd(data)
        parse = parse_mlsd if self.mlsd else parse_list
        feed = _Feeder(parse, on_entries) if on_entries is not None else None
        data = await self.read_data(f"{'MLSD' if self.mlsd else 'LIST'} {path}", what, None, feed)
        return parse(data)

    async def read_data(self, line: str, what: str, st: Started | None = None,
                        on_lines: Callable[[bytes], None] | None = None) -> bytes:
        """The data of ``line``; ``st``: its commands were sent already;
        ``on_lines``: given each run of complete lines as it arrives."""
        lines = (line,)
        st = st or self.start(*lines)
        sock = await self.connect(st, None, lines)
        transport = None
        try:
            await self.preliminary(st, what)
            transport, sink = await start_data(sock, lambda: _Collect(what, on_lines), self.ctl.tls,
                                               self.ctl.host, self.opts.connect_timeout)
            seen = -1
            while not sink.done.done() and sink.total != seen:  # ends with the data, or a stall
                seen = sink.total
                await asyncio.wait([sink.done], timeout=self.opts.idle_timeout)
            if not sink.done.done():
                raise FTPError(f"{what}: data connection stalled")
            await sink.done
        finally:
            if transport is not None:
                transport.abort()
            sock.close()
        await self.final(st, what)
        return b"".join(sink.chunks)

    async def stat(self, path: str) -> Entry | None:
        """What ``path`` is: MLST where offered, else CWD (a directory) and
        SIZE (a file).  None if neither."""
        if self.mlsd:
            line = f"MLST {path}"
            reply = self.early.pop(line, None) or await self.ctl.command(line)
            if reply.code == 250:
                entry = parse_mlst_reply(reply.lines)
                if entry is not None:
                    return entry
            return None
        reply = await self.ctl.command(f"CWD {path}")
        if reply.code == 250:
            return Entry(path, DIR)
        size = await self.ctl.size(path)
        if size is not None:
            return Entry(path, FILE, size, await self.mdtm(path))
        return None

    async def mdtm(self, path: str) -> float | None:
        from ...ftp.listing import parse_time_val

        reply = await self.ctl.command(f"MDTM {path}")
        return parse_time_val(reply.first) if reply.code == 213 else None

    # -- files ------------------------------------------------------------------
    async def get_data(self, st: Started, lines: tuple[str, ...], remote: str, local: str,
                       size: int | None, offset: int, on_xfer=None, on_final=None) -> GetTail:
        """The data of one get, up to its EOF.  ``on_final(reply)`` runs as
        the transfer's final reply arrives, often before the EOF: the
        caller sends the next file's commands then."""
        tuner, xfer, sock = await self._open_data(st, lines, Role.RECEIVER, local, size, offset, on_xfer)

        def final_arrived(fut: asyncio.Future) -> None:
            # The server has ended this transfer: no more DRS reports for it
            # (the next file's transfer may start before our EOF).
            xfer.use_drs = False
            if on_final is not None and not fut.cancelled() and fut.exception() is None:
                on_final(fut.result())

        _sent(st).final.add_done_callback(final_arrived)
        try:
            await self._check_extra(st)
            await self.preliminary(st, f"cannot retrieve {remote}")
            tuner.attach(sock)
            part = download_part(local)
            with open_part(part, offset) as f:
                started = xfer.started = time.monotonic()
                io = asyncio.ensure_future(receive_file(sock, f, xfer, self.ctl.tls, self.ctl.host))
                await server_says_why(drive_data(io, xfer), _sent(st), f"RETR {remote}")
                seconds = time.monotonic() - started
        finally:
            close_data(sock, xfer)
        return GetTail(self, st, remote, local, part, size, offset, xfer, seconds)

    async def _open_data(self, st: Started, lines: tuple[str, ...], role: Role, local: str,
                         size: int | None, offset: int, on_xfer) -> tuple[SocketTuner, StreamTransfer, socket.socket]:
        """The tuner, the transfer's state and its connected data socket; a
        connection that fails first drains the replies of ``lines``."""
        # SO_RCVLOWAT batching off over TLS: a close_notify is smaller than a batch
        tuner = SocketTuner(self.opts.tuning, role, allow_force=self.opts.force_buffers,
                            batch_reads=self.ctl.tls is None)
        xfer = StreamTransfer(st.flow, tuner, self.opts, os.path.basename(local), size, offset)
        if on_xfer:
            on_xfer(xfer)
        try:
            sock = await self.connect(st, tuner, lines)
        except (FTPError, PairRefused):
            await self._drain_tokens(st)
            raise
        return tuner, xfer, sock

    async def _check_extra(self, st: Started) -> None:
        """The replies to the commands sent between the passive command and
        the transfer command, in order: a REST must have been accepted (350,
        RFC 959 sec. 4.1.3) before a byte is written at its offset; ALLO's
        reply is no error either way (a server may not need it)."""
        for token in st.extra:
            reply = await st.flow.reply(token)
            if token.verb == "REST" and reply.code != 350:
                raise FTPError(f"resume (REST) failed: {reply}", reply)

    async def _drain_tokens(self, st: Started) -> None:
        """Wait for the replies of commands sent for a transfer that will
        not run, so the next command's reply is its own."""
        for token in (*st.extra, st.transfer):
            if token is not None:
                try:
                    await self.ctl.final_reply(token, 30)
                except FTPError:
                    pass

    async def put_file(self, local: str, remote: str, f, size: int, offset: int, mtime: float | None,
                       on_xfer=None) -> TransferResult:
        lines = (f"ALLO {size}",) + ((f"REST {offset}",) if offset else ()) + (f"STOR {remote}",)
        st = self.start(*lines)
        tuner, xfer, sock = await self._open_data(st, lines, Role.SENDER, local, size, offset, on_xfer)
        try:
            await self._check_extra(st)
            await self.preliminary(st, f"cannot store {remote}")
            tuner.attach(sock)
            started = xfer.started = time.monotonic()
            if self.ctl.tls is not None:  # (the transport flushes, then sends close_notify)
                io = asyncio.ensure_future(send_tls(sock, f, offset, size - offset, xfer, self.ctl.tls,
                                                    self.ctl.host))
            else:
                io = asyncio.ensure_future(send_file(sock, f, offset, size - offset, xfer))
            await server_says_why(drive_data(io, xfer), _sent(st), f"STOR {remote}")
            # No wait for the last ACK (as a single put does, to time the
            # transfer alone): the kernel delivers what it holds after close,
            # and the 226 says the server has it all.
            seconds = time.monotonic() - started
        except BaseException:
            close_data(sock, xfer)  # (a TLS transport too)
            raise
        finally:
            sock.close()
        await self.final(st, f"STOR {remote}")
        check_sent(xfer, size - offset, local)
        if mtime is not None and "MFMT" in self.ctl.features:
            self.ctl.start(f"MFMT {format_time_val(mtime)} {remote}")  # its reply is not needed
        return xfer.result("put", remote, size, offset, seconds)


class _Feeder:
    """Complete lines to a parser, its entries to ``on_entries``."""

    def __init__(self, parse: Callable[[bytes], list[Entry]], on_entries: Callable[[list[Entry]], None]) -> None:
        self.parse, self.on_entries = parse, on_entries
        self.fed = False

    def __call__(self, lines: bytes) -> None:
        entries = self.parse(lines)
        if entries:
            self.fed = True
            self.on_entries(entries)


class _Collect(asyncio.Protocol):
    """A listing's data, up to LISTING_LIMIT bytes; ``on_lines`` gets each
    run of complete lines (split at a newline byte: never inside a UTF-8
    character) as it arrives, and the rest at the end."""

    def __init__(self, what: str, on_lines: Callable[[bytes], None] | None = None) -> None:
        self.what = what
        self.on_lines = on_lines
        self._partial = b""
        self.chunks: list[bytes] = []
        self.total = 0
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.total += len(data)
        if self.total > LISTING_LIMIT:
            settle(self.done, FTPError(f"{self.what}: listing larger than {LISTING_LIMIT >> 20} MiB",
                                       transient=False))
            if self.transport is not None:
                self.transport.abort()
            return
        self.chunks.append(data)
        if self.on_lines is not None:
            cut = data.rfind(b"\n") + 1
            if cut:
                lines, self._partial = self._partial + data[:cut], data[cut:]
                self.on_lines(lines)
            else:
                self._partial += data

    def eof_received(self) -> bool:
        if self.on_lines is not None and self._partial:
            self.on_lines(self._partial)
            self._partial = b""
        settle(self.done, None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        settle(self.done, exc)


class PairRefused(Exception):
    """A pipelined passive command refused with 503 (the server had not yet
    ended the transfer before it): send the pair again after the 226."""




def _sent(st: Started) -> Pending:
    """``st``'s transfer command, sent by now (connect sends it at the latest)."""
    assert st.transfer is not None
    return st.transfer


@dataclass
class GetTail:
    sess: RemoteSession
    st: Started
    remote: str
    local: str
    part: str
    size: int | None
    offset: int
    xfer: StreamTransfer
    seconds: float

    async def finish(self, mtime: float | None) -> TransferResult:
        await self.sess.final(self.st, f"RETR {self.remote}")
        # The 226 says the file was sent whole (stream mode: RFC 959 sec.
        # 3.4.1); a size other than the listing's is a file that changed
        # since the walk.  Its time is then not the listing's either.
        got = self.offset + self.xfer.moved
        changed = self.size is not None and got != self.size
        os.replace(self.part, self.local)
        if mtime is not None and not changed:
            os.utime(self.local, (mtime, mtime))
        res = self.xfer.result("get", self.remote, got, self.offset, self.seconds)
        if changed:
            res.update(note=f"changed during the copy: listed {self.size} B, got {got} B")
        return res
