"""The DRS exchange of one control session, sans I/O (docs/PROTOCOL.md, "DRS").

Both ends and every client path use it: when a DRS command is due, what a
reply means, and how one session's report is made of its streams' and
split back over them in extended block mode (docs/PROTOCOL.md, "DRS in
extended block mode"). Reports are typed pairs (``key -> int``); text
exists only on the wire (``drscmd``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..tuning.wirekeys import RTT_US, SHARED, STREAMS, SUMMED
from . import drscmd

MIN_INTERVAL = 0.05  # seconds between DRS commands at the least; else one per RTT
GONE = (500, 502)  # the peer does not know DRS after all (RFC 959 4.2: not recognised, not implemented)

Pairs = dict[str, int]


def session_report(per_stream: Iterable[Mapping[str, int]], streams: int | None = None) -> Pairs:
    """One report for several streams: ``rtt_us`` the least, the SUMMED keys
    added up, ``streams=N`` when given (a sender states how many run; a
    receiver asks for a number only to change it)."""
    sums: Pairs = {}
    rtts = []
    for pairs in per_stream:
        if RTT_US in pairs:
            rtts.append(pairs[RTT_US])
        for key in SUMMED:
            if key in pairs:
                sums[key] = sums.get(key, 0) + pairs[key]
    report: Pairs = {RTT_US: min(rtts)} if rtts else {}
    report.update(sums)
    if streams is not None:
        report[STREAMS] = streams
    return report


def stream_share(report: Mapping[str, int], streams: int) -> Pairs:
    """What one of ``streams`` streams takes from the peer's session report:
    the SHARED sums divided evenly, the rest (RTT) as it is."""
    n = max(streams, 1)
    return {key: value // n if key in SHARED else value for key, value in report.items()}


class Exchange:
    """When one session sends DRS and what the replies mean.

    ``enabled``: the peer offers DRS (FEAT) and the tuning measures.  The
    driver asks :meth:`due`, sends ``command(pairs)`` and calls :meth:`sent`,
    then hands the reply to :meth:`on_reply`."""

    def __init__(self, enabled: bool, min_interval: float = MIN_INTERVAL) -> None:
        self.enabled = enabled
        self.min_interval = min_interval
        self.pending = False
        self.last_sent = float("-inf")
        self.replies = 0  # 200 replies carrying the peer's measurements
        self.peer_last: Pairs = {}

    def due(self, now: float, rtt: float | None) -> bool:
        """One command at a time, at most one per RTT (and per MIN_INTERVAL)."""
        return (self.enabled and not self.pending
                and now - self.last_sent >= max(rtt or 0.0, self.min_interval))

    def sent(self, now: float) -> None:
        self.pending, self.last_sent = True, now

    def on_reply(self, code: int | None, text: str = "") -> Pairs | None:
        """The peer's pairs from a 200 reply, else None (``code`` None: the
        command failed without a reply).  A 500/502 turns the exchange off."""
        self.pending = False
        if code == 200:
            pairs = drscmd.parse_reply_text(text)
            self.replies += 1
            self.peer_last = pairs
            return pairs
        if code in GONE:
            self.enabled = False
        return None



def command(pairs: Mapping[str, float | int | None]) -> str:
    """The DRS command line for ``pairs`` (``DRS`` alone when none is known)."""
    return f"DRS {drscmd.format_pairs(dict(pairs))}".rstrip()
