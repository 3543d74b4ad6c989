"""`drsftp get` / `drsftp put`: one file over one FTP session, with DRS.

The data path is one large receive buffer written straight to the file
(get: a BufferedProtocol, with SO_RCVLOWAT batching the reads) and
blocking sends from a thread (put; client/filesend.py): no per-packet
Python work.  A ticker
task observes the data socket every fraction of an RTT, applies the tuning
strategy's decisions and, when the server offers DRS in FEAT, exchanges
measurements with it (docs/PROTOCOL.md).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence

from .. import sockopt
from ..ftp.flow import FlowError, TransferDone
from ..ftp.partname import partial_name
from ..ftp.replies import Reply, parse_feat
from ..ftp.url import FTPLocation
from ..result import TransferResult
from ..tuner import SocketTuner
from ..tuning import Role, check_spec
from . import filesend, maxtime
from .control import Check, ControlConnection, FTPError, Pending, expect, os_reason, size_of
from .dataconn import open_data_socket, send_tls, settle, start_data
from .drsclient import DRSDriver, DRSFigures, drs_enabled
from .flowctl import FlowControl
from .options import TransferOptions
from .progress import ProgressView
from .tls import client_tls
from .verify import verify

log = logging.getLogger("drsftp.client")
RECV_CHUNK = 4 << 20
SEND_POLL = 0.2  # seconds a blocked sendfile waits before it looks for a stop (SO_SNDTIMEO)


class _Transfer(DRSFigures):
    """One data transfer: the data socket, the ticker, the DRS exchange."""

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


async def open_session(loc: FTPLocation, opts: TransferOptions, queries: Sequence[str] = (),
                       then: Callable[[ControlConnection], None] | None = None,
                       ) -> tuple[ControlConnection, list[Reply]]:
    """A logged-in session in binary mode, and the replies to ``queries``
    (SIZE, MDTM: read-only commands whose replies the caller judges).
    ``then(ctl)`` sends more right behind the batch, its replies the
    caller's (a listing asked for with the log-in: remote.py).
    Round trips: the connection; (the greeting, AUTH TLS and the handshake:
    RFC 4217 sec. 4, nothing else may be sent before); then FEAT, USER,
    PASS, (PBSZ 0, PROT P,) TYPE I and the queries in one batch, their
    replies checked in order (docs/DESIGN.md "Pipelined session setup").
    Without explicit TLS the batch goes out before the greeting arrives:
    the server reads it once it has greeted, and the greeting is checked
    first (a 421 fails the session before any other reply is trusted)."""
    tls = None
    if opts.tls or loc.implicit_tls:
        tls = client_tls(opts.ca_file, opts.insecure, implicit=loc.implicit_tls)
        if opts.insecure:
            _say_insecure()
    explicit = tls is not None and not tls.implicit
    ctl = await ControlConnection.open(loc.host, loc.port, opts.connect_timeout, tls, greeting=explicit)
    try:
        if tls is not None and explicit:
            await ctl.secure(tls, opts.connect_timeout)
        feat = ctl.start("FEAT")
        login = ctl.start_login(loc.user, loc.password)
        batch: list[tuple[Pending, Check | None]] = []
        if tls is not None:  # RFC 4217 sec. 8-9, after the login: data connections in TLS too
            batch += [(ctl.start("PBSZ 0"), expect(200, what="PBSZ 0 (FTPS)")),
                      (ctl.start("PROT P"), expect(200, what="PROT P (encrypted data connections)"))]
        batch.append((ctl.start("TYPE I"), expect(200, what="binary mode (TYPE I)")))
        batch += [(ctl.start(q), None) for q in queries]
        if then is not None:
            then(ctl)
        if not explicit:
            await ctl.greeted(opts.connect_timeout)
        ctl.features = parse_feat((await ctl.settle([(feat, None)]))[0])
        await ctl.login_done(loc.user, login)
        replies = await ctl.settle(batch)
    except BaseException:
        await ctl.close()
        raise
    return ctl, replies[len(batch) - len(queries):]


@functools.cache
def _say_insecure() -> None:
    """Once per process, however many sessions (-P, -c) a call opens."""
    log.warning("--insecure: the server's TLS certificate is not checked")


async def _session(loc: FTPLocation, opts: TransferOptions) -> ControlConnection:
    return (await open_session(loc, opts))[0]


def _announce(ctl: ControlConnection, opts: TransferOptions) -> None:
    if opts.use_drs_command and "DRS" not in ctl.features and opts.tuning.startswith("drs"):
        log.warning("server does not offer DRS; right-sizing this end alone")


async def _finish(fc: FlowControl, pending: Pending, label: str) -> None:
    reply = await asyncio.wait_for(asyncio.shield(pending.final), 120)
    if not isinstance(fc.ended(pending, reply), TransferDone):
        raise FTPError(f"{label} failed: {reply}", reply)


async def get(loc: FTPLocation, dest: str, opts: TransferOptions) -> TransferResult:
    return await maxtime.within(opts, "get", loc.path, lambda o: _get(loc, dest, o))


async def _get(loc: FTPLocation, dest: str, opts: TransferOptions) -> TransferResult:
    check_spec(opts.tuning)
    part = dest + ".part"
    ctl, (size_reply,) = await open_session(loc, opts, [f"SIZE {loc.path}"])
    try:
        _announce(ctl, opts)
        size = size_of(size_reply)
        offset = 0
        resume_dest = False  # DEST itself is continued: it becomes DEST.part once data comes
        if opts.resume:
            for candidate in (part, dest):
                if os.path.isfile(candidate):
                    offset = os.path.getsize(candidate)
                    if candidate == dest:
                        if size is not None and offset == size:
                            return _already_complete("get", loc.path, size)
                        resume_dest = True
                    break
            if size is not None and offset > size:
                raise FTPError(f"local file ({offset} B) is larger than the remote one ({size} B)",
                               transient=False)
        # SO_RCVLOWAT batching off over TLS: a close_notify is smaller than a batch
        tuner = SocketTuner(opts.tuning, Role.RECEIVER, allow_force=opts.force_buffers,
                            batch_reads=ctl.tls is None)
        fc = FlowControl(ctl)
        xfer = _Transfer(fc, tuner, opts, os.path.basename(loc.path), size, offset)
        try:
            sent: list = []
            # (REST and) RETR in one batch, while the data connection opens
            sock = await xfer.open_data(lambda: sent.extend(
                (fc.send_all(_rest(offset)), fc.send(f"RETR {loc.path}"))))
            try:
                rest, pending = sent
                await fc.check(rest, pending)
                await fc.started(pending, f"cannot retrieve {loc.path}")
                tuner.attach(sock)
                try:
                    make_parents(dest)  # (not before: a refused RETR makes no directory)
                    if resume_dest:  # (not before: a refused RETR leaves DEST as it was)
                        os.replace(dest, part)
                    f = _open_part(part, offset)
                except OSError as exc:
                    raise FTPError(f"cannot write {dest}: {os_reason(exc)}", transient=False) from exc
                with f:
                    started = time.monotonic()
                    xfer.started = started
                    io = asyncio.ensure_future(_receive(sock, f, xfer, ctl.tls, ctl.host))
                    await _server_says_why(_drive(io, xfer), pending, f"RETR {loc.path}")
                    seconds = time.monotonic() - started
                _close_data(sock, xfer)
                if xfer.timed_out:
                    await _abort(fc, pending)
                    return _result("get", loc.path, xfer, size, offset, seconds, complete=False)
                await _finish(fc, pending, f"RETR {loc.path}")
            finally:
                _close_data(sock, xfer)
        finally:
            xfer.finish_view()
        if size is not None and offset + xfer.moved != size:
            raise FTPError(f"short transfer: {offset + xfer.moved} of {size} bytes (--continue resumes)")
        digest = await verify(ctl, loc.path, part) if opts.verify else None
        try:
            os.replace(part, dest)
        except OSError as exc:
            raise FTPError(f"cannot write {dest}: {os_reason(exc)}", transient=False) from exc
        result = _result("get", loc.path, xfer, size, offset, seconds)
        result.sha256 = digest
        return result
    finally:
        await ctl.close()


async def put(src: str, loc: FTPLocation, opts: TransferOptions) -> TransferResult:
    return await maxtime.within(opts, "put", loc.path, lambda o: _put(src, loc, o))


async def _put(src: str, loc: FTPLocation, opts: TransferOptions) -> TransferResult:
    check_spec(opts.tuning)
    try:
        f = open(src, "rb")  # noqa: SIM115 (closed by the `with f:` below)
    except OSError as exc:
        raise FTPError(f"cannot read {src}: {os_reason(exc)}", transient=False) from exc
    with f:
        total = os.fstat(f.fileno()).st_size
        ctl = await _session(loc, opts)
        try:
            _announce(ctl, opts)
            offset = 0
            if opts.resume:
                offset = await uploaded_prefix(ctl, loc.path, src, total)
                if offset == total:
                    return _already_complete("put", loc.path, total)
            tuner = SocketTuner(opts.tuning, Role.SENDER, allow_force=opts.force_buffers)
            fc = FlowControl(ctl)
            xfer = _Transfer(fc, tuner, opts, os.path.basename(src), total, offset)
            try:
                sent: list = []
                # ALLO, (REST,) STOR in one batch, while the data connection
                # opens.  ALLO: the size, so a server can tell an upload cut
                # short from a complete one (stream mode ends both by closing).
                sock = await xfer.open_data(lambda: sent.extend(
                    (fc.send(f"ALLO {total}"), fc.send_all(_rest(offset)), fc.send(f"STOR {loc.path}"))))
                try:
                    allo, rest, pending = sent
                    await fc.reply(allo)  # (refused or not: a server may not need it, RFC 959 4.1.3)
                    await fc.check(rest, pending)
                    await fc.started(pending, f"cannot store {loc.path}")
                    tuner.attach(sock)
                    started = time.monotonic()
                    xfer.started = started
                    if ctl.tls is not None:
                        io = asyncio.ensure_future(send_tls(sock, f, offset, total - offset, xfer, ctl.tls, ctl.host))
                    else:
                        io = asyncio.ensure_future(_send(sock, f, offset, total - offset, xfer))
                    await _server_says_why(_drive(io, xfer), pending, f"STOR {loc.path}")
                    if xfer.timed_out:
                        xfer.moved = xfer.progress_bytes()
                        seconds = time.monotonic() - started
                        _close_data(sock, xfer)
                        await _abort(fc, pending)
                        return _result("put", loc.path, xfer, total, offset, seconds, complete=False)
                    await _drain(sock, xfer, tuner)
                    seconds = time.monotonic() - started
                    sock.close()
                    await _finish(fc, pending, f"STOR {loc.path}")
                    check_sent(xfer, total - offset, src)
                finally:
                    _close_data(sock, xfer)
            finally:
                xfer.finish_view()
            result = _result("put", loc.path, xfer, total, offset, seconds)
            result.sha256 = await verify(ctl, loc.path, src) if opts.verify else None
            return result
        finally:
            await ctl.close()


async def uploaded_prefix(ctl: ControlConnection, path: str, src: str, total: int) -> int:
    """What an interrupted stream-mode put left on the server, a prefix of
    the file: the remote file's size, or on a drsftp server (which keeps an
    unfinished upload under a temporary name) that name's."""
    offset = await ctl.size(path) or 0
    if not offset and "DRS" in ctl.features:
        offset = await ctl.size(partial_name(path)) or 0
    if offset > total:
        raise FTPError(f"remote file ({offset} B) is larger than {src} ({total} B)", transient=False)
    return offset


def _rest(offset: int) -> list[tuple[str, str]]:
    """REST before the transfer command, resuming at ``offset`` (RFC 959
    4.1.3); a refusal fails the transfer as "resume (REST) failed"."""
    return [(f"REST {offset}", "resume (REST)")] if offset else []


def make_parents(dest: str) -> None:
    """The directories DEST names that are missing, as `get -r` makes its
    destination's: only those of the path the user gave (its dirname)."""
    folder = os.path.dirname(dest)
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:  # a file where a directory must be: say so, not "file exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder) from None


def _open_part(part: str, offset: int):
    """The download file, positioned at ``offset``.  A fresh download never
    truncates an old file in place: on ext4 (auto_da_alloc) a truncate then
    rewrite is flushed to disk on close, costing ~0.3 s per GiB."""
    if not offset:
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
    fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
    f = open(fd, "wb", buffering=0, closefd=True)  # noqa: SIM115 (the caller closes it)
    if offset and os.fstat(fd).st_size > offset:
        f.truncate(offset)
    f.seek(offset)
    return f


async def with_retries(run, opts: TransferOptions, retries: int, *, base_delay: float = 1.0,
                       max_delay: float = 30.0, on_retry=None) -> TransferResult:
    """Run ``run(opts)``; after a transient failure (lost connection, 4yz
    reply, short transfer) reconnect with exponential backoff and resume
    with REST, up to ``retries`` more times."""
    from dataclasses import replace

    attempt = 0
    opts = maxtime.started(opts)  # (one --max-time for every attempt, as curl's)
    while True:
        try:
            return await run(opts)
        except FTPError as exc:
            if not exc.transient or attempt >= retries:
                raise
            delay = min(base_delay * 2 ** attempt, max_delay)
            attempt += 1
            if on_retry:
                on_retry(attempt, delay, exc)
            await asyncio.sleep(delay)
            opts = replace(opts, resume=True)


class _FileSink(asyncio.BufferedProtocol):
    """The get data path: the kernel copies into one large buffer that is
    written straight to the file.  A protocol rather than a sock_recv_into
    loop: the socket stays registered with the selector, so a read costs one
    callback, not a future and two epoll_ctl calls
    (docs/decisions/0009-sock-recv-into-read-loop.md), and the ticker runs
    between reads."""

    def __init__(self, f, xfer: _Transfer, keep_open: bool = True) -> None:
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
        # A write error (disk full) closes the transport, and asyncio hands
        # the OSError to connection_lost: the receive ends with it.
        self.f.write(self.view[:nbytes])
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


async def _receive(sock: socket.socket, f, xfer: _Transfer, tls=None, host: str = "") -> None:
    transport, sink = await start_data(sock, lambda: _FileSink(f, xfer, keep_open=tls is None), tls, host)
    try:
        await sink.done
    finally:
        # Stop reading (a cancelled transfer's file closes next); get()
        # closes the transport once the ticker has taken its last look.
        transport.pause_reading()
        xfer.data_transport = transport


def _close_data(sock: socket.socket, xfer: _Transfer) -> None:
    if xfer.data_transport is not None:
        xfer.data_transport.abort()
    sock.close()


async def _send(sock: socket.socket, f, offset: int, count: int, xfer: _Transfer) -> None:
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


def check_sent(xfer: _Transfer, count: int, src: str) -> None:
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


async def _drain(sock: socket.socket, xfer: _Transfer, tuner: SocketTuner, limit: float = 60.0) -> None:
    """Wait until the peer has acknowledged what sendfile handed the kernel,
    so the measured time is the transfer's, not the local copy's."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        tuner.tick(xfer.moved)
        info = tuner.last_info
        if not info or (info.get("unacked", 0) == 0 and info.get("notsent_bytes", 0) == 0):
            return
        await asyncio.sleep(0.005)


async def _drive(io: asyncio.Task, xfer: _Transfer) -> None:
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


async def _server_says_why(work, pending, label: str) -> None:
    """When the data connection fails, the server's final reply (452 disk
    full, 451, 426...) says why better than ECONNRESET does."""
    try:
        await work
    except FTPError as exc:
        try:
            reply = await asyncio.wait_for(asyncio.shield(pending.final), 5)
        except (TimeoutError, FTPError):
            raise exc from None
        if reply.code >= 400:
            raise FTPError(f"{label} failed: {reply}", reply) from exc
        raise


async def _abort(fc: FlowControl, pending: Pending) -> None:
    """ABOR (RFC 959 4.1.3): the server answers 426 for the transfer, then 226."""
    try:
        abor = fc.send("ABOR")
        await asyncio.wait_for(asyncio.gather(pending.final, abor.final, return_exceptions=True), 10)
    except (TimeoutError, FTPError, FlowError):
        pass


def _already_complete(direction: str, path: str, size: int) -> TransferResult:
    r = TransferResult(direction=direction, path=path, bytes=0, seconds=0.0, total_size=size, resumed_from=size)
    r.update(note="already complete")
    return r


def _result(direction: str, path: str, xfer: _Transfer, total: int | None, offset: int, seconds: float,
            complete: bool = True) -> TransferResult:
    r = TransferResult(
        direction=direction,
        path=path,
        bytes=xfer.moved,
        total_size=total,
        resumed_from=offset,
        seconds=seconds,
        drs_peer=xfer.drs_replies > 0,
        drs_replies=xfer.drs_replies,
        server_last_report=xfer.server_last,
        timeline=xfer.tuner.stats.timeline,
        complete=complete,
    )
    r.update(xfer.tuner.summary(), streams=1)
    return r
