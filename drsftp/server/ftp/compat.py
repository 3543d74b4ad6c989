"""The one place drsftp touches pyftpdlib's private names (pyftpdlib 2.2.0).

pyftpdlib has no public API for these; a release may rename them, so
every use goes through here and the dependency is pinned to the version
whose functional suite tests/pyftpdlib_suite runs (pyproject.toml).  Each
helper says what it stands for.
"""

from __future__ import annotations

from pyftpdlib.handlers.ftp.control import (
    proto_cmds as STOCK_COMMANDS,  # the stock command table
)
from pyftpdlib.handlers.ftp.data import (
    _FileReadWriteError as FileReadWriteError,  # file-error wrapper
)

__all__ = [
    "STOCK_COMMANDS",
    "EPortHooks",
    "FileReadWriteError",
    "clear_pending_transfer",
    "closed",
    "control_tls_established",
    "converts_data",
    "current_type",
    "data_channel_open",
    "data_connection_coming",
    "data_protected",
    "extra_features",
    "final_reply",
    "last_reply",
    "line_buffer_add",
    "line_buffer_clear",
    "mlst_facts",
    "pending_transfer",
    "port_connecting",
    "protect_data_by_default",
    "queued_file",
    "queued_transfer",
    "queued_upload",
    "restart_idle_timer",
    "restart_position",
    "set_final_reply",
    "set_mlst_facts",
    "skip_tls_goodbye",
    "start_tls_as_client",
    "step_tls_handshake",
    "stop_connecting",
    "stop_reading",
    "tls_established",
    "tls_handshaking",
    "transfer_attached",
]


class EPortHooks:
    """PORT/EPRT and PASV/EPSV end in pyftpdlib's ``_make_eport`` and
    ``_make_epasv`` after their arguments are parsed; they go to the
    handler's ``data_address_hook(ip, port)`` / ``passive_hook(extmode)``
    instead (the address rules, MODE E), which call ``stock_eport`` /
    ``stock_epasv`` for pyftpdlib's stream-mode data channel."""

    def _make_eport(self, ip, port):
        self.data_address_hook(ip, port)

    def _make_epasv(self, extmode=False):
        self.passive_hook(extmode)

    def stock_eport(self, ip, port):
        super()._make_eport(ip, port)

    def stock_epasv(self, extmode):
        super()._make_epasv(extmode)


def epsv_all(handler) -> bool:
    """EPSV ALL was sent: no other data-port command from then on (RFC 2428 sec. 4)."""
    return bool(handler._epsvall)


def closed(channel) -> bool:
    """A pyftpdlib connection (control or data) or dispatcher was closed."""
    return bool(channel._closed)


def quit_after_transfer(handler) -> None:
    """QUIT came during a transfer: the session closes when it ends (RFC 959 4.1.1)."""
    handler._quit_pending = True


def pending_transfer(handler) -> bool:
    """A RETR/STOR is queued waiting for its stream-mode data connection."""
    return handler._out_dtp_queue is not None or handler._in_dtp_queue is not None


def queued_upload(handler):
    """The file of a STOR/APPE queued waiting for its data connection (or None)."""
    queue = handler._in_dtp_queue
    return queue[0] if queue is not None else None


def queued_file(handler):
    """The file of any transfer queued waiting for its data connection (or None)."""
    if handler._out_dtp_queue is not None:
        return handler._out_dtp_queue[2]
    return queued_upload(handler)


def queued_transfer(handler):
    """(file, command, receiving) of the transfer queued waiting for its
    data connection, or None."""
    out, inq = handler._out_dtp_queue, handler._in_dtp_queue
    if out is not None:
        return out[2], out[3], False
    if inq is not None:
        return inq[0], inq[1], True
    return None


def data_connection_coming(handler) -> bool:
    """A PASV listener is listening or a PORT connection is being made.
    (pyftpdlib keeps a PORT's connector after it connected and a timed-out
    listener after it closed.)"""
    acc, con = handler._dtp_acceptor, handler._dtp_connector
    return (acc is not None and not acc._closed) or (con is not None and not con._closed and not con.connected)


def port_connecting(handler) -> bool:
    """A stream-mode PORT/EPRT connection is being made (its reply, sent
    once connected, still owed)."""
    con = handler._dtp_connector
    return con is not None and not con._closed and not con.connected


def stop_connecting(handler) -> None:
    """Close a PASV listener or PORT connector still waiting."""
    handler._shutdown_connecting_dtp()


def last_reply(handler) -> str:
    """The last reply the control connection sent."""
    return handler._last_response


def clear_pending_transfer(handler) -> None:
    handler._out_dtp_queue = handler._in_dtp_queue = None


def restart_position(handler, value: int | None = None) -> int:
    """REST's offset for the next stream-mode transfer (set it with ``value``)."""
    if value is not None:
        handler._restart_position = value
    return handler._restart_position


def current_type(handler) -> str:
    """'i' (TYPE I) or 'a' (TYPE A)."""
    return handler._current_type


def data_protected(handler) -> bool:
    """PROT P is in force (RFC 4217): data channels must be TLS."""
    return bool(getattr(handler, "_prot", False))


def protect_data_by_default(handler) -> None:
    """PBSZ 0 and PROT P in force without the commands (implicit FTPS)."""
    handler._pbsz = handler._prot = True


def tls_established(channel) -> bool:
    """A pyftpdlib TLS connection (control or data) finished its handshake."""
    return bool(getattr(channel, "_ssl_established", False))


def restart_idle_timer(handler) -> None:
    """Restart the control connection's idle timer (pyftpdlib stops it
    while its own data channel runs; MODE E streams are not that)."""
    idler = handler._idler
    if idler is not None and not idler.cancelled:
        if handler.timeout and idler._delay == handler.timeout:
            idler.reset()  # (a countdown moved, not a new timer: once a file on cached streams)
            return
        idler.cancel()
    if handler.timeout:
        handler._idler = handler.ioloop.call_later(handler.timeout, handler.handle_timeout,
                                                    _errback=handler.handle_error)


def extra_features(handler) -> list:
    """The session's list of extra FEAT lines (mutable)."""
    return handler._extra_feats


def mlst_facts(handler) -> list:
    """The MLST facts chosen with OPTS MLST (RFC 3659)."""
    return handler._current_facts


def set_mlst_facts(handler, facts) -> None:
    """Make ``facts`` the session's MLST facts (those the server offers:
    pyftpdlib's ``_available_facts``), as OPTS MLST would."""
    handler._current_facts = [f for f in facts if f in handler._available_facts]


def transfer_attached(dtp) -> bool:
    """A transfer command was attached to this stream-mode data channel."""
    return bool(dtp._initialized)


def converts_data(dtp) -> bool:
    """The data channel converts line endings (TYPE A)."""
    return dtp._data_wrapper is not None


def data_channel_open(dtp) -> bool:
    """A stream-mode data channel is connected and not yet closed."""
    return dtp._initialized and not dtp._closed


def line_buffer_add(handler, data: bytes) -> int:
    """Append to the command line being collected; returns its length."""
    handler._in_buffer.append(data)
    handler._in_buffer_len += len(data)
    return handler._in_buffer_len


def partial_line(handler) -> bytes:
    """What the control connection has read of a command line not yet
    ended (pyftpdlib's line buffer, then asynchat's unsearched bytes)."""
    return b"".join(handler._in_buffer) + handler.ac_in_buffer


def line_read_ahead(handler, data: bytes) -> None:
    """Bytes read off the control connection before asynchat's own read:
    its next read searches them for line ends first, with what it reads."""
    handler.ac_in_buffer += data


def line_buffer_clear(handler) -> None:
    handler._in_buffer, handler._in_buffer_len = [], 0


def set_final_reply(dtp, reply: str | None, logfun=None) -> None:
    """The reply a stream-mode data channel sends when it closes (None: none)."""
    dtp._resp = () if reply is None else (reply, logfun)


def final_reply(dtp) -> str | None:
    """The reply a stream-mode data channel sends when it closes (None: none)."""
    return dtp._resp[0] if dtp._resp else None


def skip_tls_goodbye(channel) -> None:
    """A pyftpdlib TLS connection closes without its TLS shutdown (no
    close_notify of its own), as after an error: its peer is gone.  (Its
    shutdown after a SysCallError fails and is taken for a retry: the
    connection did not close.)"""
    channel._error = True


def control_tls_established(handler) -> bool:
    """The control connection runs TLS (AUTH TLS done; FTPS handlers only)."""
    return bool(getattr(handler, "_ssl_established", False))


def start_tls_as_client(channel) -> None:
    """A pyftpdlib TLS connection just secured (secure_connection) takes
    the TLS client's role (SSCN ON): its handshake steps on read and write
    events from then on, as a server's; its first step (step_tls_handshake)
    sends the ClientHello."""
    channel.socket.set_connect_state()


def step_tls_handshake(channel) -> None:
    """Run the TLS handshake's next step now, as a read or write event
    would (a connection closed or past its handshake: nothing)."""
    if channel._ssl_accepting and not channel._closed:
        with channel._handle_ssl_want_rw():
            channel._do_ssl_handshake()


def tls_handshaking(channel) -> bool:
    """A pyftpdlib TLS connection's handshake was started and has not ended."""
    return bool(getattr(channel, "_ssl_accepting", False))


def stop_reading(channel) -> None:
    """The channel polls no events until a transfer command sets its own
    (DTPHandler.enable_receiving, push); the TLS mixin's end of a
    handshake or read step would restore read polling otherwise."""
    channel._wanted_io_events = 0
    channel.modify_ioloop_events(0)
