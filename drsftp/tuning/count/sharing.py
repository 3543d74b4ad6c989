"""What the senders of a parallel transfer see of the path, sans-IO: the
figures `-P auto` and `-c auto` share the link by (docs/DESIGN.md,
"Parallel streams"; docs/decisions/0021-streams-that-share.md).

A :class:`PathSample` is one moment's figures summed over a transfer's
data connections, as their *senders* measure them: the least smoothed RTT
(``tcpi_rtt``), the retransmits, and how long the senders were busy and,
of that, limited by the receive window or the send buffer
(``tcpi_busy_time``, ``tcpi_rwnd_limited``, ``tcpi_sndbuf_limited``:
Linux's TCP chronographs, microseconds since the connection began).  A
client that sends reads its own sockets (:func:`from_infos`); one that
receives takes the server's DRS report (:func:`from_pairs`; the keys are
docs/PROTOCOL.md's ``busy_us``, ``rwnd_lim_us``, ``sndbuf_lim_us``:
tuning/wirekeys.py).

:class:`LimitMeter` turns the cumulative times into the share of the last
interval's busy time a buffer cap limited: high, each stream is held by a
window (a stream more, or a larger window, would carry more); near 0,
congestion (the cwnd, BBR's pacing) or the application holds it, and a
stream more only takes from someone else.  One kernel fact bounds what
"near 0" says: ``tcpi_sndbuf_limited`` stayed 0 on Linux 6.18 for a
sender held by an 8 KiB send buffer (measured on loopback, write and
sendfile alike), so a sender held by its own buffer also reads as not
limited.  The receive window's share is the reliable one: where the
receiver's clamp (-P auto's window) is what should hold the senders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..wirekeys import BUSY_US, LIMIT_KEYS, RETRANS, RTT_US, RWND_LIM_US, SNDBUF_LIM_US


@dataclass(frozen=True)
class PathSample:
    rtt: float | None = None  # seconds: the senders' least smoothed RTT now
    retransmits: int | None = None  # cumulative, summed over the connections
    busy_us: int | None = None  # cumulative sender busy time, summed
    limited_us: int | None = None  # of it, limited by the receive window or the send buffer


def limit_pairs(info: Mapping[str, int]) -> dict[str, int]:
    """A sender's limited-time figures for its DRS report (only those its
    kernel gives: Linux 4.10 and later)."""
    return {key: int(info[field]) for key, field in LIMIT_KEYS.items() if field in info}


def from_pairs(reports: Iterable[Mapping[str, int]]) -> PathSample | None:
    """The path from the peer's DRS reports (one per session; MODE E
    reports are already sums over a session's streams): None when no
    report carried an RTT."""
    reports = [r for r in reports if r]
    rtts = [r[RTT_US] / 1e6 for r in reports if r.get(RTT_US)]
    if not rtts:
        return None
    return PathSample(min(rtts), _sum(r.get(RETRANS) for r in reports),
                      _sum(r.get(BUSY_US) for r in reports),
                      _sum(_limited(r.get(RWND_LIM_US), r.get(SNDBUF_LIM_US)) for r in reports))


def from_infos(infos: Iterable[Mapping[str, int]]) -> PathSample | None:
    """The path from our own sending sockets' TCP_INFO snapshots."""
    infos = [i for i in infos if i.get("rtt")]
    if not infos:
        return None
    return PathSample(min(i["rtt"] for i in infos) / 1e6, _sum(i.get("total_retrans") for i in infos),
                      _sum(i.get("busy_time") for i in infos),
                      _sum(_limited(i.get("rwnd_limited"), i.get("sndbuf_limited")) for i in infos))


def combine(samples: Iterable[PathSample | None]) -> PathSample | None:
    """Several transfers' paths as one (a dataset job's sessions)."""
    got = [s for s in samples if s is not None and s.rtt]
    if not got:
        return None
    return PathSample(min(s.rtt for s in got if s.rtt), _sum(s.retransmits for s in got),
                      _sum(s.busy_us for s in got), _sum(s.limited_us for s in got))


class LimitMeter:
    """The share of the senders' busy time that a buffer cap limited, per
    interval (``update`` once an interval).  None where it is unknown: no
    figures, no busy time since the last, or counters that went back (a
    connection ended and left the sums)."""

    def __init__(self) -> None:
        self._last: tuple[int, int] | None = None

    def update(self, path: PathSample | None) -> float | None:
        if path is None or path.busy_us is None or path.limited_us is None:
            self._last = None
            return None
        now, last = (path.busy_us, path.limited_us), self._last
        self._last = now
        if last is None:
            return None
        busy, limited = now[0] - last[0], now[1] - last[1]
        if busy <= 0 or limited < 0:
            return None
        return min(1.0, limited / busy)


def _limited(rwnd: int | None, sndbuf: int | None) -> int | None:
    if rwnd is None and sndbuf is None:
        return None
    return (rwnd or 0) + (sndbuf or 0)


def _sum(values: Iterable[int | None]) -> int | None:
    """The sum, None unless every value is known."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total
