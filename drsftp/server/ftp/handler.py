"""pyftpdlib handlers that run DRS on every data connection: the classes
``drsftp serve`` runs, composed of one mixin per rule (docs/DESIGN.md,
"Server").

- command lines: at most 2048 bytes, nothing after QUIT, login first, no
  NUL (ftp/commandline.py);
- HASH and CKSM (ftp/hashing.py) and the DRS command (ftp/drscommand.py);
- commands waiting, so replies keep the commands' order (ftp/waiting.py);
- the server shutting down (ftp/shutdown.py) and the transfer guard
  (ftp/transferguard.py);
- one final reply per transfer command (ftp/stream/finalreply.py);
- uploads under a temporary name (ftp/stream/uploads.py), whose names no
  command makes (ftp/partfile.py);
- the data connections' tuning and handshake (ftp/datatuning.py) and the
  tuned stream-mode data channel (ftp/stream/channel.py);
- MODE E (ftp/eblock/commands.py), MLSx facts (ftp/facts.py), the transfer log
  (ops/translog.py).
"""

from __future__ import annotations

from pyftpdlib.handlers import DTPHandler, FTPHandler

from ..ops.translog import TransferLogMixin
from .commandline import CommandLines
from .compat import STOCK_COMMANDS
from .datatuning import DataTuning
from .drscommand import DRS_COMMAND, DRSCommand
from .eblock.commands import EModeCommands, with_eblock_commands
from .facts import MlsxFacts
from .hashing import CKSM_COMMAND, HASH_COMMAND, HashCommands
from .listings import StreamedListings
from .partfile import PartNames
from .shutdown import ShutdownGuard
from .stream.channel import SEND_CHUNK, DRSActiveDTP, DRSDataMixin, DRSPassiveDTP, with_drs_data
from .stream.finalreply import FinalReplies
from .stream.uploads import UploadCommands
from .transferguard import TransferGuard
from .waiting import WaitingCommands

__all__ = ["DRSControlMixin", "DRSDTPHandler", "DRSDataMixin", "DRSFTPHandler", "tls_handler_class"]

DRS_CMDS = with_eblock_commands(STOCK_COMMANDS)  # a copy: pyftpdlib's dict is shared module-wide
DRS_CMDS["HASH"] = HASH_COMMAND
DRS_CMDS["CKSM"] = CKSM_COMMAND
DRS_CMDS["DRS"] = DRS_COMMAND


class DRSControlMixin(CommandLines, HashCommands, DRSCommand, ShutdownGuard, TransferGuard, PartNames, FinalReplies,
                      UploadCommands, StreamedListings, DataTuning):
    """The control connection's stream-mode rules, one mixin each; mixed
    into FTPHandler and TLS_FTPHandler."""

    passive_dtp = DRSPassiveDTP
    active_dtp = DRSActiveDTP
    banner = "drsftp ready (DRS: dynamic right-sizing available, see FEAT)."

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self.dtp_handler = with_drs_data(type(self).dtp_handler)  # the class pyftpdlib's DTP dispatchers build

    def pre_process_command(self, line, cmd, arg):
        """Each rule a command meets before pyftpdlib runs it, in this
        order; the first that refuses it answers."""
        if self._quit_received:  # a command held (MODE E) behind the QUIT that ended the session
            return
        if (self.refused_while_hashing(cmd) or self.refused_for_shutdown(cmd) or self.refused_mid_transfer(cmd, arg)
                or self.refused_before_login(cmd, arg) or self.refused_line_break(cmd, arg)
                or self.refused_part_name(cmd, arg)):
            return
        super().pre_process_command(line, cmd, arg)


    def port_settled(self) -> None:
        """A stream-mode PORT/EPRT got its reply (WaitingCommands runs the
        commands held behind it)."""


def _commands(base: dict) -> dict:
    cmds = dict(base)  # a copy: pyftpdlib's dicts are shared module-wide
    cmds.update({k: DRS_CMDS[k] for k in ("DRS", "HASH", "CKSM")})
    return with_eblock_commands(cmds)


class DRSDTPHandler(DRSDataMixin, DTPHandler):
    ac_out_buffer_size = SEND_CHUNK
    handle_read_event = DRSDataMixin.handle_read  # plain sockets: skip a dispatch layer


class DRSFTPHandler(TransferLogMixin, MlsxFacts, EModeCommands, WaitingCommands, DRSControlMixin, FTPHandler):
    proto_cmds = DRS_CMDS
    dtp_handler = DRSDTPHandler


def tls_handler_class():
    """FTPS (RFC 4217: AUTH TLS, PBSZ, PROT P) classes, with SSCN
    (ftp/tls/sscn.py); needs pyOpenSSL."""
    from pyftpdlib.handlers import TLS_DTPHandler, TLS_FTPHandler

    from .tls.data import TLSDataEnd, TLSDataReplies
    from .tls.sscn import SSCN_COMMAND, SSCNCommand, SSCNData

    class DRSTLSDTPHandler(TLSDataReplies, SSCNData, DRSDataMixin, TLS_DTPHandler, TLSDataEnd):
        ac_out_buffer_size = SEND_CHUNK

    tls_cmds = _commands(TLS_FTPHandler.proto_cmds)
    tls_cmds["SSCN"] = SSCN_COMMAND

    class DRSTLSFTPHandler(SSCNCommand, TransferLogMixin, MlsxFacts, EModeCommands, WaitingCommands, DRSControlMixin,
                           TLS_FTPHandler):
        proto_cmds = tls_cmds
        dtp_handler = DRSTLSDTPHandler

    return DRSTLSFTPHandler
