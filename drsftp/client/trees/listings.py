"""A dataset session's directory listings (MLSD, else LIST) and what
MLST and CWD/SIZE say of one path (docs/DATASETS.md).

A listing's lines reach the parser as they arrive, so a job starts on the
first entries while a long listing is still on its way; a listing asked
with the log-in (``get -r``'s source) takes its replies first.  Over TLS
(PROT P) the listing's data connection runs in TLS once the transfer
command's 1yz is in (:mod:`..transfer.dataconn`), resuming the control
connection's session (RFC 4217 sec. 10).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ...ftp.listing import DIR, FILE, Entry, parse_list, parse_mlsd, parse_mlst_reply, parse_time_val
from ...ftp.replies import Reply
from ..session.control import ControlConnection, FTPError
from ..transfer.dataconn import settle, start_data
from ..transfer.options import TransferOptions
from .pipelined import DataCommands, PairRefused, Started

LISTING_LIMIT = 64 << 20  # bytes of one directory listing: more is a hostile or broken server


class Listings(DataCommands):
    """Directory listings over a session's data commands, and stat()."""

    def __init__(self, ctl: ControlConnection, opts: TransferOptions) -> None:
        super().__init__(ctl, opts)
        self.mlsd = "MLST" in ctl.features
        self.early: dict[str, Reply] = {}  # replies to queries sent with the log-in (MLST: stat())
        self.early_listing: tuple[str, Started] | None = None  # a listing asked with the log-in

    async def settle_early(self) -> None:
        """The listing asked with the log-in, read and dropped: the session
        is then free for other commands (its replies come first)."""
        if self.early_listing is not None:
            try:
                await self.listing(self.early_listing[0])
            except FTPError as exc:
                if exc.reply is None:
                    raise

    async def listing(self, path: str, on_entries: Callable[[list[Entry]], None] | None = None) -> list[Entry]:
        """The entries of directory ``path``; with ``on_entries``, they go
        to it as their lines arrive (a job starts on the first ones while
        a long listing is still on its way), each line parsed once and
        kept nowhere, and the list returned is empty."""
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
                    return [] if feed is not None else parse_mlsd(data)
        parse = parse_mlsd if self.mlsd else parse_list
        feed = _Feeder(parse, on_entries) if on_entries is not None else None
        data = await self.read_data(f"{'MLSD' if self.mlsd else 'LIST'} {path}", what, None, feed)
        return [] if feed is not None else parse(data)

    async def read_data(self, line: str, what: str, st: Started | None = None,
                        on_lines: Callable[[bytes], None] | None = None) -> bytes:
        """The data of ``line``; ``st``: its commands were sent already;
        ``on_lines``: given each run of complete lines as it arrives (the
        data is then not kept: b"" is returned)."""
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
        reply = await self.ctl.command(f"MDTM {path}")
        return parse_time_val(reply.first) if reply.code == 213 else None


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
    """A listing's data, up to LISTING_LIMIT bytes: kept, or, with
    ``on_lines``, each run of complete lines (split at a newline byte:
    never inside a UTF-8 character) handed to it as it arrives and the
    rest at the end."""

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
        if self.on_lines is None:
            self.chunks.append(data)
        else:
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
