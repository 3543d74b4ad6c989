"""How many streams a pull runs when its COPY names none (no
``X-Number-Of-Streams``, or 0: gfal2's and davix's default, and `drsftp
copy -P auto`): the pulling server chooses as the FTP client's ``-P
auto`` does (docs/PARALLEL.md, "-P auto"), over its own connections.

* The first streams: :func:`~drsftp.tuning.count.streams.first_streams`
  of the first connection's RTT (the data path's: this server's own
  connection to the source) and the window this host's setsockopt caps
  lets a socket reach; they start as soon as the first answer gives the
  file's size.
* Then every ``interval(RTT)`` :class:`~drsftp.tuning.count.streams.
  StreamController` judges the pull's goodput with each connection's RTT
  and retransmits (a drsftp source's, from its DRS reports: the sender
  sees the queue; else this side's TCP_INFO) and adds a connection or ends
  one (after its running range: never cut), at most min(--max-streams,
  AUTO_MAX).
"""

from __future__ import annotations

from ....io import sockopt
from ....tuning.actuation import host_cap
from ....tuning.climb import Base
from ....tuning.count.streams import Action, StreamController, StreamSample, StreamsConfig, first_streams
from ....tuning.wirekeys import RETRANS, RTT_US
from ..drs import Settings
from .remote import Stripe

AUTO_MAX = 16  # connections at most (the FTP client's -P auto bound)


def rtt_of(stripe: Stripe) -> float | None:
    """Seconds: the source's RTT of this connection where it reported one,
    else this socket's."""
    link = stripe.link
    if link is None:
        return None
    us = link.peer.get(RTT_US)
    if not us and link.sock is not None:
        us = sockopt.tcp_info(link.sock).get("rtt")
    return us / 1e6 if us else None


def window_cap(settings: Settings) -> int | None:
    """One connection's window at most here (both directions' setsockopt caps)."""
    limits = settings.limits or sockopt.read_host_limits()
    caps = [host_cap(limits, settings.allow_force, receiving) for receiving in (True, False)]
    return min(c for c in caps if c) if all(caps) else None


class AutoStreams:
    def __init__(self, max_streams: int, settings: Settings) -> None:
        self.cap = max(1, min(max_streams, AUTO_MAX))
        self.settings = settings
        self.ctl = StreamController(StreamsConfig(max_streams=self.cap))
        self._base: dict[int, Base] = {}
        self._retrans0: dict[int, int] = {}

    def first(self, stripe: Stripe) -> int:
        """The first streams, from ``stripe``'s connection (it answered the first range)."""
        n = first_streams(rtt_of(stripe), window_cap(self.settings), StreamsConfig(max_streams=self.cap))
        self.ctl = StreamController(StreamsConfig(start=n, max_streams=self.cap))
        return self.ctl.streams

    def interval(self, stripes: list[Stripe]) -> float:
        rtts = [r for r in (rtt_of(s) for s in stripes) if r]
        return StreamController.interval(max(rtts) if rtts else None)

    def update(self, goodput: float, stripes: list[Stripe], left: int) -> Action:
        samples = [self._sample(s) for s in stripes]
        interval = self.interval(stripes)
        intervals_left = left / goodput / interval if goodput > 0 else None
        return self.ctl.update(goodput, samples, intervals_left)

    def refused(self, action: Action, running: int) -> None:
        self.ctl.refused(action, running)

    def _sample(self, stripe: Stripe) -> StreamSample:
        rtt = rtt_of(stripe)
        base = self._base.setdefault(stripe.index, Base())
        rtt_min = base.note(rtt) if rtt else base.rtt
        link = stripe.link
        total = link.peer.get(RETRANS, 0) if link is not None else 0
        first = self._retrans0.setdefault(stripe.index, total)
        return StreamSample(rtt, rtt_min, max(total - first, 0))
