"""The stream-mode data channel of ``drsftp serve`` (docs/DESIGN.md,
"Server"), mixed into pyftpdlib's DTPHandler (or an embedder's own data
handler class: with_drs_data), and its PASV/PORT dispatchers.

- Every transfer is tuned whether or not the client speaks DRS: a
  SocketTuner starts when the direction is known (sender on RETR,
  receiver on STOR/APPE/STOU) and ticks on the ioloop's call_later,
  cancelled on close (docs/DESIGN.md#kf-pyftpdlib).
- Receiving is one recv_into per MiB written straight to the file.
- RFC 959 replies: 452 when storage is full, 451 for other local errors,
  451 when the file shrank under a RETR, 426 when the client closed the
  data connection first or reset it (connection_lost: its bytes may not
  all have come or gone); an upload whose client sent ABOR, then closed,
  ends as aborted (finalreply.run_waiting_abort); a queued transfer
  whose PASV/PORT connection fails or times out gets 425/421
  (ftp/stream/finalreply.py).
- The data socket's handshake is sized by the session (ftp/datatuning.py);
  a complete upload is renamed into place at close (ftp/stream/uploads.py).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
import sys

from pyftpdlib.handlers import DTPHandler
from pyftpdlib.handlers.ftp.dispatchers import ActiveDTP, PassiveDTP
from pyftpdlib.utils import is_ssl_sock

from ....io import sockopt
from ....io.tuner import SocketTuner
from ....tuning import Role
from .. import compat
from ..compat import FileReadWriteError as _FileReadWriteError
from ..thirdparty import foreign_checked
from .uploads import UploadPlacement

log = logging.getLogger("drsftp.server")

# A data connection that failed with one of these was reset or broken (RFC
# 9293 sec. 3.10.7.4: a RST): bytes the peer sent may never have come, bytes
# sent to it may never have arrived.
LOST_ERRNOS = frozenset((errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE, errno.ENOTCONN, errno.ESHUTDOWN,
                         errno.ETIMEDOUT))
RECV_CHUNK = 1 << 20  # one recv_into per MiB: no per-packet Python work
SEND_CHUNK = 4 << 20  # bytes per sendfile() call (per read of the file under TLS)
FIRST_TICK = 0.005  # s: the tunings' shortest tick (docs/decisions/0007-five-ms-ticks.md)


class DRSDataMixin(UploadPlacement):
    """Data channel that observes and tunes its socket every tick."""

    def __init__(self, sock, cmd_channel):
        self.tuner: SocketTuner | None = None
        self._tick_handle = None
        self._recv_buf = None
        self._expected_send: int | None = None
        self._send_end = 0
        self.data_peer = _peer_ip(sock)  # the client, or a third-party peer (ftp/thirdparty.py)
        super().__init__(sock, cmd_channel)
        if self.socket is not None:
            cmd_channel.after_handshake(self.socket)  # before any data (open start)

    # -- start tuning when the direction is known ---------------------------
    def push_with_producer(self, producer):
        self._start_tuning(Role.SENDER)
        try:  # what RETR should deliver, to catch a file shrinking under it
            f = producer.file
            self._send_end = os.fstat(f.fileno()).st_size
            self._expected_send = self._send_end - f.tell()
        except (AttributeError, OSError, ValueError):
            self._expected_send = None
        super().push_with_producer(producer)

    def enable_receiving(self, type, cmd):
        self._start_tuning(Role.RECEIVER)
        super().enable_receiving(type, cmd)

    def _start_tuning(self, role: Role) -> None:
        if self.tuner is not None or compat.closed(self):
            return
        server = self.cmd_channel
        self.tuner = SocketTuner(
            server.tuning_spec, role, allow_force=server.allow_force, limits=server.host_limits,
            budget=server.buffer_budget, batch_reads=not is_ssl_sock(self.socket),
        )
        server.note_data_path(self.tuner, self.data_peer)
        self.tuner.handshake_window = server.static_window  # a fixed buffer's, set before the handshake
        self.tuner.attach(self.socket)
        # the first tick one tick's time later: a small file is sent and closed before it
        self._tick_handle = self.ioloop.call_later(FIRST_TICK, self._tick, _errback=self.handle_error)

    def _tick(self) -> None:
        self._tick_handle = None
        if compat.closed(self) or self.tuner is None:
            return
        delay = self.tuner.tick(self.get_transmitted_bytes())
        if delay is not None:
            # The ioloop's call_later, cancelled on close (AsyncChat.call_later
            # would keep every callback until close: docs/DESIGN.md#kf-pyftpdlib).
            self._tick_handle = self.ioloop.call_later(delay, self._tick, _errback=self.handle_error)

    # -- data path -----------------------------------------------------------
    def handle_read(self):
        """recv_into one large buffer and write it straight to the file.
        ASCII, TLS and a class with a recv of its own (pyftpdlib's
        ThrottledDTPHandler counts what it reads there) take the stock path."""
        if not compat.transfer_attached(self) and not is_ssl_sock(self.socket):
            return self._read_before_transfer()
        if compat.converts_data(self) or is_ssl_sock(self.socket) or type(self).recv is not DTPHandler.recv:
            return super().handle_read()
        if self._recv_buf is None:
            self._recv_buf = bytearray(RECV_CHUNK)
        try:
            n = self.socket.recv_into(self._recv_buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            if err.errno in LOST_ERRNOS:
                self.connection_lost(err.errno)
            else:
                self.handle_error()
            return
        if n == 0:
            self.transfer_finished = True
            self.handle_close()
            return
        self.tot_bytes_received += n
        try:
            self.file_obj.write(memoryview(self._recv_buf)[:n])
        except OSError as err:
            raise _FileReadWriteError(err.errno, err.strerror) from err

    def readable(self):
        # pyftpdlib closes a data channel that is readable before its
        # transfer command, as if its peer had gone; _read_before_transfer
        # tells early data from a close instead
        if not compat.transfer_attached(self) and not compat.closed(self) and not is_ssl_sock(self.socket):
            return True
        return super().readable()

    def _read_before_transfer(self) -> None:
        """Bytes before the transfer command: a third-party source sends as
        soon as it is connected, and pyftpdlib connects at PORT, before the
        STOR (docs/PROTOCOL.md, "Third-party transfers").  They stay in the
        kernel for the STOR, unread, and the channel stops polling reads
        till then.  A connection its peer closed with nothing sent is
        closed (handle_close: no command to answer)."""
        pending = sockopt.peek_byte(self.socket)
        if pending is None:
            return
        if pending:
            self.modify_ioloop_events(0)  # enable_receiving polls again
        else:
            self.handle_close()

    def handle_error(self):
        """Write errors get RFC 959 codes: 452 when storage is full, 451
        for other local errors (pyftpdlib says 426 for both)."""
        err = sys.exc_info()[1]
        if isinstance(err, _FileReadWriteError):
            code = err.errno or getattr(err.__cause__, "errno", None)  # pyftpdlib's own wrap drops it
            if code in (errno.ENOSPC, errno.EDQUOT):
                reply = "452 Insufficient storage space; transfer aborted."
            else:
                reply = f"451 Local error: {os.strerror(code or errno.EIO)}; transfer aborted."
            compat.set_final_reply(self, reply, log.warning)
            self.transfer_finished = False
            self.close()
            return
        super().handle_error()


    def handle_close(self):
        if not compat.transfer_attached(self):  # an idle data connection the peer closed: no command to answer
            compat.set_final_reply(self, None)
            self.close()
            return
        if self.closed_by_loss():
            return
        if self.receive:
            # an ABOR the client sent before this close runs first: aborted (426, 226), not complete
            self.transfer_finished = False
            if self.cmd_channel.run_waiting_abort() and compat.closed(self):
                return
        super().handle_close()

    # -- a reset or broken connection ends the transfer as aborted -----------
    def lost_errno(self) -> int | None:
        """The errno of a reset or broken data connection behind this close,
        or None: the error being handled (pyftpdlib calls handle_close from
        its except clauses for a reset, as for an end), or, sending, the
        socket's pending error (the poller reports a reset as a hang-up to a
        channel that only waits to write).  A receiver's end of file is an
        end, whatever follows it: every byte before the FIN came."""
        exc = sys.exc_info()[1]
        code = exc.errno if isinstance(exc, OSError) else None
        if code is None and exc is None and not self.receive:
            try:
                code = self.socket.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            except (AttributeError, OSError):
                code = None
        return code if code in LOST_ERRNOS else None

    def closed_by_loss(self) -> bool:
        """Close as aborted if the connection was lost (lost_errno)."""
        code = self.lost_errno()
        if code is None or not compat.transfer_attached(self):
            return False
        self.connection_lost(code)
        return True

    def connection_lost(self, code: int) -> None:
        """The data connection was reset or broken mid-transfer: 426 (RFC 959
        sec. 4.2: connection closed, transfer aborted), never 226, whatever
        had been counted; an upload stays under its temporary name."""
        if compat.closed(self):
            return
        self.transfer_finished = False
        compat.set_final_reply(self, f"426 Connection lost ({os.strerror(code)}); transfer aborted after"
                                     f" {self.get_transmitted_bytes()} bytes.", log.info)
        self.close()

    def _short_send_reply(self) -> tuple:
        """RETR ended before the bytes it owes: the file shrank under it
        (451) or the client closed the data connection first (426, RFC 959
        4.2); pyftpdlib says 226 when the close comes inside sendfile."""
        try:
            shrank = os.fstat(self.file_obj.fileno()).st_size < self._send_end
        except (AttributeError, OSError, ValueError):
            shrank = False
        if shrank:
            return ("451 The file shrank during the transfer; transfer aborted.", log.warning)
        return (f"426 Connection closed; transfer aborted after {self.tot_bytes_sent} bytes.", log.info)

    def close(self):
        if compat.closed(self):
            return super().close()
        if (not self.receive and self.transfer_finished and self._expected_send is not None
                and self.tot_bytes_sent < self._expected_send
                and (compat.final_reply(self) or "").startswith("226")):
            self.transfer_finished = False
            compat.set_final_reply(self, *self._short_send_reply())
        self._finish_upload()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self.tuner is not None and not compat.closed(self):
            self.cmd_channel.last_transfer = self.tuner.summary()
            drain = self.tuner.close()  # before the socket closes: it reads the queue
            if drain:  # the kernel still sends what was queued: held in the budget till then
                self.ioloop.call_later(drain, self.tuner.release)
        super().close()


@functools.cache
def with_drs_data(dtp_class: type) -> type:
    """``dtp_class`` with the DRS data path (tuning, uploads renamed into
    place, RFC 959 error codes): an embedder's own data handler class,
    e.g. pyftpdlib's ThrottledDTPHandler, gets it mixed in."""
    if issubclass(dtp_class, DRSDataMixin):
        return dtp_class
    return type(dtp_class.__name__, (DRSDataMixin, dtp_class), {})


def _peer_ip(sock) -> str | None:
    try:
        return sock.getpeername()[0]
    except (AttributeError, OSError):
        return None


class DRSPassiveDTP(PassiveDTP):
    """PASV/EPSV in stream mode: the listener binds --data-interface, and
    takes a connection from a listed third-party peer (ftp/thirdparty.py)."""

    def create_socket(self, family, type):
        di = self.cmd_channel.data_interface
        super().create_socket(socket.AF_INET6 if di and ":" in di else socket.AF_INET if di else family, type)

    def bind(self, addr):
        di = self.cmd_channel.data_interface
        super().bind((di, addr[1]) if di else addr)

    def listen(self, num):
        self.cmd_channel.before_handshake(self.socket, None)  # fixes the window scale; its peer comes later
        super().listen(num)

    def close(self):
        # no connection came (or it did: then this is a no-op)
        self.cmd_channel.release_handshake_reservation()
        super().close()

    def handle_accepted(self, sock, addr):
        ch = self.cmd_channel
        if ch.connected and ch.foreign_data_peer(addr[0]):
            if ch.refused_foreign_accept(addr[0], addr[1]):
                sock.close()  # dropped; the listener waits on for the client's (or a listed) peer
                return
            with foreign_checked(ch):
                super().handle_accepted(sock, addr)
        else:
            super().handle_accepted(sock, addr)
        if compat.closed(self) and self.cmd_channel.data_channel is None:  # reset before it was accepted
            self.cmd_channel.fail_queued_transfer("425 Can't open data connection: it closed at once.")

    def handle_timeout(self):
        # 421 only answers a transfer command waiting for this connection;
        # with none waiting it would be read as the reply to the next command.
        self.close()
        self.cmd_channel.fail_queued_transfer("421 Passive data channel timed out.")


class DRSActiveDTP(ActiveDTP):
    """PORT/EPRT in stream mode: the connection leaves from --data-interface."""

    _target: str | None = None

    def connect_af_unspecified(self, addr, source_address=None):
        self._target = addr[0]
        di = self.cmd_channel.data_interface
        return super().connect_af_unspecified(addr, (di, 0) if di else source_address)

    def create_socket(self, family, type):
        super().create_socket(family, type)
        self.cmd_channel.before_handshake(self.socket, self._target)

    def handle_connect(self):
        super().handle_connect()  # PORT's 200; the socket is the data channel's from here
        self.cmd_channel.port_settled()

    def handle_write(self):
        """Nothing: asyncore calls it right after handle_connect, when the
        socket already belongs to the data channel, and pyftpdlib's would
        set the socket's poll events to read only (AsyncChat.initiate_send
        with nothing queued), over the data channel's: a RETR that started
        in handle_connect then stalled after its first sendfile."""

    def handle_close(self):  # connect failed: PORT got its 425; a queued transfer gets one too
        super().handle_close()
        self.cmd_channel.fail_queued_transfer("425 Can't open data connection.")
        self.cmd_channel.port_settled()

    def handle_timeout(self):
        super().handle_timeout()
        self.cmd_channel.fail_queued_transfer("425 Can't open data connection: timed out.")
        self.cmd_channel.port_settled()

