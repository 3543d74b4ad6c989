"""Samples the data connection at both ends with `ss -tmi`, for any peer.

The same numbers for every tuning, stock programs included: socket buffer
sizes (skmem rb/tb), their use, cwnd, bytes in flight, RTT, retransmits.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import threading
import time

_KV = re.compile(r"(\w+):(\S+)")
_SKMEM = re.compile(r"skmem:\((.*?)\)")
_USERS = re.compile(r"\s+users:\((.*)\)\s*$")  # `ss -p`: the processes holding the socket
_PID = re.compile(r"pid=(\d+)")


def parse_ss(text: str, skip_port: int | None = None) -> list[dict]:
    """Sockets from `ss -tmiHn` output (header line + indented detail line);
    with `-p`, each socket's ``pids`` too."""
    out, head = [], None
    pids: list[int] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            users = _USERS.search(line)
            pids = [int(p) for p in _PID.findall(users.group(1))] if users else None
            head = (line[:users.start()] if users else line).split()
            continue
        if head is None or len(head) < 4:
            continue
        local, peer = head[-2], head[-1]
        if skip_port and (local.endswith(f":{skip_port}") or peer.endswith(f":{skip_port}")):
            head = None
            continue
        d: dict = {"local": local, "peer": peer}
        if pids is not None:
            d["pids"] = pids
        m = _SKMEM.search(line)
        if m:
            for part in m.group(1).split(","):
                k = part.rstrip("0123456789")
                d["sk_" + k] = int(part[len(k):] or 0)
        for k, v in _KV.findall(_SKMEM.sub("", line)):
            if k == "rtt":
                d["rtt_ms"] = float(v.split("/")[0])
            elif k == "retrans":
                d["retrans"] = int(v.split("/")[-1])
            elif k in ("cwnd", "mss", "unacked", "bytes_acked", "bytes_received", "snd_wnd",
                       "rcv_space", "bytes_sent", "notsent"):
                try:
                    d[k] = int(v)
                except ValueError:
                    pass
        out.append(d)
        head = None
    return out


# Kernel counters (/proc/net/netstat, /proc/net/snmp) kept per run: what
# receive-queue pruning, SACK reneging and timeouts did, which `ss` cannot see.
TCP_COUNTERS = (
    "Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "TcpExt.TCPSpuriousRTOs",
    "TcpExt.TCPFastRetrans", "TcpExt.TCPSlowStartRetrans", "TcpExt.TCPSACKReneging",
    "TcpExt.PruneCalled", "TcpExt.RcvPruned", "TcpExt.OfoPruned", "TcpExt.TCPRcvCollapsed",
    "TcpExt.TCPOFOQueue", "TcpExt.TCPOFODrop", "TcpExt.TCPRcvQDrop", "TcpExt.TCPZeroWindowDrop",
    "TcpExt.TCPWantZeroWindowAdv", "TcpExt.TCPToZeroWindowAdv", "TcpExt.TCPBacklogDrop",
)


def parse_counters(text: str) -> dict[str, int]:
    """`Group.Name -> value` from /proc/net/netstat or /proc/net/snmp text
    (each group is a header line of names followed by a line of values)."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for names, values in itertools.pairwise(lines):
        n, v = names.split(), values.split()
        if len(n) < 2 or len(n) != len(v) or n[0] != v[0] or not n[0].endswith(":"):
            continue
        if not all(x.lstrip("-").isdigit() for x in v[1:]) or any(x.lstrip("-").isdigit() for x in n[1:]):
            continue
        group = n[0][:-1]
        for name, value in zip(n[1:], v[1:]):
            out[f"{group}.{name}"] = int(value)
    return out


def counter_delta(before: dict[str, int], after: dict[str, int], keys=TCP_COUNTERS) -> dict[str, int]:
    """The counters among ``keys`` that moved between two readings."""
    return {k: after[k] - before.get(k, 0) for k in keys if k in after and after[k] != before.get(k, 0)}


class Sampler:
    """Polls one namespace every ``interval`` seconds in a thread (bounded)."""

    def __init__(self, ns_prefix: list[str], control_port: int, interval: float = 0.1,
                 max_samples: int = 20000) -> None:
        self.cmd = [*ns_prefix, "ss", "-tmiHn", "state", "established"]
        self.control_port = control_port
        self.interval = interval
        self.max_samples = max_samples
        self.samples: list[tuple[float, list[dict]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.samples) < self.max_samples:
            try:
                text = subprocess.run(self.cmd, capture_output=True, text=True, timeout=5).stdout
            except (subprocess.TimeoutExpired, OSError):
                text = ""
            socks = parse_ss(text, self.control_port)
            if socks:
                self.samples.append((time.monotonic() - self.t0, socks))
            self._stop.wait(self.interval)

    # -- summaries ---------------------------------------------------------
    def peak(self, key: str) -> int | None:
        vals: list[int] = [s[key] for _, socks in self.samples for s in socks if s.get(key) is not None]
        return max(vals) if vals else None

    def moved(self) -> int:
        """Bytes the busiest data socket has moved, at the latest sample."""
        if not self.samples:
            return 0
        return max(s.get("bytes_acked", 0) + s.get("bytes_received", 0) for s in self.samples[-1][1])

    def timeline(self) -> list[dict]:
        """One row per sample, for the busiest data socket at that moment."""
        rows, last = [], None
        for t, socks in self.samples:
            s = max(socks, key=lambda d: d.get("bytes_acked", 0) + d.get("bytes_received", 0))
            moved = s.get("bytes_acked") or s.get("bytes_received") or 0
            rate = None
            if last and t > last[0]:
                rate = (moved - last[1]) * 8 / (t - last[0])
            last = (t, moved)
            mss = s.get("mss") or 0
            rows.append({
                "t": round(t, 3),
                "rate_bps": rate,
                "rtt_ms": s.get("rtt_ms"),
                "cwnd_bytes": s.get("cwnd", 0) * mss if mss else None,
                "in_flight_bytes": s.get("unacked", 0) * mss if mss else None,
                "rcvbuf": s.get("sk_rb"),
                "sndbuf": s.get("sk_tb"),
                "peer_window": s.get("snd_wnd"),
                # memory in use (skmem w at a sender, r at a receiver) and unsent data
                "snd_used": s.get("sk_w"),
                "rcv_used": s.get("sk_r"),
                "notsent_bytes": s.get("notsent"),
            })
        return rows
