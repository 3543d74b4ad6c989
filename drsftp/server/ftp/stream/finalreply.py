"""One final reply per transfer command in stream mode (RFC 959 4.2, 5.4;
docs/DESIGN.md#final-reply), whatever the client does with its data
connection:

- with no data connection open or coming, RETR/STOR/APPE/STOU/LIST/NLST/
  MLSD get 425 in the 150's place, after their own checks, and REST is
  cleared (pyftpdlib answered 150 and waited forever); when the data
  connection's TLS handshake failed before the command came, its 522
  instead (RFC 4217 sec. 10.2; ftp/tls/data.py);
- a queued transfer whose data connection fails or times out gets its
  reply (425/421: ftp/stream/channel.py) and its transfer-log line;
- ABOR on a transfer still owed its reply gets 426 then 226, otherwise
  225; an ABOR the client sent before it closed an upload's data
  connection is run first (run_waiting_abort), in band or urgent, so the
  upload ends as aborted whichever of the two sockets the ioloop serves
  first.
"""

from __future__ import annotations

import logging
import socket

from pyftpdlib.utils import is_ssl_sock

from .. import compat, partfile

log = logging.getLogger("drsftp.server")

# Commands that move data over the data connection (RFC 959 4.1.3).
TRANSFER_CMDS = frozenset({"RETR", "STOR", "APPE", "STOU", "LIST", "NLST", "MLSD"})
DATA_PORT_CMDS = frozenset({"PASV", "EPSV", "PORT", "EPRT"})  # a new data connection (RFC 959 4.1.2, RFC 2428)
PEEK = 65536  # asynchat's ac_in_buffer_size: what one read of the control connection takes


def abort_is_next(pending: bytes) -> bool:
    """The control connection's unread bytes begin with a whole ABOR line
    (ended by CRLF, the only end pyftpdlib knows), Telnet IP/Synch before
    it or not (RFC 959 4.1.3; pyftpdlib reads the command's last four
    letters the same way)."""
    line, sep, _ = pending.partition(b"\r\n")
    return bool(sep) and line.split(b" ")[0][-4:].upper() == b"ABOR"


def _peek(sock) -> bytes:
    try:  # as much as one read of the control connection takes
        return sock.recv(PEEK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return b""


class FinalReplies:
    """Mixed into the control handler (handler.DRSControlMixin); a
    transfer that never started drops its file through ftp/stream/uploads.py."""

    NO_DATA_PATH = "425 Can't open data connection: none is open (PASV/EPSV/PORT/EPRT first)."
    _without_data_path = ""  # a transfer command runs with no data connection open or coming: its reply
    _data_path_failure: str | None = None  # the last data connection failed before its transfer command came

    def data_path_open(self) -> bool:
        """A data connection is open or being made: PASV listening, PORT
        connecting."""
        return self.data_channel is not None or compat.data_connection_coming(self)

    def data_path_failed(self, reply: str) -> None:
        """The data connection failed with no transfer command to answer:
        the next one gets ``reply`` (a reply now would be taken for the
        client's next command's)."""
        self._data_path_failure = reply

    def fail_queued_transfer(self, reply: str) -> bool:
        """A transfer command answered 150 whose data connection will not
        come gets ``reply`` as its final reply; True if one was waiting."""
        queued = compat.queued_transfer(self)
        if queued is None:
            return False
        compat.clear_pending_transfer(self)
        f, cmd, receiving = queued
        if f is not None:
            self.log_transfer(cmd, f.name, receiving, False, 0.0, 0)  # a failed transfer has its line too
            self._drop_upload(f)
        self.respond(reply)
        return True

    def process_command(self, cmd, *args, **kwargs):
        """Without a data connection open or being made, a transfer command
        would answer 150 and wait forever (the client closed its data
        connection, or never opened one): 425 is its final reply.  The
        command's own checks answer first (RFC 959 4.2: the reply that says
        what is wrong: 550 no such file, 554 REST past the end, 450 REST
        before STOU/APPE or no unique name); the 425 takes the 150's place."""
        if cmd in DATA_PORT_CMDS:
            self._data_path_failure = None
        if cmd not in TRANSFER_CMDS or not self.authenticated or self.data_path_open():
            super().process_command(cmd, *args, **kwargs)
            return
        reply = self._without_data_path = self._data_path_failure or self.NO_DATA_PATH
        try:
            super().process_command(cmd, *args, **kwargs)
        finally:
            self._without_data_path = ""
        if compat.last_reply(self) == reply:
            self._data_path_failure = None
            compat.restart_position(self, 0)  # REST applies to this command only
            f = compat.queued_file(self)
            compat.clear_pending_transfer(self)
            if f is not None:
                self._drop_upload(f)
                if cmd == "STOU":  # the empty file it made for its unique name
                    partfile.discard_if_empty(f.name)

    def respond(self, resp, *args, **kwargs):
        if self._without_data_path and (resp.startswith("150 ") or resp == self.NO_DATA_PATH):
            resp = self._without_data_path  # no 150: nothing to wait for
        super().respond(resp, *args, **kwargs)

    def run_waiting_abort(self) -> bool:
        """An upload's data connection closed: when the control connection's
        next command, unread yet, is ABOR (the client sent it before it
        closed), run it now; True then.  A plain control connection only: a
        TLS one cannot be read ahead."""
        sock = self.socket
        if sock is None or is_ssl_sock(sock):
            return False
        try:
            peeked = _peek(sock)
            if peeked and b"\r\n" not in compat.partial_line(self) + peeked:
                # An urgent ABOR (ftplib's abort(); BSD ftp's IAC IP, IAC DM): reads
                # stop at the urgent mark (SO_OOBINLINE).  What comes before it moves
                # to the line buffer unrun (the next read runs it with the rest).
                compat.line_read_ahead(self, sock.recv(len(peeked)))
                peeked = _peek(sock)
            if not peeked or not abort_is_next(compat.partial_line(self) + peeked):
                return False
            self.handle_read()  # runs the ABOR (and what the client pipelined after it)
        except Exception:
            self.handle_error()  # the control connection's error, not the data channel's
        return True

    def ftp_ABOR(self, line):
        """RFC 959 4.1.3: a transfer command still without its final reply
        gets 426, then ABOR gets 226; otherwise ABOR gets 225.  (pyftpdlib
        sends a lone 225 for a transfer that has moved no byte yet, which
        left that command without a reply.)"""
        dc = self.data_channel
        pending = compat.pending_transfer(self)
        had_path = self.data_path_open()
        compat.stop_connecting(self)
        if dc is not None:
            pending = pending or compat.data_channel_open(dc)
            compat.set_final_reply(dc, None)  # its reply is the 426 below
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
