"""The transfer guard of ``drsftp serve`` (docs/DESIGN.md#transfer-guard).

Stock pyftpdlib runs every command mid-transfer: PASV/EPSV/PORT/EPRT
silently close the running data channel and a second RETR is spliced
into it (docs/DESIGN.md#kf-pyftpdlib).  While a transfer runs, or waits
for its data connection, the commands in GUARDED get 503; DRS, STAT,
ABOR, NOOP and the rest are answered.  (In MODE E they wait for the
running transfer instead: ftp/eblock/commands.py.)
"""

from __future__ import annotations

from . import compat

# Commands refused while a transfer runs (they would close or splice it).
GUARDED = frozenset({
    "PASV", "EPSV", "PORT", "EPRT", "RETR", "STOR", "APPE", "STOU",
    "LIST", "NLST", "MLSD", "REST", "TYPE", "MODE", "STRU", "REIN",
})


class TransferGuard:
    """Mixed into the control handler (handler.DRSControlMixin)."""

    def transfer_running(self) -> bool:
        dc = self.data_channel
        return (dc is not None and compat.data_channel_open(dc)) or compat.pending_transfer(self)

    def refused_mid_transfer(self, cmd, arg) -> bool:
        """``cmd`` would close or splice the running transfer: 503 (True)."""
        if cmd not in GUARDED or not self.authenticated or not self.transfer_running():
            return False
        msg = f"Bad sequence of commands: a transfer is running; {cmd} refused (ABOR first)."
        self.respond("503 " + msg)
        self.log_cmd(cmd, arg, 503, msg)
        return True
