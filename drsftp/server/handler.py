"""pyftpdlib handlers that run DRS on every data connection.

- Every transfer is tuned at the server whether or not the client speaks
  DRS: sender on RETR, receiver on STOR/APPE/STOU.
- The DRS command exchanges measurements (docs/PROTOCOL.md).
- A running transfer is guarded: stock pyftpdlib runs PASV/EPSV/PORT/EPRT
  or a second RETR mid-transfer and silently closes or corrupts the running
  data channel (docs/DESIGN.md#kf-pyftpdlib), so those get 503
  (docs/DESIGN.md#transfer-guard).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.handlers.ftp.dispatchers import ActiveDTP, PassiveDTP
from pyftpdlib.utils import is_ssl_sock

from .. import sockopt
from ..ftp import drscmd
from ..tuner import SocketTuner
from ..tuning import Role
from ..tuning.budget import BufferBudget
from . import compat, partfile
from .compat import STOCK_COMMANDS as _stock_cmds
from .compat import FileReadWriteError as _FileReadWriteError
from .ecommands import EModeCommands, with_eblock_commands
from .facts import MlsxFacts
from .translog import TransferLogMixin

log = logging.getLogger("drsftp.server")

# Commands refused while a transfer runs (they would close or splice it).
GUARDED = frozenset({
    "PASV", "EPSV", "PORT", "EPRT", "RETR", "STOR", "APPE", "STOU",
    "LIST", "NLST", "MLSD", "REST", "TYPE", "MODE", "STRU", "REIN",
})

# Commands that move data over the data connection (RFC 959 4.1.3).
TRANSFER_CMDS = frozenset({"RETR", "STOR", "APPE", "STOU", "LIST", "NLST", "MLSD"})

DRS_CMDS = with_eblock_commands(_stock_cmds)  # a copy: pyftpdlib's dict is shared module-wide
DRS_CMDS["HASH"] = dict(
    perm="r", auth=True, arg=True,
    help="Syntax: HASH <SP> file-name (cryptographic hash of a file, draft-bryan-ftpext-hash).",
)
HASH_ALGORITHMS = {"SHA-256": "sha256", "SHA-512": "sha512", "SHA-1": "sha1", "MD5": "md5"}
_hash_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drsftp-hash")
DRS_CMDS["DRS"] = {
    "perm": None,
    "auth": True,
    "arg": None,
    "help": "Syntax: DRS [<SP> key=value ...] (exchange right-sizing measurements).",
}

RECV_CHUNK = 1 << 20  # one recv_into per MiB: no per-packet Python work


class DRSDataMixin:
    """Data channel that observes and tunes its socket every tick."""

    file_obj: Any  # the transfer's file (pyftpdlib's DTPHandler sets it)

    def __init__(self, sock, cmd_channel):
        self.tuner: SocketTuner | None = None
        self._tick_handle = None
        self._recv_buf = None
        self._expected_send: int | None = None
        self._send_end = 0
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
        if self.tuner is not None or self._closed:
            return
        server = self.cmd_channel
        self.tuner = SocketTuner(
            server.tuning_spec, role, allow_force=server.allow_force, limits=server.host_limits,
            budget=server.buffer_budget, batch_reads=not is_ssl_sock(self.socket),
        )
        self.tuner.note_control_rtt(server.socket)
        self.tuner.handshake_window = server.static_window  # a fixed buffer's, set before the handshake
        self.tuner.attach(self.socket)
        self._tick()

    def _tick(self) -> None:
        self._tick_handle = None
        if self._closed or self.tuner is None:
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
        if self._data_wrapper is not None or is_ssl_sock(self.socket) or type(self).recv is not DTPHandler.recv:
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
            raise _FileReadWriteError(err.errno, err.strerror) from err

    def handle_error(self):
        """Write errors get RFC 959 codes: 452 when storage is full, 451
        for other local errors (pyftpdlib says 426 for both)."""
        err = sys.exc_info()[1]
        if isinstance(err, _FileReadWriteError):
            code = err.errno or getattr(err.__cause__, "errno", None)  # pyftpdlib's own wrap drops it
            if code in (errno.ENOSPC, errno.EDQUOT):
                self._resp = ("452 Insufficient storage space; transfer aborted.", log.warning)
            else:
                self._resp = (f"451 Local error: {os.strerror(code or errno.EIO)}; transfer aborted.", log.warning)
            self.transfer_finished = False
            self.close()
            return
        super().handle_error()

    def _finish_upload(self) -> None:
        """A complete upload is renamed into place before the 226 is sent;
        an incomplete one stays under its temporary name (resumable), unless
        it wrote nothing to a part file of its own (nothing to resume)."""
        target = self.cmd_channel._upload_targets.pop(getattr(self.file_obj, "name", None), None)
        if target is None or not self.receive:
            return
        final, expected, fresh = target
        if not self.transfer_finished or not self._resp or not self._resp[0].startswith("226"):
            if fresh:
                with contextlib.suppress(OSError, ValueError):
                    self.file_obj.flush()  # what it holds counts as written
                partfile.discard_if_empty(self.file_obj.name)
            return
        try:
            self.file_obj.close()
            size = os.path.getsize(self.file_obj.name)
            if expected is not None and size != expected:
                # Stream mode ends a file by closing the connection (RFC 959
                # 3.4.1), so a client that died looks done: the size it
                # announced with ALLO tells the difference.
                self.transfer_finished = False
                kept = "" if fresh and partfile.discard_if_empty(self.file_obj.name) else "; kept for REST to resume"
                self._resp = (f"451 Upload incomplete: {size} of {expected} bytes{kept}.", log.warning)
                return
            os.replace(self.file_obj.name, final)
            self.file_obj = _MovedUpload(final)  # pyftpdlib reports this name to log_transfer, on_file_received
        except OSError as exc:
            self.transfer_finished = False
            self._resp = (f"451 Cannot move the upload into place: {exc.strerror}.", log.warning)

    def handle_close(self):
        if not self._initialized:  # an idle data connection the peer closed: no command to answer
            self._resp = ()
            self.close()
            return
        super().handle_close()

    def _short_send_reply(self) -> tuple | None:
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
        if self._closed:
            return super().close()
        if (not self.receive and self.transfer_finished and self._expected_send is not None
                and self.tot_bytes_sent < self._expected_send and self._resp[:1]
                and self._resp[0].startswith("226")):
            self.transfer_finished = False
            self._resp = self._short_send_reply()
        self._finish_upload()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self.tuner is not None and not self._closed:
            self.cmd_channel.last_transfer = self.tuner.summary()
            drain = self.tuner.close()  # before the socket closes: it reads the queue
            if drain:  # the kernel still sends what was queued: held in the budget till then
                self.ioloop.call_later(drain, self.tuner.release)
        super().close()


class _MovedUpload:
    """A complete upload's file, closed and renamed into place: what
    pyftpdlib's DTPHandler.close reads of it (``closed``, ``name``)."""

    closed = True

    def __init__(self, name: str) -> None:
        self.name = name

    def close(self) -> None:
        pass


@functools.cache
def with_drs_data(dtp_class: type) -> type:
    """``dtp_class`` with the DRS data path (tuning, uploads renamed into
    place, RFC 959 error codes): an embedder's own data handler class,
    e.g. pyftpdlib's ThrottledDTPHandler, gets it mixed in."""
    if issubclass(dtp_class, DRSDataMixin):
        return dtp_class
    return type(dtp_class.__name__, (DRSDataMixin, dtp_class), {})


class DRSPassiveDTP(PassiveDTP):
    def listen(self, num):
        self.cmd_channel.before_handshake(self.socket)  # fixes the window scale
        super().listen(num)

    def close(self):
        # no connection came (or it did: then this is a no-op)
        self.cmd_channel.release_handshake_reservation()
        super().close()

    def handle_accepted(self, sock, addr):
        super().handle_accepted(sock, addr)
        if self._closed and self.cmd_channel.data_channel is None:  # reset before it was accepted
            self.cmd_channel.fail_queued_transfer("425 Can't open data connection: it closed at once.")

    def handle_timeout(self):
        # 421 only answers a transfer command waiting for this connection;
        # with none waiting it would be read as the reply to the next command.
        self.close()
        self.cmd_channel.fail_queued_transfer("421 Passive data channel timed out.")


class DRSActiveDTP(ActiveDTP):
    def create_socket(self, family, type):
        super().create_socket(family, type)
        self.cmd_channel.before_handshake(self.socket)

    def handle_close(self):  # connect failed: PORT got its 425; a queued transfer gets one too
        super().handle_close()
        self.cmd_channel.fail_queued_transfer("425 Can't open data connection.")

    def handle_timeout(self):
        super().handle_timeout()
        self.cmd_channel.fail_queued_transfer("425 Can't open data connection: timed out.")


class DRSControlMixin:
    """The control connection: DRS, HASH, the transfer guard, uploads under
    a temporary name, shutdown.  Mixed into FTPHandler and TLS_FTPHandler."""

    passive_dtp = DRSPassiveDTP
    active_dtp = DRSActiveDTP
    banner = "drsftp ready (DRS: dynamic right-sizing available, see FEAT)."

    # set by the server factory
    tuning_spec = "drs"
    allow_force = False
    host_limits: sockopt.HostLimits | None = None
    buffer_budget: BufferBudget | None = None  # shared by all transfers of one server
    drs_rate = 20.0  # DRS commands per second and connection (token bucket)
    shutting_down = False  # set on SIGTERM: no new transfers
    _without_data_path = False  # a transfer command runs with no data connection open or coming

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self.dtp_handler = with_drs_data(type(self).dtp_handler)  # the class pyftpdlib's DTP dispatchers build
        compat.extra_features(self).append("DRS")
        self.last_transfer: dict | None = None
        self._drs_tokens = self.drs_rate
        self._drs_refill = time.monotonic()
        self._hash_algo = "SHA-256"
        self._hash_job = None
        # temporary path -> (final path, expected size, part file started afresh)
        self._upload_targets: dict[str, tuple[str, int | None, bool]] = {}
        self._quit_received = False  # QUIT ends the session: later commands are not run (RFC 959 4.1.1)
        self._allo: int | None = None  # size announced by ALLO for the next STOR
        self._handshake_tuner: SocketTuner | None = None  # sized the data socket's handshake
        self.static_window: int | None = None  # ... with a fixed buffer, no decision after it

    # One data connection per session at a time: the session keys the
    # handshake buffer's reservation in the budget (DRS open start), and the
    # tuner that sized the handshake also locks the buffer after it, so both
    # halves act on the one decision (a second reading of the control RTT
    # could fall on the other side of the open start's threshold).
    def before_handshake(self, sock) -> None:
        # The direction is not known before RETR/STOR: size as a receiver;
        # a sender's first tick shrinks the ACK direction.
        tuner = SocketTuner(self.tuning_spec, Role.RECEIVER, allow_force=self.allow_force, limits=self.host_limits,
                            budget=self.buffer_budget)
        tuner.note_control_rtt(self.socket)
        tuner.before_handshake(sock, reserve_as=self)
        self._handshake_tuner = tuner

    def after_handshake(self, sock) -> None:
        tuner, self._handshake_tuner = self._handshake_tuner, None
        self.static_window = None
        if tuner is not None:
            tuner.after_handshake(sock, reserved_as=self)
            self.static_window = tuner.static_window  # for the data channel's own tuner

    def release_handshake_reservation(self) -> None:
        # (pyftpdlib closes the listener before it builds the DTP, so this
        # comes before after_handshake: the tuner stays for it)
        if self.buffer_budget is not None:
            self.buffer_budget.release(self)

    # -- over-long lines ---------------------------------------------------------
    MAX_LINE = 2048

    def collect_incoming_data(self, data):
        """pyftpdlib answers 500 to a line over 2048 bytes but then keeps
        collecting, so the line's tail ran as a command of its own (reply
        desync; command smuggling).  Discard up to the line's end instead."""
        if getattr(self, "_discarding", False) or self._quit_received:
            return
        if compat.line_buffer_add(self, data) > self.MAX_LINE:
            self.respond_w_warning("500 Command too long.")
            compat.line_buffer_clear(self)
            self._discarding = True

    def found_terminator(self):
        if self._quit_received:  # lines sent after QUIT (pipelined with it): the session is over
            compat.line_buffer_clear(self)
            return
        if getattr(self, "_discarding", False):
            self._discarding = False
            compat.line_buffer_clear(self)
            return
        super().found_terminator()

    # -- transfer guard ------------------------------------------------------
    def transfer_running(self) -> bool:
        dc = self.data_channel
        return (dc is not None and compat.data_channel_open(dc)) or compat.pending_transfer(self)

    def pre_process_command(self, line, cmd, arg):
        if self._quit_received:  # a command held (MODE E) behind the QUIT that ended the session
            return
        if self._hash_job is not None and cmd not in ("ABOR", "QUIT", "NOOP", "STAT", "DRS"):
            self.respond("503 Bad sequence of commands: HASH is still being computed.")
            return
        if self.shutting_down and cmd in GUARDED and not self.transfer_running():
            self.respond("421 Server shutting down; try again later.")
            self.close_when_done()
            return
        if cmd in GUARDED and self.authenticated and self.transfer_running():
            msg = f"Bad sequence of commands: a transfer is running; {cmd} refused (ABOR first)."
            self.respond("503 " + msg)
            self.log_cmd(cmd, arg, 503, msg)
            return
        if not self.authenticated and self._needs_login(cmd, arg):
            # before the argument's syntax (pyftpdlib answers a bare one 501):
            # a client not logged in learns only that it must log in
            msg = "Log in with USER and PASS first."
            self.respond("530 " + msg)
            self.log_cmd(cmd, arg, 530, msg)
            return
        if arg and "\x00" in arg:
            # pyftpdlib passes it to os.path.realpath, whose ValueError
            # closed the session and any transfer in it (the fuzzer found it)
            self.respond("501 Syntax error in parameters or arguments: NUL byte.")
            return
        super().pre_process_command(line, cmd, arg)

    def _needs_login(self, cmd, arg) -> bool:
        """The command is one pyftpdlib answers 530 before login (STAT with
        a path is LIST; SITE's sub-commands have entries of their own)."""
        if cmd == "SITE" and arg:
            cmd = f"SITE {arg.split(' ')[0].upper()}"
        entry = self.proto_cmds.get(cmd)
        return entry is not None and bool(entry["auth"] or (cmd == "STAT" and arg))

    def abort_for_shutdown(self) -> None:
        """End the running transfer with 426 (RFC 959), then the session."""
        dc = self.data_channel
        if dc is not None:
            compat.set_final_reply(dc, None)  # no 226/426 of its own: we say why
            dc.close()
        compat.clear_pending_transfer(self)
        self.respond("426 Transfer aborted: server shutting down.")
        self.respond("421 Server shutting down.")
        self.close_when_done()

    # -- one final reply per transfer command (RFC 959 4.2, 5.4) ------------------
    def data_path_open(self) -> bool:
        """A data connection is open or being made: PASV listening, PORT
        connecting.  (pyftpdlib keeps a PORT's connector after it connected
        and a timed-out listener after it closed.)"""
        acc, con = self._dtp_acceptor, self._dtp_connector
        return (self.data_channel is not None or (acc is not None and not acc._closed)
                or (con is not None and not con._closed and not con.connected))

    def fail_queued_transfer(self, reply: str) -> bool:
        """A transfer command answered 150 whose data connection will not
        come gets ``reply`` as its final reply; True if one was waiting."""
        out, inq = self._out_dtp_queue, self._in_dtp_queue
        if out is None and inq is None:
            return False
        compat.clear_pending_transfer(self)
        f, cmd = (out[2], out[3]) if out is not None else inq
        if f is not None:
            self.log_transfer(cmd, f.name, out is None, False, 0.0, 0)  # a failed transfer has its line too
            self._drop_upload(f)
        self.respond(reply)
        return True

    def _drop_upload(self, f) -> None:
        """Close the file of a transfer that never started; an upload's part
        file it made is removed (nothing was written)."""
        target = self._upload_targets.pop(getattr(f, "name", ""), None)
        f.close()
        if target is not None and target[2]:
            partfile.discard_if_empty(f.name)

    def close(self):
        if not self._closed:  # a STOR still waiting for its data connection
            f = compat.queued_upload(self)
            if f is not None:
                self._drop_upload(f)
        super().close()

    def ftp_QUIT(self, line):
        self._quit_received = True
        super().ftp_QUIT(line)

    NO_DATA_PATH = "425 Can't open data connection: none is open (PASV/EPSV/PORT/EPRT first)."

    def process_command(self, cmd, *args, **kwargs):
        """Without a data connection open or being made, a transfer command
        would answer 150 and wait forever (the client closed its data
        connection, or never opened one): 425 is its final reply.  The
        command's own checks answer first (RFC 959 4.2: the reply that says
        what is wrong: 550 no such file, 554 REST past the end, 450 REST
        before STOU/APPE or no unique name); the 425 takes the 150's place."""
        if cmd not in TRANSFER_CMDS or not self.authenticated or self.data_path_open():
            super().process_command(cmd, *args, **kwargs)
            return
        self._without_data_path = True
        try:
            super().process_command(cmd, *args, **kwargs)
        finally:
            self._without_data_path = False
        if self._last_response == self.NO_DATA_PATH:
            compat.restart_position(self, 0)  # REST applies to this command only
            f = compat.queued_file(self)
            compat.clear_pending_transfer(self)
            if f is not None:
                self._drop_upload(f)
                if cmd == "STOU":  # the empty file it made for its unique name
                    partfile.discard_if_empty(f.name)

    def respond(self, resp, *args, **kwargs):
        if self._without_data_path and resp.startswith("150 "):
            resp = self.NO_DATA_PATH  # no 150: nothing to wait for
        super().respond(resp, *args, **kwargs)

    def ftp_ABOR(self, line):
        """RFC 959 4.1.3: a transfer command still without its final reply
        gets 426, then ABOR gets 226; otherwise ABOR gets 225.  (pyftpdlib
        sends a lone 225 for a transfer that has moved no byte yet, which
        left that command without a reply.)"""
        dc = self.data_channel
        pending = self._out_dtp_queue is not None or self._in_dtp_queue is not None
        had_path = self.data_path_open()
        self._shutdown_connecting_dtp()
        if dc is not None:
            pending = pending or (dc._initialized and not dc._closed)
            dc._resp = ()  # its reply is the 426 below
            dc.close()
            self.data_channel = None
        if pending:
            if not self.fail_queued_transfer("426 Transfer aborted via ABOR."):
                self.respond("426 Transfer aborted via ABOR.", logfun=log.info)
            self.respond("226 ABOR command successful.")
        elif had_path:
            self.respond("225 ABOR command successful; data channel closed.")
        else:
            self.respond("225 No transfer to abort.")

    # -- uploads under a temporary name ----------------------------------------
    def ftp_STOR(self, file, mode="w"):
        """STOR writes ``.NAME.part`` and renames it when complete, so an
        interrupted upload never looks complete; REST + STOR continues the
        temporary file.  APPE appends to the file itself (mode 'a')."""
        if "a" in mode:
            return None if self._refused_before_open(file) else super().ftp_STOR(file, mode)
        expected, self._allo = self._allo, None
        if os.path.isdir(file):
            compat.restart_position(self, 0)
            self.respond(partfile.OVER_DIRECTORY)
            return None
        temp = partfile.part_path(file)
        fresh = not compat.restart_position(self)  # REST continues a part file; STOR alone starts it anew
        if fresh and self._refused_before_open(temp):
            return None
        if not fresh and not os.path.exists(temp) and os.path.isfile(file):
            temp = file  # resuming a file some other way: continue it in place
        result = super().ftp_STOR(temp, mode)
        if result is not None and temp != file:
            self._upload_targets[temp] = (file, expected, fresh)
        return result

    def _refused_before_open(self, path) -> bool:
        """A STOR without REST truncates its part file and APPE may create
        its file: with no data connection to come, 425 before either
        (only opening's own 550, the directory missing, comes first)."""
        if not self._without_data_path or not os.path.isdir(os.path.dirname(path)):
            return False
        self.respond(self.NO_DATA_PATH)
        return True

    def ftp_ALLO(self, line):
        """RFC 959 ALLO: drsftp takes the size as the upload's expected
        length, so a connection that closes early is not a complete file."""
        try:
            size = int(line.split()[0])
            if size < 0:
                raise ValueError
        except (ValueError, IndexError):
            self.respond("501 ALLO wants a size in bytes.")
            return
        self._allo = size
        self.respond(f"200 ALLO {size} bytes: the upload must be that long.")

    # -- FEAT / OPTS / HASH (draft-bryan-ftpext-hash) ----------------------------
    def ftp_FEAT(self, line):
        algos = ";".join(a + ("*" if a == self._hash_algo else "") for a in HASH_ALGORITHMS)
        feats = compat.extra_features(self)
        feats[:] = [f for f in feats if not f.startswith("HASH ")] + [f"HASH {algos}"]
        super().ftp_FEAT(line)

    def ftp_OPTS(self, line):
        cmd, _, arg = line.partition(" ")
        if cmd.upper() != "HASH":
            return super().ftp_OPTS(line)
        if not arg:
            self.respond(f"200 {self._hash_algo}")
        elif arg.strip().upper() in HASH_ALGORITHMS:
            self._hash_algo = arg.strip().upper()
            self.respond(f"200 {self._hash_algo}")
        else:
            self.respond("501 Unknown hash algorithm.")

    def ftp_HASH(self, path):
        if not self.fs.isfile(path):
            self.respond("550 Not a regular file.")
            return
        algo, name = self._hash_algo, self.fs.fs2ftp(path)

        def compute():
            h = hashlib.new(HASH_ALGORITHMS[algo])
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
                size = f.tell()
            return size, h.hexdigest()

        # Hash in a thread; the ioloop polls for the result and stays free.
        self._hash_job = _hash_pool.submit(compute)
        self._poll_hash(algo, name)

    def _poll_hash(self, algo, name):
        job = self._hash_job
        if job is None or self._closed:
            return
        if not job.done():
            self.ioloop.call_later(0.02, self._poll_hash, algo, name, _errback=self.handle_error)
            return
        self._hash_job = None
        try:
            size, digest = job.result()
        except OSError as exc:
            self.respond(f"550 Cannot hash: {exc.strerror}.")
        else:
            self.respond(f"213 {algo} 0-{max(size - 1, 0)} {digest} {name}")
        self.hash_done()

    def hash_done(self) -> None:
        """HASH's reply is out (MODE E: the commands that waited behind it go on)."""

    # -- DRS command -----------------------------------------------------------
    def _drs_allowed(self) -> bool:
        now = time.monotonic()
        self._drs_tokens = min(self.drs_rate, self._drs_tokens + (now - self._drs_refill) * self.drs_rate)
        self._drs_refill = now
        if self._drs_tokens < 1:
            return False
        self._drs_tokens -= 1
        return True

    def ftp_DRS(self, line):
        if not self._drs_allowed():
            self.respond(f"503 DRS rate limit: at most {self.drs_rate:g} per second; ignored.")
            return
        try:
            pairs = drscmd.parse_args(line or "")
        except drscmd.DRSArgumentError as exc:
            self.respond(f"501 DRS {exc}.")
            return
        self.drs_reply(pairs)

    def drs_reply(self, pairs: dict[str, int]) -> None:
        """A valid DRS command's effect and reply (stream mode: the data
        channel's tuner; docs/PROTOCOL.md)."""
        dc = self.data_channel
        tuner = getattr(dc, "tuner", None) if dc is not None else None
        if tuner is None:
            self.respond("425 DRS no transfer running; nothing to tune.")
            return
        tuner.on_peer_pairs(pairs)
        self.respond("200 DRS " + (tuner.report_pairs() or "role=0"))


def _commands(base: dict) -> dict:
    cmds = dict(base)  # a copy: pyftpdlib's dicts are shared module-wide
    cmds.update({k: DRS_CMDS[k] for k in ("DRS", "HASH")})
    return with_eblock_commands(cmds)


SEND_CHUNK = 4 << 20  # bytes per sendfile() call (per read of the file under TLS)


class DRSDTPHandler(DRSDataMixin, DTPHandler):
    ac_out_buffer_size = SEND_CHUNK
    handle_read_event = DRSDataMixin.handle_read  # plain sockets: skip a dispatch layer


class DRSFTPHandler(TransferLogMixin, MlsxFacts, EModeCommands, DRSControlMixin, FTPHandler):
    proto_cmds = DRS_CMDS
    dtp_handler = DRSDTPHandler


def tls_handler_class():
    """FTPS (RFC 4217: AUTH TLS, PBSZ, PROT P) classes; needs pyOpenSSL."""
    from pyftpdlib.handlers import TLS_DTPHandler, TLS_FTPHandler

    from .tlsdata import TLSDataReplies

    class DRSTLSDTPHandler(TLSDataReplies, DRSDataMixin, TLS_DTPHandler):
        ac_out_buffer_size = SEND_CHUNK

    class DRSTLSFTPHandler(TransferLogMixin, MlsxFacts, EModeCommands, DRSControlMixin, TLS_FTPHandler):
        proto_cmds = _commands(TLS_FTPHandler.proto_cmds)
        dtp_handler = DRSTLSDTPHandler

    return DRSTLSFTPHandler
