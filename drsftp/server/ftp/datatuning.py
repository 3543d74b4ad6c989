"""How one session's data connections are tuned in ``drsftp serve``: the
server's tuning (``--tuning``, host limits, ``--force-buffers``), the
``--buffer-budget`` all its transfers share, and the stream-mode data
socket's handshake (docs/DESIGN.md, "Open start" and "Buffer budget").

The data socket's buffer is set before connect()/listen(), while the
window scale can still follow it; the session keys the handshake buffer's
reservation in the budget, and the tuner that sized the handshake also
locks the buffer after it, so both halves act on one decision.  (MODE E
streams size their own handshakes: ftp/eblock/streams.py.)
"""

from __future__ import annotations

from ...io import sockopt
from ...io.tuner import SocketTuner
from ...tuning import Role
from ...tuning.budget import BufferBudget
from .thirdparty import DataPeers


class DataTuning(DataPeers):
    """Mixed into the control handler (handler.DRSControlMixin); the data
    channel (ftp/stream/channel.py) reads the tuning from it, and whose data path
    a socket is on from DataPeers (ftp/thirdparty.py)."""

    # set by the server factory (app.build_server)
    tuning_spec = "drs"
    allow_force = False
    host_limits: sockopt.HostLimits | None = None
    buffer_budget: BufferBudget | None = None  # shared by all transfers of one server

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self.last_transfer: dict | None = None  # the last data channel's tuning summary
        self._handshake_tuner: SocketTuner | None = None  # sized the data socket's handshake
        self.static_window: int | None = None  # ... with a fixed buffer, no decision after it

    # One data connection per session at a time: the session keys the
    # handshake buffer's reservation in the budget (DRS open start), and the
    # tuner that sized the handshake also locks the buffer after it, so both
    # halves act on the one decision (a second reading of the control RTT
    # could fall on the other side of the open start's threshold).
    def before_handshake(self, sock, peer: str | None) -> None:
        """``peer``: the address a PORT connection goes to; None for a
        passive listener (thirdparty.DataPeers.note_data_path)."""
        # The direction is not known before RETR/STOR: size as a receiver;
        # a sender's first tick shrinks the ACK direction.
        tuner = SocketTuner(self.tuning_spec, Role.RECEIVER, allow_force=self.allow_force, limits=self.host_limits,
                            budget=self.buffer_budget)
        self.note_data_path(tuner, peer)
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
