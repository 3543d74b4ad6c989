"""The DRS command on the control connection of ``drsftp serve``
(docs/PROTOCOL.md, "DRS").

- At most ``drs_rate`` commands a second a connection (a token bucket):
  past it 503, the command ignored; malformed pairs get 501.
- In stream mode the data channel's tuner takes the client's pairs and
  answers with its own (425 with no transfer running); in MODE E the
  session's sums answer (ftp/eblock/session.py, through EModeCommands.drs_reply).
- FEAT lists DRS.
"""

from __future__ import annotations

import time

from ...ftp import drscmd
from ...tuning.wirekeys import NOTHING_MEASURED
from . import compat

DRS_COMMAND = {
    "perm": None,
    "auth": True,
    "arg": None,
    "help": "Syntax: DRS [<SP> key=value ...] (exchange right-sizing measurements).",
}


class DRSCommand:
    """DRS; mixed into the control handler (handler.DRSControlMixin)."""

    drs_rate = 20.0  # DRS commands per second and connection (token bucket)

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        compat.extra_features(self).append("DRS")
        self._drs_tokens = self.drs_rate
        self._drs_refill = time.monotonic()

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
        self.respond("200 DRS " + (tuner.report_pairs() or drscmd.format_pairs(dict(NOTHING_MEASURED))))

