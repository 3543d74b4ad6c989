"""One data transfer in stream mode (RFC 959 3.4.1): the data connection's
tuner and ticker, its DRS exchange, and the get and put data paths
(docs/DESIGN.md, "Client"), for a single get or put, each range of a
ranged get (docs/PARALLEL.md, "The ranged fallback") and each file of a
dataset session (docs/DATASETS.md).

The data path is one large receive buffer written straight to the file
(get: a BufferedProtocol, with SO_RCVLOWAT batching the reads;
docs/DESIGN.md#read-path) and blocking sends from a thread (put;
client/transfer/filesend.py; docs/DESIGN.md#send-path): no per-packet Python work.
The ticker observes the data socket every fraction of an RTT, applies the
tuning strategy's decisions and, when the server offers DRS in FEAT,
exchanges measurements with it (docs/PROTOCOL.md, "DRS").
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable

from ...io import sockopt
from ...io.tuner import SocketTuner
from ...tuning import Role
from ..result import TransferResult
from ..session.control import FTPError, Pending, os_reason
from ..session.flowctl import FlowControl
from . import filesend, maxtime
from .dataconn import LocalWriteError, open_data_socket, settle, start_data
from .drsclient import DRSDriver, DRSFigures, drs_enabled
from .filesend import SEND_POLL
from .options import TransferOptions
from .progress import ProgressView

RECV_CHUNK = 4 << 20  # bytes a get's buffer takes at a time (docs/decisions/0017-smaller-get-reads.md)


class StreamTransfer(DRSFigures):
    """One data transfer: the data socket's tuner, the ticker, the DRS exchange."""

    def __init__(self, fc: FlowControl, tuner: SocketTuner, opts: TransferOptions,
                 label: str, total: int | None, resumed: int) -> None:
        """``fc``: the flow the transfer's commands go through (DRS too)."""
        self.fc, self.ctl, self.tuner, self.opts = fc, fc.ctl, tuner, opts
        self.drs = DRSDriver(drs_enabled(fc.ctl, opts), self._on_peer_report)
        self.moved = 0
        self.resumed = resumed
        self._last_progress = (time.monotonic(), 0)
        self.started = time.monotonic()
        self.timed_out = False
        self.view = ProgressView(label, total, opts.progress)
        self.data_transport: asyncio.Transport | None = None  # get: the socket's reader
        self.write_error: OSError | None = None  # get: the local file's write failed (a full disk)

    async def open_data(self, send: Callable[[], None] | None = None) -> socket.socket:
        """The data connection to the server's passive address (EPSV, else
        PASV), ``send`` sending the transfer's commands during its handshake."""
        address = await self.fc.passive_address()
        return await open_data_socket(self.ctl, address, self.tuner, self.opts.connect_timeout, send)

    def progress_bytes(self) -> int:
        if self.tuner.role is Role.SENDER and self.ctl.tls is None:  # (TLS: acked counts its records too)
            acked = self.tuner.last_info.get("bytes_acked")  # counts the SYN: one more than the data
            return max(acked - 1, 0) if acked is not None else self.moved
        return self.moved

    async def ticker(self, io_task: asyncio.Task) -> None:
        """Observe, tune, report, exchange DRS; cancel a stalled transfer."""
        while not io_task.done():
            delay = self.tuner.tick(self.moved) or 0.1
            self.drs.maybe_send(self.fc.send, self.tuner.last_rtt, self.tuner.report)
            now = time.monotonic()
            done = self.progress_bytes()
            if done != self._last_progress[1]:
                self._last_progress = (now, done)
            elif now - self._last_progress[0] > self.opts.idle_timeout:
                io_task.cancel()
                raise FTPError(f"data connection stalled for {self.opts.idle_timeout:.0f} s")
            self.view.update(self.resumed + done, self.tuner.rate * 8, self.tuner.last_rtt,
                             getattr(self.tuner.tuning, "window", None))
            await asyncio.sleep(delay)

    def finish_view(self) -> None:
        """The last state, then the bar closes (it stays on the terminal)."""
        self.view.update(self.resumed + self.progress_bytes(), self.tuner.rate * 8, self.tuner.last_rtt,
                         getattr(self.tuner.tuning, "window", None))
        self.view.close()

    def _on_peer_report(self, pairs: dict[str, int], seconds: float) -> None:
        if self.tuner.control_rtt is None or seconds < self.tuner.control_rtt:
            self.tuner.control_rtt = seconds  # the DRS round trip: the RTT where TCP_INFO is missing
        self.tuner.on_peer_pairs(pairs)

    def result(self, direction: str, path: str, total: int | None, offset: int, seconds: float,
               complete: bool = True) -> TransferResult:
        """What the transfer did, for --json and the summary line."""
        r = TransferResult(
            direction=direction,
            path=path,
            bytes=self.moved,
            total_size=total,
            resumed_from=offset,
            seconds=seconds,
            drs_peer=self.drs_replies > 0,
            drs_replies=self.drs_replies,
            server_last_report=self.server_last,
            timeline=self.tuner.stats.timeline,
            complete=complete,
        )
        r.update(self.tuner.summary(), streams=1)
        return r


class FileSink(asyncio.BufferedProtocol):
    """The get data path: the kernel copies into one large buffer that is
    written straight to the file.  A protocol rather than a sock_recv_into
    loop: the socket stays registered with the selector, so a read costs one
    callback, not a future and two epoll_ctl calls
    (docs/decisions/0009-sock-recv-into-read-loop.md), and the ticker runs
    between reads."""

    def __init__(self, f, xfer: StreamTransfer, keep_open: bool = True) -> None:
        self.buf = bytearray(RECV_CHUNK)
        self.view = memoryview(self.buf)
        self.f, self.xfer = f, xfer
        self.keep_open = keep_open
        self.done = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int):
        # A memoryview, not the bytearray: asyncio's TLS transport fills the
        # rest of the buffer through slices of it (a bytearray slice is a copy).
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        # A write error (disk full) closes the transport: the receive ends
        # with this file's error, not the connection's (the server's 426
        # that follows is not the cause).
        try:
            self.f.write(self.view[:nbytes])
        except OSError as exc:
            self.xfer.write_error = exc
            raise
        self.xfer.moved += nbytes

    def eof_received(self) -> bool:
        self._end(None)
        # The caller closes the socket, after the ticker's last look.  A TLS
        # transport answers the close_notify and closes its own duplicate.
        return self.keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    def _end(self, exc: Exception | None) -> None:
        settle(self.done, exc)


async def receive_file(sock: socket.socket, f, xfer: StreamTransfer, tls=None, host: str = "") -> None:
    """The get data path: the data connection's bytes into ``f`` up to its
    EOF (in TLS with ``tls``, checked against ``host``)."""
    transport, sink = await start_data(sock, lambda: FileSink(f, xfer, keep_open=tls is None), tls, host)
    try:
        await sink.done
    finally:
        # Stop reading (a cancelled transfer's file closes next); get()
        # closes the transport once the ticker has taken its last look.
        transport.pause_reading()
        xfer.data_transport = transport


def close_data(sock: socket.socket, xfer: StreamTransfer) -> None:
    """The data connection closed, its reader (a get's transport) too."""
    if xfer.data_transport is not None:
        xfer.data_transport.abort()
    sock.close()


async def send_file(sock: socket.socket, f, offset: int, count: int, xfer: StreamTransfer) -> None:
    """The file from a thread, the socket made blocking: the kernel waits
    for send-buffer room itself.  asyncio's sock_sendfile instead wakes
    Python, with two epoll_ctl calls, each time about a third of the send
    buffer frees: with a buffer DRS keeps near 2 x BDP on a short path that
    is thousands of wakeups a second (docs/decisions/0008-asyncio-sock-sendfile.md).  The thread
    sends on a duplicate descriptor it closes itself, so a cancelled
    transfer may close the socket at once; it stops within SEND_POLL.
    sendfile, or copies to a peer on this host (filesend)."""
    sent = 0
    if count > 0:
        sockopt.block_with_send_timeout(sock, SEND_POLL)
        stop = threading.Event()
        try:  # (a cancel leaves the thread's result to a cancelled future, which drops it)
            sent = await asyncio.get_running_loop().run_in_executor(
                None, _send_until, os.dup(sock.fileno()), f.fileno(), offset, count, stop,
                sockopt.peer_on_this_host(sock))
        finally:
            stop.set()
    xfer.moved = sent


def check_sent(xfer: StreamTransfer, count: int, src: str) -> None:
    """After the server's 226: a file that shrank while it was sent left
    the server a short copy, which a server without an ALLO check (vsftpd)
    took as whole."""
    if xfer.moved < count:
        raise FTPError(f"{src} shrank during the upload: {xfer.moved} of {count} bytes went, "
                       "so the server's copy is short", transient=False)


def _send_until(fd: int, fileno: int, offset: int, count: int, stop: threading.Event, copy: bool) -> int:
    """filesend.send_range on ``fd``, which it closes.  A file that ends
    early is not an error here: the server's size check (ALLO) tells."""
    try:
        return filesend.send_range(fd, fileno, offset, count, stop, copy)
    finally:
        os.close(fd)


async def drain_sent(sock: socket.socket, xfer: StreamTransfer, tuner: SocketTuner, limit: float = 60.0) -> None:
    """Wait until the peer has acknowledged what sendfile handed the kernel,
    so the measured time is the transfer's, not the local copy's."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        tuner.tick(xfer.moved)
        info = tuner.last_info
        if not info or (info.get("unacked", 0) == 0 and info.get("notsent_bytes", 0) == 0):
            return
        await asyncio.sleep(0.005)


async def drive_data(io: asyncio.Task, xfer: StreamTransfer) -> None:
    """The data phase: ``io`` watched by the ticker, stopped at --max-time's
    instant (maxtime.py)."""
    ticker = asyncio.ensure_future(xfer.ticker(io))
    try:
        deadline = maxtime.lift(xfer.opts)
        if deadline is not None:
            await asyncio.wait([io], timeout=deadline.left())
            if not io.done():
                xfer.timed_out = True
                io.cancel()
        await io
    except (OSError, ConnectionError) as exc:
        if exc is xfer.write_error:
            raise LocalWriteError(exc) from exc
        raise FTPError(f"data connection failed: {os_reason(exc)}") from exc
    except asyncio.CancelledError:
        failure = ticker.exception() if ticker.done() and not ticker.cancelled() else None
        if failure is not None:
            raise failure from None
        if not xfer.timed_out:
            raise
    finally:
        if not io.done():
            io.cancel()
        if not ticker.done():
            ticker.cancel()
            try:
                await ticker
            except (asyncio.CancelledError, FTPError):
                pass


async def server_says_why(work: Awaitable[None], pending: Pending, label: str) -> None:
    """When the data connection fails, the server's final reply (452 disk
    full, 451, 426...) says why better than ECONNRESET does."""
    try:
        await work
    except FTPError as exc:
        if not exc.transient:  # a local cause (this disk full: "cannot write ..."), the server's 426 follows it
            raise
        try:
            reply = await asyncio.wait_for(asyncio.shield(pending.final), 5)
        except (TimeoutError, FTPError):
            raise exc from None
        if reply.code >= 400:
            raise FTPError(f"{label} failed: {reply}", reply) from exc
        raise
