"""The interface every buffer-tuning strategy implements, and the registry.

Modelled on aioquic's congestion-control registry: a strategy is a small
sans-IO class; drivers feed it observations with keyword-only ``now`` and
``rtt`` and apply the :class:`Decision` it returns.  No sockets here.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass


class Role(enum.Enum):
    """Which end of the data connection this strategy tunes."""

    RECEIVER = "receiver"
    SENDER = "sender"


@dataclass(frozen=True)
class Decision:
    """Buffer sizes to apply; ``None`` means leave that buffer alone.

    ``rcv_window`` is the receive window to allow (bytes): the controller sets
    SO_RCVBUF and TCP_WINDOW_CLAMP from it.  ``sndbuf`` is the SO_SNDBUF value.
    ``notsent`` is the unsent data a sender keeps queued behind its flight
    (TCP_NOTSENT_LOWAT).
    """

    rcv_window: int | None = None
    sndbuf: int | None = None
    notsent: int | None = None

    def is_empty(self) -> bool:
        return self.rcv_window is None and self.sndbuf is None and self.notsent is None

    def changes_from(self, applied: Decision) -> Decision:
        """Only the sizes that differ from ``applied``."""
        return Decision(*(None if v == old else v for v, old in zip(self._sizes(), applied._sizes())))

    def over(self, applied: Decision) -> Decision:
        """``applied`` with this decision's sizes set on top."""
        return Decision(*(old if v is None else v for v, old in zip(self._sizes(), applied._sizes())))

    def _sizes(self) -> tuple[int | None, int | None, int | None]:
        return self.rcv_window, self.sndbuf, self.notsent


NO_CHANGE = Decision()


@dataclass(frozen=True)
class Sample:
    """One look at the local end of the data connection (cumulative counts).

    Fields the platform cannot provide are ``None``.
    """

    bytes_received: int = 0
    bytes_acked: int = 0
    cwnd_bytes: int | None = None  # local congestion window (we send)
    peer_window: int | None = None  # window the peer advertises to us
    retransmits: int | None = None
    out_of_order: int | None = None  # packets that arrived past a hole (receiver; a loss)
    held_bytes: int | None = None  # sent, out of flight, not yet cumulatively acked: SACKed or lost


@dataclass(frozen=True)
class PeerReport:
    """Validated measurements the other end sent with the DRS command."""

    rtt: float | None = None  # seconds, the peer's TCP RTT estimate
    cwnd: int | None = None  # bytes, the peer's congestion window (peer sends)
    inflight: int | None = None  # bytes the peer has sent and not yet had acked
    window: int | None = None  # bytes, the receive window the peer allows
    rate: float | None = None  # bytes/s the peer measured
    bytes: int | None = None  # cumulative bytes the peer moved


class Tuning:
    """Base class: the `kernel` behaviour (never touch a buffer)."""

    name = "kernel"

    def __init__(self, role: Role) -> None:
        self.role = role

    def before_handshake(self, *, rtt: float | None = None) -> Decision:
        """Sizes to set before connect()/listen(): they fix the window scale.
        ``rtt``: the control connection's, when known."""
        return NO_CHANGE

    def after_handshake(self, *, rtt: float | None = None) -> Decision:
        """Sizes to set once connected, before any data flows."""
        return NO_CHANGE

    def on_sample(self, sample: Sample, *, now: float, rtt: float | None) -> Decision:
        """A periodic look at the connection; returns buffers to apply now."""
        return NO_CHANGE

    def on_peer_report(self, report: PeerReport, *, now: float, rtt: float | None) -> None:
        """Measurements received from the peer over the control channel."""

    def expect(self, at: int, more: int) -> None:
        """The application asked the peer for ``more`` bytes (a request
        sent; 0: its answer ended) when the connection had received ``at``
        (cumulative bytes_received).  Only a receiver's rule uses it."""

    def tick_interval(self, *, rtt: float | None) -> float | None:
        """Seconds until the next :meth:`on_sample`; ``None``: no ticks needed."""
        return None

    def describe(self) -> str:
        return self.name


_Factory = Callable[[Role, str | None], Tuning]
_REGISTRY: dict[str, _Factory] = {}


def register(name: str) -> Callable[[_Factory], _Factory]:
    """Class decorator: make a strategy available as ``--tuning NAME[:ARG]``."""

    def wrap(factory: _Factory) -> _Factory:
        _REGISTRY[name] = factory
        return factory

    return wrap


def names() -> list[str]:
    return sorted(_REGISTRY)


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b?)\s*$", re.IGNORECASE)


# the kernel keeps a socket buffer as an int, twice what was asked
# (docs/DESIGN.md #kf-doubling): 1 GiB is the most a request can be
MAX_BUFFER = 1 << 30


def parse_size(text: str) -> int:
    """Parse '64k', '4MiB', '131072' into bytes (k = 1024)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 65536, 64k, 4MiB)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    value = int(float(m.group(1)) * mult)
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return value


def parse_buffer(text: str) -> int:
    """A socket buffer's size, as :func:`parse_size`, at most MAX_BUFFER."""
    value = parse_size(text)
    if value > MAX_BUFFER:
        raise ValueError(f"a socket buffer holds at most 1 GiB, not {text!r}")
    return value


def check_spec(spec: str) -> str:
    """Validate a tuning spec without building it; returns it normalised."""
    name = spec.partition(":")[0]
    if name not in _REGISTRY:
        raise ValueError(f"unknown tuning {name!r}; choose from {', '.join(names())}")
    create(spec, Role.RECEIVER)
    return spec


def create(spec: str, role: Role) -> Tuning:
    """Build the strategy named by ``spec`` ('drs', 'kernel', 'fixed:64k')."""
    name, sep, arg = spec.partition(":")
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ValueError(f"unknown tuning {name!r}; choose from {', '.join(names())}")
    return factory(role, arg if sep else None)


register("kernel")(lambda role, arg: _no_arg(Tuning, "kernel", role, arg))


def _no_arg(cls: type[Tuning], name: str, role: Role, arg: str | None) -> Tuning:
    if arg:
        raise ValueError(f"tuning {name!r} takes no argument")
    return cls(role)


class FixedTuning(Tuning):
    """A static buffer set before the handshake, as stock FTP servers did."""

    name = "fixed"

    def __init__(self, role: Role, size: int) -> None:
        super().__init__(role)
        self.size = size

    def before_handshake(self, *, rtt: float | None = None) -> Decision:
        # Both buffers: the receiver's fixes the window (and its scale), the
        # sender's caps the data in flight.
        return Decision(rcv_window=self.size, sndbuf=self.size)

    def describe(self) -> str:
        return f"fixed:{self.size}"


@register("fixed")
def _fixed(role: Role, arg: str | None) -> Tuning:
    if not arg:
        raise ValueError("tuning 'fixed' needs a size, e.g. fixed:64k")
    return FixedTuning(role, parse_buffer(arg))
