"""One direction of the emulated link, sans-IO.

Order per packet (as netem; docs/NETEM.md): random loss ->
drop-tail queue served at RATE (each segment charged its on-the-wire IP
size) -> fixed one-way delay (+ jitter that never reorders).  Release times
only increase, so the caller keeps a plain FIFO of (release_time, packet).
A GSO super-packet of N segments counts as N packets everywhere.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .spec import MTU


@dataclass
class DirectionStats:
    packets_in: int = 0  # segments offered
    bytes_in: int = 0
    lost: int = 0  # segments dropped by random loss
    queue_drops: int = 0  # segments dropped by the full queue
    packets_out: int = 0
    bytes_out: int = 0
    max_backlog_bytes: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Shaper:
    def __init__(self, *, rate: float, delay: float, queue_packets: int, loss: float = 0.0,
                 jitter: float = 0.0, rng: random.Random | None = None) -> None:
        self.rate = rate  # bits/s, 0 = unlimited
        self.delay = delay
        self.queue_bytes = queue_packets * MTU
        self.loss = loss
        self.jitter = jitter
        self.rng = rng or random.Random()
        self.busy_until = 0.0  # when the bottleneck has sent what it holds
        self.last_release = 0.0
        self.stats = DirectionStats()

    def backlog(self, now: float) -> float:
        """Bytes waiting at the bottleneck at time ``now``."""
        if not self.rate or self.busy_until <= now:
            return 0.0
        return (self.busy_until - now) * self.rate / 8

    def offer(self, now: float, wire_bytes: int, segments: int = 1) -> float | None:
        """A packet arrives; returns its release time, or None if dropped."""
        st = self.stats
        st.packets_in += segments
        st.bytes_in += wire_bytes
        # A super-packet is lost whole with probability p: the expected
        # segment loss rate stays p, in fewer, larger events (docs/NETEM.md).
        if self.loss and self.rng.random() < self.loss:
            st.lost += segments
            return None
        depart = now
        if self.rate:
            backlog = self.backlog(now)
            if backlog + wire_bytes > self.queue_bytes and backlog > 0:
                st.queue_drops += segments
                return None
            st.max_backlog_bytes = max(st.max_backlog_bytes, int(backlog + wire_bytes))
            self.busy_until = max(now, self.busy_until) + wire_bytes * 8 / self.rate
            depart = self.busy_until
        release = depart + self.delay
        if self.jitter:
            release += self.rng.uniform(-self.jitter, self.jitter)
        release = max(release, self.last_release, now)
        self.last_release = release
        st.packets_out += segments
        st.bytes_out += wire_bytes
        return release
