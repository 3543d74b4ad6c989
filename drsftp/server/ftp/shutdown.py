"""A session of ``drsftp serve`` while the server shuts down (SIGTERM,
SIGINT: app.serve; docs/DEPLOY.md).

No new transfers: a command that would start one (transferguard.GUARDED)
gets 421 and the session closes, unless a transfer still runs; the
running transfer gets ``--grace`` seconds, then 426 and 421 (RFC 959).
"""

from __future__ import annotations

from . import compat
from .transferguard import GUARDED


class ShutdownGuard:
    """Mixed into the control handler (handler.DRSControlMixin)."""

    shutting_down = False  # set on SIGTERM: no new transfers

    def refused_for_shutdown(self, cmd) -> bool:
        """Shutting down, ``cmd`` would start a transfer: 421, and the
        session closes (True)."""
        if not self.shutting_down or cmd not in GUARDED or self.transfer_running():
            return False
        self.respond("421 Server shutting down; try again later.")
        self.close_when_done()
        return True

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
