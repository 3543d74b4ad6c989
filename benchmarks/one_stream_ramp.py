"""One stream, DRS against autotuning at the client, on the default host:
where does each spend its time?

    python benchmarks/one_stream_ramp.py 3   # 3 pairs, alternating which goes first

Downloads of 512 MiB over an emulated 1 Gbit/s, 100 ms link (root) from
one `drsftp serve` (its sender tuning the same for both), `drsftp get
--tuning drs` against `--tuning kernel`.  The server's data socket is
sampled with `ss -tmi` every 50 ms; each run prints its wall clock, the
megabytes received 0.5-5 s after the first byte, and how long the sender
was held by the receiver's window (`rwnd_limited`) and by its own send
buffer (`sndbuf_limited`).  docs/decisions/0027-one-stream-at-the-senders-cap.md
cites it.
"""

import re
import subprocess
import sys
import tempfile
import time

from drsftp.bench.common.tunings import PORT, drsftp_url, serving
from drsftp.netem.link import Link

MARKS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0)  # seconds after the first byte


def _ss(link: Link, node: str, port_filter: list[str]) -> str:
    return link.run(node, ["ss", "-tmiHn", "state", "established", *port_filter], timeout=5).stdout


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def run(tuning: str, link: Link, root: str) -> None:
    t0 = time.monotonic()
    client = link.popen("client", [sys.executable, "-m", "drsftp", "get", "-q",
                                   drsftp_url(link.server_addr, "z.bin"), f"{root}/out.bin",
                                   "--tuning", tuning, "--max-time", "60"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []  # (t, bytes received, rwnd-limited ms, sndbuf-limited ms)
    while client.poll() is None and time.monotonic() - t0 < 90:
        c = _ss(link, "client", ["(", "dport", "!=", f":{PORT}", ")"])
        s = _ss(link, "server", ["(", "sport", "!=", f":{PORT}", ")"])
        rows.append((time.monotonic() - t0, _num(r"bytes_received:(\d+)", c),
                     _num(r"rwnd_limited:(\d+)ms", s), _num(r"sndbuf_limited:(\d+)ms", s)))
        time.sleep(0.05)
    client.wait(30)
    wall = time.monotonic() - t0
    started = [r for r in rows if r[1]]
    if not started:
        print(f"{tuning:6s} no data seen (exit {client.returncode})")
        return
    first = started[0][0]
    at = [min(started, key=lambda r, m=m: abs(r[0] - first - m))[1] / 1e6 for m in MARKS]
    rwnd = max((r[2] or 0 for r in rows), default=0)
    sndbuf = max((r[3] or 0 for r in rows), default=0)
    print(f"{tuning:6s} wall {wall:6.2f} s  MB at {'/'.join(f'{m:g}' for m in MARKS)} s: "
          f"{' '.join(f'{x:6.1f}' for x in at)}  rwnd-limited {rwnd:5.0f} ms  sndbuf-limited {sndbuf:5.0f} ms",
          flush=True)


def main(pairs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="drs-onestream-") as root:
        with open(f"{root}/z.bin", "wb") as f:
            f.truncate(512 << 20)
        with Link(rtt=0.1, rate=1e9) as link, serving(link, root):
            for i in range(pairs):
                for tuning in (("drs", "kernel") if i % 2 == 0 else ("kernel", "drs")):
                    run(tuning, link, root)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
