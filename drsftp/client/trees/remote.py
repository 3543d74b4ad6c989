"""One dataset session: a logged-in control connection that lists
directories (:mod:`.listings`) and moves file after file, its data
commands pipelined (:mod:`.pipelined`), each file by the rules a single
get or put takes too (:mod:`..transfer.onefile`).

Over TLS (PROT P) every data connection runs in TLS once the transfer
command's 1yz is in (:mod:`..transfer.dataconn`), resuming the control
connection's session (RFC 4217 sec. 10).
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass

from ...ftp.listing import format_time_val
from ...ftp.partname import download_part
from ...ftp.url import FTPLocation
from ...io.tuner import SocketTuner
from ...tuning import Role
from ..result import TransferResult
from ..session.control import ControlConnection, FTPError
from ..session.flowctl import FlowControl, first_passive
from ..session.login import open_logged_in, open_session
from ..transfer.onefile import (
    new_transfer,
    open_part,
    receive_data,
    rest_lines,
    run_data,
    send_data,
)
from ..transfer.options import TransferOptions
from ..transfer.streammode import StreamTransfer, check_sent, close_data
from .listings import Listings
from .pipelined import PairRefused, Started, sent


class RemoteSession(Listings):
    """A session's listings (:class:`.listings.Listings`) and data
    commands (:class:`.pipelined.DataCommands`), and its files."""

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

    async def close(self) -> None:
        await self.ctl.close()

    @property
    def rtt(self) -> float | None:
        from ...io import sockopt

        sock = self.ctl.writer.get_extra_info("socket")
        us = sockopt.tcp_info(sock).get("rtt") if sock is not None else None
        return us / 1e6 if us else None

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

        sent(st).final.add_done_callback(final_arrived)
        try:
            await self._check_extra(st)
            await self.preliminary(st, f"cannot retrieve {remote}")
            tuner.attach(sock)
            part = download_part(local)
            with open_part(part, offset) as f:
                seconds = await run_data(xfer, receive_data(sock, f, xfer), sent(st), f"RETR {remote}")
        finally:
            close_data(sock, xfer)
        return GetTail(self, st, remote, local, part, size, offset, xfer, seconds)

    async def _open_data(self, st: Started, lines: tuple[str, ...], role: Role, local: str,
                         size: int | None, offset: int, on_xfer) -> tuple[SocketTuner, StreamTransfer, socket.socket]:
        """The tuner, the transfer's state and its connected data socket; a
        connection that fails first drains the replies of ``lines``."""
        xfer = new_transfer(st.flow, self.opts, role, local, size, offset)
        tuner = xfer.tuner
        if on_xfer:
            on_xfer(xfer)
        try:
            sock = await self.connect(st, tuner, lines)
        except (FTPError, PairRefused):
            await self._drain_tokens(st)
            raise
        return tuner, xfer, sock

    async def put_file(self, local: str, remote: str, f, size: int, offset: int, mtime: float | None,
                       on_xfer=None) -> TransferResult:
        lines = (f"ALLO {size}", *rest_lines(offset), f"STOR {remote}")
        st = self.start(*lines)
        tuner, xfer, sock = await self._open_data(st, lines, Role.SENDER, local, size, offset, on_xfer)
        try:
            await self._check_extra(st)
            await self.preliminary(st, f"cannot store {remote}")
            tuner.attach(sock)
            # No wait for the last ACK (as a single put does, to time the
            # transfer alone): the kernel delivers what it holds after close,
            # and the 226 says the server has it all.
            seconds = await run_data(xfer, send_data(sock, f, offset, size - offset, xfer), sent(st), f"STOR {remote}")
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
