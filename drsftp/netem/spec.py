"""What an emulated link is: parsing and validation, no side effects."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from .errors import NetemUsageError

MTU = 1500
NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
SYSCTL_RE = re.compile(r"^net\.[a-z0-9_.]+$")
CONGESTION = ("bbr", "cubic", "reno")


def parse_duration(text: str) -> float:
    """'100ms', '0.5ms', '1s', '250us' or a bare number of seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)?\s*", str(text))
    value = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}[m.group(2)] if m else math.nan
    if not math.isfinite(value):
        raise NetemUsageError(f"not a duration: {text!r} (examples: 100ms, 0.5ms, 1s)")
    return value


def parse_rate(text: str) -> float:
    """'100mbit', '1gbit', '500kbit', '0' (unlimited) -> bits per second."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmg]?)(bit|bps)?\s*", str(text).lower())
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else math.nan
    if not math.isfinite(value):
        raise NetemUsageError(f"not a rate: {text!r} (examples: 100mbit, 1gbit, 0 for unlimited)")
    return value


def parse_loss(text: str) -> float:
    """'0.1%' or a fraction '0.001' -> fraction, 0 to 1."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise NetemUsageError(f"not a loss rate: {text!r} (examples: 0.1%, 0.001)")
    if not 0 <= value <= 1:
        raise NetemUsageError(f"loss must lie between 0 and 100%, not {value * 100:g}%")
    return value


@dataclass(frozen=True)
class LinkSpec:
    rtt: float = 0.1  # seconds, split evenly between the directions
    rate: float = 100e6  # bits/s on the wire, 0 = unlimited
    queue: int | None = None  # drop-tail queue in MTU-sized packets; None: 1 BDP (>= 64)
    loss: float = 0.0  # random loss per packet, each direction
    jitter: float = 0.0  # seconds, uniform +-, never reorders
    backend: str = "auto"  # auto | tc | tun
    sysctls: dict = field(default_factory=dict)  # applied on both sides
    seed: int | None = None

    def validate(self) -> LinkSpec:
        """The spec, or NetemUsageError; NaN and infinity are refused first (a NaN compares false)."""
        for what in ("rtt", "rate", "loss", "jitter"):
            value = getattr(self, what)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise NetemUsageError(f"{what} must be a finite number, not {value!r}")
        if self.queue is not None and (isinstance(self.queue, bool) or not isinstance(self.queue, int)):
            raise NetemUsageError(f"queue must be a whole number of packets, not {self.queue!r}")
        if not 0 <= self.rtt <= 10:
            raise NetemUsageError(f"rtt must be between 0 and 10 s, not {self.rtt}")
        if self.rate < 0 or (self.rate != 0 and self.rate < 10e3):
            raise NetemUsageError(f"rate must be at least 10 kbit/s (or 0 for unlimited), not {self.rate:g}")
        if self.rate > 100e9:
            raise NetemUsageError("rate above 100 Gbit/s is not emulated")
        if not 0 <= self.loss <= 1:
            raise NetemUsageError(f"loss must lie between 0 and 100%, not {self.loss * 100:g}%")
        if self.jitter < 0 or (self.jitter > self.rtt / 2 + 1e-12 and self.jitter > 0):
            raise NetemUsageError("jitter must be >= 0 and at most half the RTT")
        if self.queue is not None and not 1 <= self.queue <= 1_000_000:
            raise NetemUsageError(f"queue must be 1..1000000 packets, not {self.queue}")
        if self.backend not in ("auto", "tc", "tun"):
            raise NetemUsageError(f"backend must be auto, tc or tun, not {self.backend!r}")
        for key, value in self.sysctls.items():
            if not SYSCTL_RE.match(key):
                raise NetemUsageError(f"sysctl {key!r}: only net.* keys may be set per side")
            if key == "net.ipv4.tcp_congestion_control" and value not in CONGESTION:
                raise NetemUsageError(f"congestion control must be one of {', '.join(CONGESTION)}")
        return self

    @property
    def queue_packets(self) -> int:
        if self.queue is not None:
            return self.queue
        if not self.rate:
            return 10_000
        return max(64, int(self.rate * self.rtt / 8 / MTU))

    @property
    def one_way(self) -> float:
        return self.rtt / 2

    def as_dict(self) -> dict:
        d = asdict(self)
        d["queue_packets"] = self.queue_packets
        return d


def parse_sysctl(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip().strip('"').strip("'")
    if not sep or not key or not value:
        raise NetemUsageError(f"--sysctl wants key=value, not {text!r}")
    return key, value


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise NetemUsageError(f"link name must be 1-8 lower-case letters or digits, not {name!r}")
    return name
