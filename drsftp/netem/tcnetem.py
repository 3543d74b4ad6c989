"""The tc backend's netem qdisc: its arguments and its counters.

Each end of the veth pair holds one ``netem`` qdisc on its egress, and the
link made of them is the one the spec describes, as the tun backend models
it (docs/NETEM.md#the-tc-backend):

- netem's ``limit`` counts every packet the qdisc holds, those still in the
  delay line too; at the rate, one way holds ``rate x one_way`` of them, so
  the limit is the queue plus that, and the drop-tail queue holds QUEUE
  packets whatever the RTT;
- the rate charges each packet its IP size, as the tun backend does: the
  packet overhead -14 takes off the Ethernet header the veth adds;
- netem sorts its delay line by release time, so jitter reorders packets
  unless a rate keeps the release times in order: without a rate, jitter
  comes with one far above any link's (100 Gbit/s).
"""

from __future__ import annotations

import math
import re

from .namespaces import Names, run
from .spec import MTU, LinkSpec

ETHERNET_HEADER = 14
UNLIMITED_LIMIT = 1_000_000  # no bottleneck: the limit only has to hold what is in flight
ORDER_KEEPING_RATE = 100e9


def delay_line_packets(spec: LinkSpec) -> int:
    """Full-size packets one direction holds in flight at the rate (its longest delay)."""
    return math.ceil(spec.rate * (spec.one_way + spec.jitter) / (8 * MTU))


def netem_limit(spec: LinkSpec) -> int:
    if not spec.rate:
        return UNLIMITED_LIMIT
    return spec.queue_packets + delay_line_packets(spec)


def netem_args(spec: LinkSpec) -> list[str]:
    """What follows ``tc qdisc add dev DEV root netem`` on each end."""
    args = ["limit", str(netem_limit(spec)), "delay", f"{spec.one_way * 1e6:.0f}us"]
    if spec.jitter:
        args.append(f"{spec.jitter * 1e6:.0f}us")
    if spec.loss:
        args += ["loss", f"{spec.loss * 100:.6f}%"]
    rate = spec.rate or (ORDER_KEEPING_RATE if spec.jitter else 0)
    if rate:
        args += ["rate", f"{int(rate)}bit", str(-ETHERNET_HEADER)]
    return args


_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+),")
_BACKLOG = re.compile(r"backlog (\d+(?:\.\d+)?)([KMG]?)b (\d+)p")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_qdisc_stats(text: str) -> dict | None:
    """The first netem qdisc's counters in ``tc -s qdisc show dev DEV``, or None."""
    start = text.find("qdisc netem ")
    if start < 0:
        return None
    sent, backlog = _SENT.search(text, start), _BACKLOG.search(text, start)
    if not sent or not backlog:
        return None
    return {
        "bytes": int(sent.group(1)), "packets": int(sent.group(2)), "dropped": int(sent.group(3)),
        "backlog_bytes": int(float(backlog.group(1)) * _UNITS[backlog.group(2)]),
        "backlog_packets": int(backlog.group(3)),
    }


def direction_stats(counters: dict, *, loss: float, rate: float) -> dict:
    """One direction's counters in the tun backend's terms (shaper.DirectionStats).

    netem counts random loss and a full queue in one figure, ``dropped``:
    without loss every drop is the queue's, without a rate every drop is a
    loss (the limit is never reached), and with both the split is unknown
    (None)."""
    dropped = counters["dropped"]
    lost: int | None
    queue_drops: int | None
    if not loss:
        lost, queue_drops = 0, dropped
    elif not rate:
        lost, queue_drops = dropped, 0
    else:
        lost = queue_drops = None
    packets = counters["packets"]
    return {
        "packets_in": packets + dropped + counters["backlog_packets"],
        "lost": lost,
        "queue_drops": queue_drops,
        "dropped": dropped,
        "packets_out": packets,
        "bytes_out": counters["bytes"] - ETHERNET_HEADER * packets,  # IP bytes, as the tun backend counts
        "backlog_bytes": counters["backlog_bytes"],
    }


def read_stats(names: Names, *, loss: float, rate: float) -> dict:
    """A two-node link's counters, read from the kernel now: c2s is the client
    end's qdisc (its egress), s2c the server end's.  A direction whose qdisc
    is gone (the link is being removed) is left out."""
    out: dict = {"backend": "tc"}
    for direction, side in (("c2s", "client"), ("s2c", "server")):
        counters = _qdisc_counters(names.ns(side), names.dev(side))
        if counters is not None:
            out[direction] = direction_stats(counters, loss=loss, rate=rate)
    return out


def read_wire_stats(links: list[dict]) -> dict:
    """Every direction's counters of a link or topology, from its state's
    ``links`` (plan.NetPlan.wire_entries): each direction is its sender's qdisc."""
    out: dict = {"backend": "tc"}
    for link in links:
        spec = link["spec"]
        for direction, where in link["directions"].items():
            counters = _qdisc_counters(where["namespace"], where["device"])
            if counters is not None:
                out[direction] = direction_stats(counters, loss=spec["loss"], rate=spec["rate"])
    return out


def _qdisc_counters(ns: str, dev: str) -> dict | None:
    proc = run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], check=False)
    return parse_qdisc_stats(proc.stdout) if proc.returncode == 0 else None
