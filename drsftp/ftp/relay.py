"""Relayed DRS for a third-party transfer, sans-IO (docs/DESIGN.md,
"Third-party transfers"; docs/decisions/0020-drs-on-the-data-path.md).

The data goes from server A to server B; the client carries none of it,
so nothing the client measures says anything about that path.  Each
server right-sizes its own data sockets from what they see, and the two
servers' reports reach each other through the client:

- while the transfer runs, each server that lists DRS is sent
  ``DRS <the other server's latest reply pairs>`` (the first one bare
  ``DRS``: there is nothing to relay yet), one command outstanding per
  server, at most once per **data-path RTT** and never more often than
  ``drsexchange.MIN_INTERVAL``;
- the data-path RTT comes from the servers' own replies: the sender's
  (A's) ``rtt_us``, its data sockets' smoothed RTT, else the receiver's
  estimate; never the client's control-connection RTT;
- ``streams`` is dropped from what is relayed (from a client during a
  RETR a drsftp server takes it as a request for that many streams,
  docs/PROTOCOL.md); ``-P auto`` adds its own ``streams=N`` to A's next
  command;
- a server answering 500/502 to DRS (GridFTP, vsftpd) turns its exchange
  off: the other then gets bare ``DRS`` (its own numbers still go into
  the record, and A's still give the data-path RTT);
- every 200 reply is kept with its time: both servers' windows, RTT and
  rate over time, for ``--json``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..tuning.wirekeys import BYTES, CWND, RATE, RETRANS, RTT_US, STREAMS, WND
from .drsexchange import MIN_INTERVAL, Exchange, Pairs, command
from .thirdparty import Side

SERIES_LIMIT = 20_000  # replies kept per server (bounded memory)
NOT_RELAYED = (STREAMS,)  # a count of the sender's own streams, a request when it comes from a client


class Relay:
    def __init__(self, source_drs: bool, dest_drs: bool, min_interval: float = MIN_INTERVAL) -> None:
        self.exchanges = {Side.SOURCE: Exchange(source_drs, min_interval),
                          Side.DEST: Exchange(dest_drs, min_interval)}
        self.series: dict[Side, list[dict[str, float]]] = {Side.SOURCE: [], Side.DEST: []}
        self.start: float | None = None  # the first command's time: the series' t=0
        self.bytes_base = 0  # B's byte count before this file (streams kept from an earlier file)
        self.wanted_streams: int | None = None  # -P auto: asked of A with its next command
        self.sent_count = {Side.SOURCE: 0, Side.DEST: 0}  # commands carrying the other's pairs

    @property
    def relaying(self) -> bool:
        """Both servers take part: each gets the other's numbers."""
        return all(ex.enabled for ex in self.exchanges.values())

    def latest(self, side: Side) -> Pairs:
        return self.exchanges[side].peer_last

    def data_rtt(self) -> float | None:
        """Seconds: the sender's RTT on the data path (A's ``rtt_us``, the
        least over its streams in MODE E), else the receiver's estimate."""
        for side in (Side.SOURCE, Side.DEST):
            us = self.latest(side).get(RTT_US, 0)
            if us > 0:
                return us / 1e6
        return None

    def due(self, side: Side, now: float) -> bool:
        return self.exchanges[side].due(now, self.data_rtt())

    def command(self, side: Side) -> str:
        """The DRS line for ``side``: the other server's latest pairs (if it
        takes part), and for A the streams -P auto asks for."""
        other = self.exchanges[side.other]
        pairs: dict[str, int] = {}
        if other.enabled:
            pairs = {k: v for k, v in other.peer_last.items() if k not in NOT_RELAYED}
        if side is Side.SOURCE and self.wanted_streams is not None:
            pairs[STREAMS] = self.wanted_streams
            self.wanted_streams = None
        return command(pairs)

    def sent(self, side: Side, now: float, line: str) -> None:
        if self.start is None:
            self.start = now
        self.exchanges[side].sent(now)
        if line != "DRS":
            self.sent_count[side] += 1

    def on_reply(self, side: Side, now: float, code: int | None, text: str = "") -> Pairs | None:
        """A reply to ``side``'s DRS (``code`` None: no reply, the command
        failed); its pairs go into the record."""
        pairs = self.exchanges[side].on_reply(code, text)
        if pairs is not None and len(self.series[side]) < SERIES_LIMIT:
            t = now - (self.start if self.start is not None else now)
            self.series[side].append({"t": round(t, 4), **pairs})
        return pairs

    def moved(self, limit: int | None = None) -> int:
        """Bytes of this file that reached B as the servers report them
        (B's count, else A's acknowledged bytes), at most ``limit``."""
        dest, src = self.latest(Side.DEST), self.latest(Side.SOURCE)
        if BYTES in dest:
            n = dest[BYTES] - self.bytes_base
        else:
            n = src.get(BYTES, 0)
        n = max(0, n)
        return min(n, limit) if limit is not None else n

    def rate(self) -> float:
        """Bytes/s over the servers' last tick (B's, else A's)."""
        for side in (Side.DEST, Side.SOURCE):
            r = self.latest(side).get(RATE, 0)
            if r:
                return float(r)
        return 0.0

    def retransmits(self) -> int:
        return self.latest(Side.SOURCE).get(RETRANS, 0)

    def replies(self, side: Side) -> int:
        return self.exchanges[side].replies

    def record(self) -> dict[str, list[dict[str, float]]]:
        """The --json form: each server's replies over time."""
        return {side.value: list(rows) for side, rows in self.series.items()}


def window_of(pairs: Mapping[str, int]) -> int | None:
    """A report's window: the receiver's ``wnd``, else the sender's ``cwnd``."""
    return pairs.get(WND) or pairs.get(CWND) or None
