"""`drsftp netemcheck`: how faithful and fast the emulated link is.

Idle RTT (ping) against the setting; on each rate-limited path, TCP goodput
(iperf3) against the goodput ceiling and the queue's delay (pings while a
UDP flood keeps the queue full) against the queue the spec sets; on a path
without a rate, the throughput the emulator carries; random loss (ping)
against the setting. Each measure is judged against its tolerance
(docs/NETEM.md#fidelity-measured); the exit status is 1 when one is off.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass

from rich.console import Console
from rich.table import Table

from ...netem.errors import NetemError
from ...netem.link import Link, wait_for_port
from ...netem.spec import MTU, LinkSpec

IDLE_RATE = 100e6
WMEM = {"net.ipv4.tcp_wmem": "4096 16384 67108864", "net.ipv4.tcp_rmem": "4096 131072 67108864"}
# Tolerances (docs/NETEM.md#fidelity-measured)
RTT_TOLERANCE = (0.001, 0.02)  # max(1 ms, 2%)
GOODPUT_RANGE = {"reno": (0.97, 1.02), "cubic": (0.97, 1.02), "bbr": (0.95, 1.02)}  # of the ceiling; bbr
# paces 1% under its estimate and drains to 4 packets for 200 ms every 10 s (PROBE_RTT)
QUEUE_TOLERANCE = (0.002, 0.10)  # 2 ms + 10% of the queue's delay
LOSS_SIGMAS = 4.5


@dataclass
class Check:
    what: str
    setting: str
    measured: str
    vs_setting: str
    backend: str
    ok: bool | None  # None: counted, not judged
    value: float | None = None  # the measure in SI units (s, bit/s, fraction)
    expected: float | None = None


@dataclass(frozen=True)
class CheckPlan:
    rtts: list[float]
    paths: list[tuple[float, float]]  # (rate bit/s, rtt s); rate 0: no rate limit
    losses: list[float]
    backend: str = "auto"
    ccs: tuple[str, ...] = ("bbr", "reno")  # goodput with each; a path without a rate, the first
    seconds: int = 15  # each iperf3 run, after its omitted start
    loss_pings: int = 4000


def ceiling(rate: float) -> float:
    """TCP goodput of a rate: 1448 payload bytes per 1500-byte IP packet (timestamps on)."""
    return rate * (MTU - 52) / MTU


def queue_delay(rate: float, queue_packets: int) -> float:
    """How long a full drop-tail queue of full-size packets takes to drain."""
    return queue_packets * MTU * 8 / rate


def _ping(link: Link, count: int, interval: float) -> tuple[float, list[float]]:
    """Loss and the round trips (s) of one ping run from the client."""
    limit = 3 * count * interval + 30  # a slow machine sends late
    try:
        r = link.run("client", ["ping", "-c", str(count), "-i", str(interval), "-W", "2", link.server_addr],
                     timeout=limit)
    except subprocess.TimeoutExpired:
        raise NetemError(f"{count} pings {interval * 1000:g} ms apart took over {limit:g} s") from None
    lost = re.search(r"([\d.]+)% packet loss", r.stdout)
    if lost is None:
        raise NetemError(f"ping printed no loss figure: {r.stdout.strip()[-200:]!r}")
    return float(lost.group(1)) / 100, [float(x) / 1000 for x in re.findall(r"time=([\d.]+) ms", r.stdout)]


def _iperf(link: Link, seconds: int, cc: str) -> tuple[float, int]:
    link.popen("server", ["iperf3", "-s", "-1", "-B", link.server_addr],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(link, "server", 5201)
    args = ["iperf3", "-c", link.server_addr, "-t", str(seconds), "-O", "3", "-J", "-C", cc]
    try:
        r = link.run("client", args, timeout=seconds + 60)
        d = json.loads(r.stdout)
        return d["end"]["sum_received"]["bits_per_second"], d["end"]["sum_sent"].get("retransmits", 0)
    except subprocess.TimeoutExpired:
        raise NetemError(f"iperf3 ({cc}) did not end within {seconds + 60} s") from None
    except (ValueError, KeyError):
        raise NetemError(f"iperf3 ({cc}) failed: {(r.stdout + r.stderr).strip()[-200:]!r}") from None


def _label(rate: float, rtt: float) -> str:
    if not rate:
        return f"no rate limit, {rtt * 1000:g} ms"
    return f"{rate / 1e6:g} Mbit/s, {rtt * 1000:g} ms"


def check_idle_rtt(plan: CheckPlan, rtt: float) -> Check:
    with Link(rtt=rtt, rate=IDLE_RATE, backend=plan.backend) as link:
        _ping(link, 3, 0.05)  # warm up
        _, rtts = _ping(link, 30, 0.05)
        if not rtts:
            raise NetemError("ping measured no RTT on the emulated link")
        avg = sum(rtts) / len(rtts)
        err = avg - rtt
        ok = abs(err) <= max(RTT_TOLERANCE[0], RTT_TOLERANCE[1] * rtt)
        return Check("idle RTT (ping, 30)", f"{rtt * 1000:g} ms", f"{avg * 1000:.3f} ms",
                     f"{err * 1000:+.3f} ms", link.backend, ok, avg, rtt)


def check_path(plan: CheckPlan, rate: float, rtt: float) -> list[Check]:
    """Goodput with each congestion control; the queue's delay and drops under a flood."""
    out = []
    with Link(rtt=rtt, rate=rate, sysctls=WMEM, backend=plan.backend) as link:
        label = _label(rate, rtt)
        if not rate:
            got, retr = _iperf(link, plan.seconds, plan.ccs[0])
            return [Check(f"throughput, {plan.ccs[0]}", label, f"{got / 1e9:.2f} Gbit/s", f"{retr} retransmits",
                          link.backend, None, got)]
        for cc in plan.ccs:
            got, retr = _iperf(link, plan.seconds, cc)
            out.append(_goodput(cc, label, got, retr, rate, link.backend))
            time.sleep(0.5)
        out.append(_queue(link, label, rtt, rate))
        time.sleep(0.7)  # the owner writes its counters every 0.5 s
        c2s = link.stats().get("c2s", {})
        out.append(Check("queue drops (flood included)", label, f"{c2s.get('queue_drops')}",
                         f"of {c2s.get('packets_in')} packets", link.backend, None, c2s.get("queue_drops")))
    return out


def _goodput(cc: str, label: str, got: float, retr: int, rate: float, backend: str) -> Check:
    top = ceiling(rate)
    low, high = GOODPUT_RANGE[cc]
    ok = low * top <= got <= high * top
    return Check(f"goodput, {cc} (iperf3)", label, f"{got / 1e6:.1f} Mbit/s",
                 f"{100 * got / top:.1f}% of {top / 1e6:.1f} ({retr} retransmits)", backend, ok, got, top)


def _queue(link: Link, label: str, rtt: float, rate: float) -> Check:
    """A UDP flood at 1.25x the rate keeps the drop-tail queue full (from its
    first queue drop on): every ping then waits the RTT plus a full queue's
    delay.  The median: a reply the machine's scheduler delayed moves a
    maximum, not a median."""
    link.popen("server", ["iperf3", "-s", "-1", "-B", link.server_addr],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(link, "server", 5201)
    drops = _queue_drops(link)
    flood = link.popen("client", ["iperf3", "-c", link.server_addr, "-u", "-b", f"{int(rate * 1.25)}",
                                  "-l", str(MTU - 28), "-t", "60"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while _queue_drops(link) <= drops:
        if time.monotonic() > deadline or flood.poll() is not None:
            raise NetemError("the UDP flood never filled the queue")
        time.sleep(0.1)
    _, times = _ping(link, 60, 0.05)
    flood.terminate()
    flood.wait(timeout=30)
    if not times:
        raise NetemError("no ping came back through the full queue")
    want = queue_delay(rate, link.spec.queue_packets)
    got = sorted(times)[len(times) // 2] - rtt
    ok = abs(got - want) <= QUEUE_TOLERANCE[0] + QUEUE_TOLERANCE[1] * want
    return Check(f"queue delay, full ({link.spec.queue_packets} packets)", label, f"{got * 1000:.1f} ms",
                 f"{100 * got / want:.0f}% of {want * 1000:.1f} ms", link.backend, ok, got, want)


def _queue_drops(link: Link) -> int:
    """The client-to-server queue's drops so far (the tun owner writes them every 0.5 s)."""
    return link.stats().get("c2s", {}).get("queue_drops") or 0


def check_loss(plan: CheckPlan, loss: float) -> Check:
    with Link(rtt=0.002, rate=0, loss=loss, seed=1, backend=plan.backend) as link:
        n = plan.loss_pings
        ploss, _ = _ping(link, n, 0.002)
        expected = 1 - (1 - loss) ** 2  # a round trip crosses the link twice
        sigma = (expected * (1 - expected) / n) ** 0.5
        time.sleep(0.7)
        st = link.stats()
        offered = st["c2s"]["packets_in"] + st["s2c"]["packets_in"]
        seg = (st["c2s"]["lost"] + st["s2c"]["lost"]) / max(1, offered)
        ok = abs(ploss - expected) <= LOSS_SIGMAS * sigma
        return Check(f"loss (ping, {n})", f"{loss * 100:g}% each way", f"{ploss * 100:.2f}% round trip",
                     f"expected {expected * 100:.2f}%; counters {seg * 100:.3f}% per way", link.backend, ok,
                     ploss, expected)


def run_checks(plan: CheckPlan) -> list[Check]:
    checks = [check_idle_rtt(plan, rtt) for rtt in plan.rtts]
    for rate, rtt in plan.paths:
        checks += check_path(plan, rate, rtt)
    checks += [check_loss(plan, loss) for loss in plan.losses]
    return checks


def run_netem_check(outdir: str, plan: CheckPlan) -> int:
    """Measure, print the table, write OUT/netem.json; 1 if a check is off its tolerance."""
    checks = run_checks(plan)
    backends = sorted({c.backend for c in checks})
    table = Table(title=f"Emulated link fidelity ({', '.join(backends)} backend)")
    for col in ("what", "setting", "measured", "vs setting", "verdict"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.what, c.setting, c.measured, c.vs_setting, {True: "ok", False: "OFF", None: ""}[c.ok])
    console = Console()
    console.print(table)
    off = [c for c in checks if c.ok is False]
    console.print(f"{len(off)} of {sum(c.ok is not None for c in checks)} checks off their tolerance")
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "netem.json"), "w") as f:
        json.dump([asdict(c) for c in checks], f, indent=1)
    return 1 if off else 0


def parse_path(text: str, parse_rate, parse_duration) -> tuple[float, float]:
    """'100mbit/100ms' -> (rate, rtt), each within the emulator's limits."""
    rate_text, sep, rtt_text = text.partition("/")
    if not sep:
        raise NetemError(f"a path is RATE/RTT, e.g. 100mbit/100ms, not {text!r}")
    rate, rtt = parse_rate(rate_text), parse_duration(rtt_text)
    LinkSpec(rate=rate, rtt=rtt).validate()
    return rate, rtt
