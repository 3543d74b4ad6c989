"""`drsftp bench netem`: how faithful and fast the emulated link is.

Idle RTT (ping) against the setting; TCP goodput (iperf3) through a
rate-limited link against the goodput ceiling; unlimited throughput at
100 ms; loss measured against the setting; queue drops counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

from rich.console import Console
from rich.table import Table

from ..netem.errors import NetemError
from ..netem.link import Link, wait_for_port


def _ping(link: Link, count: int, interval: float) -> tuple[float, float | None]:
    r = link.run("client", ["ping", "-q", "-c", str(count), "-i", str(interval), "-W", "2", link.server_addr],
                 timeout=count * interval + 30)
    lost = re.search(r"([\d.]+)% packet loss", r.stdout)
    if lost is None:
        raise NetemError(f"ping printed no loss figure: {r.stdout.strip()[-200:]!r}")
    loss = float(lost.group(1)) / 100
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", r.stdout)
    return loss, float(m.group(2)) if m else None


def _iperf(link: Link, seconds: int, cc: str | None = None) -> tuple[float, int]:
    link.popen("server", ["iperf3", "-s", "-1", "-B", link.server_addr],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(link, "server", 5201)
    args = ["iperf3", "-c", link.server_addr, "-t", str(seconds), "-O", "3", "-J"]
    if cc:
        args += ["-C", cc]
    r = link.run("client", args, timeout=seconds + 60)
    d = json.loads(r.stdout)
    return d["end"]["sum_received"]["bits_per_second"], d["end"]["sum_sent"].get("retransmits", 0)


def run_netem_check(outdir: str, quick: bool = False) -> int:
    console = Console()
    rows = []
    wmem = {"net.ipv4.tcp_wmem": "4096 16384 67108864", "net.ipv4.tcp_rmem": "4096 131072 67108864"}
    for rtt in (0.0005, 0.025, 0.1):
        with Link(rtt=rtt, rate=100e6) as link:
            _ping(link, 3, 0.05)
            _, avg = _ping(link, 30, 0.05)
            if avg is None:
                raise NetemError("ping measured no RTT on the emulated link")
            err = abs(avg / 1000 - rtt)
            rows.append(("idle RTT", f"{rtt * 1000:g} ms", f"{avg:.3f} ms",
                         f"{err * 1000:.3f} ms ({'ok' if err <= max(0.001, 0.02 * rtt) else 'OFF'})", link.backend))
    for rate, rtt in ((100e6, 0.1), (1e9, 0.1), (100e6, 0.02)):
        with Link(rtt=rtt, rate=rate, sysctls=wmem) as link:
            for cc in ("bbr", "reno"):
                got, retr = _iperf(link, 8 if quick else 15, cc)
                ceiling = rate * 1448 / 1500
                rows.append((f"goodput {cc}", f"{rate / 1e6:g} Mbit/s, {rtt * 1000:g} ms",
                             f"{got / 1e6:.1f} Mbit/s", f"{100 * got / ceiling:.1f}% of {ceiling / 1e6:.1f} "
                             f"({retr} retransmits)", link.backend))
                time.sleep(0.5)
            st = link.stats()
            rows.append(("queue drops", f"{rate / 1e6:g} Mbit/s, {rtt * 1000:g} ms", f"{st['c2s']['queue_drops']}",
                         f"of {st['c2s']['packets_in']} segments", link.backend))
    with Link(rtt=0.1, rate=0, sysctls=wmem) as link:
        got, retr = _iperf(link, 8 if quick else 15, "bbr")
        rows.append(("unlimited", "100 ms", f"{got / 1e9:.2f} Gbit/s", f"{retr} retransmits", link.backend))
    for loss in (0.001, 0.01):
        with Link(rtt=0.002, rate=0, loss=loss, seed=1) as link:
            n = 4000
            ploss, _ = _ping(link, n, 0.002)
            time.sleep(0.7)
            st = link.stats()
            seg = (st["c2s"]["lost"] + st["s2c"]["lost"]) / max(1, st["c2s"]["packets_in"] + st["s2c"]["packets_in"])
            rows.append(("loss", f"{loss * 100:g}% each way", f"ping {ploss * 100:.2f}% round trip",
                         f"expected {100 * (1 - (1 - loss) ** 2):.2f}%; counters {seg * 100:.3f}% per way",
                         link.backend))
    table = Table(title="Emulated link fidelity (tun backend: GSO super-packets)")
    for col in ("what", "setting", "measured", "vs setting", "backend"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    console.print(table)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "netem.json"), "w") as f:
        json.dump([dict(zip(("what", "setting", "measured", "vs_setting", "backend"), r)) for r in rows], f, indent=1)
    return 0
