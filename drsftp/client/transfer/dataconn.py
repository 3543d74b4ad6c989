"""Data connections: the one place a client data connection is opened,
tuned and secured (docs/DESIGN.md, "Client"; docs/PARALLEL.md).

Every data socket is sized before its handshake (the window scale is fixed
then: SocketTuner.before_handshake) and after it, whichever side connects:

* :func:`connect_data` / :func:`open_data_socket`: to a passive address (a
  stream-mode transfer, a listing, a MODE E put's streams);
* :func:`listen_for_data`, :func:`active_command`, :func:`accept_data`: a
  listener the server connects to (a MODE E get's streams), taking
  connections from the control connection's peer only (RFC 2577 sec. 5).

A TLS data connection's handshake waits until the transfer command is
sent (vsftpd accepts the connection, and starts TLS on it, only then):
:func:`start_data` makes the asyncio transport after the 1yz reply, in
TLS when the control connection is (PROT P), resuming its session (RFC
4217 sec. 10); :func:`open_tls_stream` and :func:`tls_handshake` do the
same for MODE E streams, the client always the TLS client.

Over TLS the bytes go through the TLS layer in Python, so the plain
read/write path serves both directions (no sendfile, no SO_RCVLOWAT
batching: a TLS close_notify is smaller than a batch).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Collection

from ...io.tlsbio import TLSPipe
from ...io.tuner import SocketTuner
from ..session.control import ControlConnection, FTPError, os_reason
from ..session.tls import ClientTLS, failure_sentence

TLS_WRITE_CHUNK = 1 << 20  # bytes read from the file per transport.write
TLS_HIGH_WATER = 4 << 20  # plaintext queued in the transport before a put waits
TLS_SHUTDOWN = 10.0  # seconds a closing TLS data connection waits for the peer's close_notify
LISTEN_BACKLOG = 64  # a MODE E get's streams connecting at once

log = logging.getLogger("drsftp.client")


async def connect_data(ctl: ControlConnection, address: tuple[str, int], tuner: SocketTuner | None,
                       timeout: float, send: Callable[[], None] | None = None) -> socket.socket:
    """A data connection to ``address``, tuned by ``tuner`` before and
    after its handshake; OSError or TimeoutError if it cannot be made.
    ``send``: sends the transfer command(s) while the handshake runs (a
    passive server accepts once the command has come, RFC 959 3.2: one
    round trip less; a TLS handshake still waits for the 1yz)."""
    sock = socket.socket(ctl.family(), socket.SOCK_STREAM)
    sock.setblocking(False)
    if tuner is not None:
        tuner.note_control_rtt(ctl.writer.get_extra_info("socket"))
        tuner.before_handshake(sock)  # window scale is fixed by this
    try:
        source = ctl.data_source(address[0])
        if source is not None:
            sock.bind(source)  # (the client's address, as the server's bounce rule wants it)
        if send is not None:
            send()
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, address), timeout)
    except BaseException:
        sock.close()
        raise
    if tuner is not None:
        tuner.after_handshake(sock)
    return sock


async def open_data_socket(ctl: ControlConnection, address: tuple[str, int], tuner: SocketTuner | None,
                           timeout: float, send: Callable[[], None] | None = None) -> socket.socket:
    """:func:`connect_data`, its failure an FTPError that names the address.
    The address is the control connection's host (FlowControl.passive_address:
    a PASV address could point elsewhere, RFC 2577 sec. 5)."""
    try:
        return await connect_data(ctl, address, tuner, timeout, send)
    except (TimeoutError, OSError) as exc:
        host, port = address
        hint = (f" (PASV named {ctl.pasv_named}: --pasv-address connects there)"
                if ctl.pasv_named and ctl.pasv_named != host else "")
        raise FTPError(f"cannot open data connection to {host}:{port}: {os_reason(exc)}{hint}") from exc


def listen_for_data(ctl: ControlConnection, tuner: SocketTuner) -> socket.socket:
    """A listener on the control connection's local address (inside a
    network namespace that is the address the server reaches us on),
    sized by ``tuner``: accepted sockets inherit its window scale."""
    local = ctl.writer.get_extra_info("sockname")[0]
    sock = socket.socket(ctl.family(), socket.SOCK_STREAM)
    try:
        sock.bind((local, 0))
        tuner.before_handshake(sock)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def active_command(listener: socket.socket) -> tuple[str, str]:
    """PORT (RFC 959 4.1.2) for IPv4, EPRT (RFC 2428 2) for IPv6, naming
    ``listener``: the command and what to call it in an error."""
    host, port = listener.getsockname()[:2]
    if listener.family == socket.AF_INET6:
        return f"EPRT |2|{host}|{port}|", "active mode (EPRT)"
    h = host.replace(".", ",")
    return f"PORT {h},{port >> 8},{port & 255}", "active mode (PORT)"


async def accept_data(listener: socket.socket, peers: Collection[str],
                      new_tuner: Callable[[], SocketTuner]) -> tuple[socket.socket, SocketTuner] | None:
    """The next connection to ``listener`` and its tuner (``new_tuner()``);
    None for a connection from another address than ``peers`` (the
    control connection's peer, and under --pasv-address the data interface
    its PASV named), which is closed (RFC 2577 sec. 5)."""
    conn, addr = await asyncio.get_running_loop().sock_accept(listener)
    if addr[0] not in peers:
        log.warning("refused a data connection from %s (the server is %s)", addr[0], ", ".join(sorted(peers)))
        conn.close()
        return None
    tuner = new_tuner()
    tuner.before_handshake(listener)  # (what the listener had: the window scale is fixed)
    tuner.after_handshake(conn)
    return conn, tuner


async def start_data(sock: socket.socket, protocol_factory, tls: ClientTLS | None, host: str,
                     timeout: float = 30.0):
    """(transport, protocol) over ``sock``; with ``tls`` the TLS handshake
    runs here, checked as the control connection's, resuming its session.
    A TLS transport gets a duplicate descriptor: closing it leaves
    ``sock`` open for the tuner's last TCP_INFO, and the caller closes
    ``sock`` as for a plain connection."""
    loop = asyncio.get_running_loop()
    if tls is None:
        return await loop.create_connection(protocol_factory, sock=sock)
    try:
        return await loop.create_connection(
            protocol_factory, sock=sock.dup(), ssl=tls.context, server_hostname=host,
            ssl_handshake_timeout=timeout, ssl_shutdown_timeout=TLS_SHUTDOWN)
    except ConnectionError as exc:
        raise FTPError(f"TLS handshake on the data connection failed: {exc}") from exc
    except OSError as exc:  # ssl.SSLError is an OSError
        raise FTPError(failure_sentence(exc, host), transient=False) from exc


async def open_tls_stream(sock: socket.socket, protocol_factory, tls: ClientTLS, host: str, timeout: float):
    """A MODE E stream the server connected, in TLS as TLS client (RFC
    4217 sec. 10), checked and resuming as the control connection; the
    transport owns ``sock`` as a clear-text stream's does."""
    try:
        return await asyncio.get_running_loop().create_connection(
            protocol_factory, sock=sock, ssl=tls.context, server_hostname=host, ssl_handshake_timeout=timeout,
            ssl_shutdown_timeout=TLS_SHUTDOWN)
    except (ConnectionError, TimeoutError) as exc:
        raise FTPError(f"TLS handshake on a data connection failed: {exc or 'timed out'}") from exc
    except OSError as exc:  # ssl.SSLError is an OSError
        raise FTPError(failure_sentence(exc, host), transient=False) from exc


async def tls_handshake(sock: socket.socket, tls: ClientTLS, host: str, timeout: float) -> TLSPipe:
    """The client's TLS handshake on a connected non-blocking socket, for
    a data path that sends through a :class:`TLSPipe` itself (MODE E put
    streams); checked and resuming as the control connection."""
    loop = asyncio.get_running_loop()
    pipe = TLSPipe(tls.context, server_side=False, server_hostname=host)

    async def run() -> None:
        while True:
            done = pipe.handshake()
            out = pipe.take()
            if out:
                await loop.sock_sendall(sock, out)
            if done:
                return
            data = await loop.sock_recv(sock, 65536)
            if not data:
                raise ConnectionResetError("the server closed the connection")
            pipe.feed(data)

    try:
        await asyncio.wait_for(run(), timeout)
    except (ConnectionError, TimeoutError) as exc:
        raise FTPError(f"TLS handshake on a data connection failed: {exc or 'timed out'}") from exc
    except OSError as exc:
        raise FTPError(failure_sentence(exc, host), transient=False) from exc
    return pipe


class FlowProtocol(asyncio.Protocol):
    """Write side of a TLS put: waits while the transport's buffer is full."""

    def __init__(self) -> None:
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        transport.set_write_buffer_limits(high=TLS_HIGH_WATER)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._can_write.set()
        settle(self.lost, exc, retrieved=True)  # a finished put never awaits it

    async def writable(self) -> None:
        await self._can_write.wait()
        if self.lost.done():
            self.lost.result()  # the error it was lost with
            raise ConnectionResetError("data connection closed by the server")


async def send_tls(sock: socket.socket, f, offset: int, count: int, xfer, tls: ClientTLS, host: str) -> None:
    """The put data path over TLS: file chunks through the TLS transport;
    ``xfer.moved`` counts the plaintext handed over.  Ends with the
    close_notify sent (RFC 4217 sec. 10: the data is complete)."""
    transport, proto = await start_data(sock, FlowProtocol, tls, host)
    xfer.data_transport = transport
    pos, end = offset, offset + count
    loop = asyncio.get_running_loop()
    while pos < end:
        await proto.writable()
        chunk = await loop.run_in_executor(None, os.pread, f.fileno(), min(TLS_WRITE_CHUNK, end - pos), pos)
        if not chunk:
            break  # the file shrank: the server's size check (ALLO) tells
        transport.write(chunk)
        pos += len(chunk)
        xfer.moved = pos - offset
    await proto.writable()
    transport.close()  # flushes, then close_notify


class LocalWriteError(FTPError):
    """Writing the local file failed (a full disk): the cause to report,
    not the data connection the failure then closes; ``why`` the OS's
    words, for a sentence that names the file."""

    def __init__(self, exc: OSError) -> None:
        self.why = os_reason(exc)
        super().__init__(f"cannot write the file: {self.why}", transient=False)

    def naming(self, path: str) -> FTPError:
        return FTPError(f"cannot write {path}: {self.why}", transient=False)


def settle(done: asyncio.Future, exc: BaseException | None, *, retrieved: bool = False) -> None:
    """End a data connection's future once: with ``exc``, or cleanly;
    ``retrieved``: mark the exception read (no "never retrieved" report
    for a future nobody may await)."""
    if done.done():
        return
    if exc is None:
        done.set_result(None)
        return
    done.set_exception(exc)
    if retrieved:
        done.exception()
