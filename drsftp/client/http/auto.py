"""``-P auto`` over HTTP: the FTP client's streams controller
(drsftp/tuning/count/streams.py) counts connections instead of data
streams; :class:`~drsftp.client.streams.autosteer.AutoSteering` adds and
ends them.  Each connection's window stays DRS's own (no shared window:
the controller is built without ``window_cap``)."""

from __future__ import annotations

from typing import Any

from ...io import sockopt
from ...tuning.actuation import host_cap
from ...tuning.count.streams import StreamController, StreamsConfig, first_streams
from ..streams.autosteer import AutoSteering
from ..transfer.options import TransferOptions

AUTO_MAX = 16  # connections -P auto runs at most (the FTP client's streams bound)


def pool_size(streams: int | None) -> int:
    """The connections a file's pool may hold: -P N's, or -P auto's most."""
    return streams or AUTO_MAX


def first_connections(rtt: float | None, opts: TransferOptions) -> int:
    """From the first connection's RTT (seconds) and the window this host
    lets setsockopt set (as FTP's -P auto starts: streams.first_streams)."""
    limits = sockopt.read_host_limits()
    caps = [host_cap(limits, opts.force_buffers, receiving) for receiving in (True, False)]
    cap = min(c for c in caps if c) if all(caps) else None
    return first_streams(rtt, cap, StreamsConfig(max_streams=AUTO_MAX))


def steering(driver: Any, start: int) -> AutoSteering:
    return AutoSteering(StreamController(StreamsConfig(start=start, max_streams=AUTO_MAX)), driver)
