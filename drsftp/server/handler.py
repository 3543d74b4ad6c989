"""pyftpdlib handlers that run DRS on every data connection.

- Every transfer is tuned at the server whether or not the client speaks
  DRS: sender on RETR, receiver on STOR/APPE/STOU.
- The DRS command exchanges measurements (docs/PROTOCOL.md).
- A running transfer is guarded: stock pyftpdlib runs PASV/EPSV/PORT/EPRT
  or a second RETR mid-transfer and silently closes or corrupts the running
  data channel (facts doc, pyftpdlib hazards), so those get 503.
"""

from __future__ import annotations

import logging

from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.handlers.ftp.dispatchers import ActiveDTP, PassiveDTP
from pyftpdlib.handlers.ftp.control import proto_cmds as _stock_cmds

from .. import sockopt
from ..ftp import drscmd
from ..tuner import SocketTuner
from ..tuning import Role

log = logging.getLogger("drsftp.server")

# Commands refused while a transfer runs (they would close or splice it).
GUARDED = frozenset({
    "PASV", "EPSV", "PORT", "EPRT", "RETR", "STOR", "APPE", "STOU",
    "LIST", "NLST", "MLSD", "REST", "TYPE", "MODE", "STRU", "REIN",
})

DRS_CMDS = dict(_stock_cmds)  # a copy: pyftpdlib's dict is shared module-wide
DRS_CMDS["DRS"] = dict(
    perm=None,
    auth=True,
    arg=None,
    help="Syntax: DRS [<SP> key=value ...] (exchange right-sizing measurements).",
)

RECV_CHUNK = 1 << 20  # one recv_into per MiB: no per-packet Python work


class DRSDTPHandler(DTPHandler):
    """Data channel that observes and tunes its socket every tick."""

    ac_out_buffer_size = 4 << 20  # bytes per sendfile() call

    def __init__(self, sock, cmd_channel):
        self.tuner: SocketTuner | None = None
        self._tick_handle = None
        self._recv_buf = None
        super().__init__(sock, cmd_channel)

    # -- start tuning when the direction is known ---------------------------
    def push_with_producer(self, producer):
        self._start_tuning(Role.SENDER)
        super().push_with_producer(producer)

    def enable_receiving(self, type, cmd):
        self._start_tuning(Role.RECEIVER)
        super().enable_receiving(type, cmd)

    def _start_tuning(self, role: Role) -> None:
        if self.tuner is not None or self._closed:
            return
        server = self.cmd_channel
        self.tuner = SocketTuner(
            server.tuning_spec, role, allow_force=server.allow_force, limits=server.host_limits
        )
        self.tuner.attach(self.socket)
        self._tick()

    def _tick(self) -> None:
        self._tick_handle = None
        if self._closed or self.tuner is None:
            return
        delay = self.tuner.tick(self.get_transmitted_bytes())
        if delay is not None:
            # The ioloop's call_later, cancelled on close (AsyncChat.call_later
            # would keep every callback until close: facts doc).
            self._tick_handle = self.ioloop.call_later(delay, self._tick, _errback=self.handle_error)

    # -- data path -----------------------------------------------------------
    def handle_read(self):
        """recv_into one large buffer and write it straight to the file."""
        if self._data_wrapper is not None:  # ASCII mode: stock path
            return super().handle_read()
        if self._recv_buf is None:
            self._recv_buf = bytearray(RECV_CHUNK)
        try:
            n = self.socket.recv_into(self._recv_buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
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
            from pyftpdlib.handlers.ftp.data import _FileReadWriteError

            raise _FileReadWriteError(err) from err

    handle_read_event = handle_read

    def close(self):
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self.tuner is not None and not self._closed:
            self.cmd_channel.last_transfer = self.tuner.summary()
        super().close()


class DRSPassiveDTP(PassiveDTP):
    def listen(self, num):
        self.cmd_channel.before_handshake(self.socket)  # fixes the window scale
        super().listen(num)


class DRSActiveDTP(ActiveDTP):
    def create_socket(self, family, type):
        super().create_socket(family, type)
        self.cmd_channel.before_handshake(self.socket)


class DRSFTPHandler(FTPHandler):
    proto_cmds = DRS_CMDS
    dtp_handler = DRSDTPHandler
    passive_dtp = DRSPassiveDTP
    active_dtp = DRSActiveDTP
    banner = "drsftp ready (DRS: dynamic right-sizing available, see FEAT)."

    # set by the server factory
    tuning_spec = "drs"
    allow_force = False
    host_limits: sockopt.HostLimits | None = None

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self._extra_feats = list(self._extra_feats) + ["DRS"]
        self.last_transfer: dict | None = None

    def before_handshake(self, sock) -> None:
        SocketTuner(
            self.tuning_spec, Role.RECEIVER, allow_force=self.allow_force, limits=self.host_limits
        ).before_handshake(sock)

    # -- transfer guard ------------------------------------------------------
    def transfer_running(self) -> bool:
        dc = self.data_channel
        return (
            (dc is not None and dc._initialized and not dc._closed)
            or self._out_dtp_queue is not None
            or self._in_dtp_queue is not None
        )

    def pre_process_command(self, line, cmd, arg):
        if cmd in GUARDED and self.authenticated and self.transfer_running():
            msg = f"Bad sequence of commands: a transfer is running; {cmd} refused (ABOR first)."
            self.respond("503 " + msg)
            self.log_cmd(cmd, arg, 503, msg)
            return
        super().pre_process_command(line, cmd, arg)

    # -- DRS command -----------------------------------------------------------
    def ftp_DRS(self, line):
        try:
            pairs = drscmd.parse_args(line or "")
        except drscmd.DRSArgumentError as exc:
            self.respond(f"501 DRS {exc}.")
            return
        dc = self.data_channel
        tuner = getattr(dc, "tuner", None) if dc is not None else None
        if tuner is None:
            self.respond("425 DRS no transfer running; nothing to tune.")
            return
        tuner.on_peer_pairs(pairs)
        self.respond("200 DRS " + (tuner.report_pairs() or "role=0"))
