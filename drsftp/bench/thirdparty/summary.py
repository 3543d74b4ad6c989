"""What one third-party bench run keeps (thirdparty/run.py): the data
sockets at A and B as `ss` saw them, the DRS reports of drsftp's `--json`
(docs/THIRDPARTY.md, "--json"), and B's transfer log lines for an HTTP
copy (docs/HTTP.md, "Third-party copy"), in a few numbers each."""

from __future__ import annotations

import re
import statistics

from ...tuning.wirekeys import CWND, RCVBUF, RTT_US, SNDBUF, STREAMS, WND
from ..common.sampler import Sampler

FIRST_ROWS = 4  # each server's first DRS replies, kept whole: the first decisions


def _sums(sampler: Sampler, key: str) -> list[int]:
    return [sum(s.get(key) or 0 for s in socks) for _, socks in sampler.samples]


def peer_host(sock: dict) -> str:
    """An `ss` peer's address without its port ([::ffff:10.0.0.1]:8443 -> 10.0.0.1)."""
    return sock.get("peer", "").rpartition(":")[0].strip("[]").removeprefix("::ffff:")


def drop_peers(sampler: Sampler, hosts: set[str]) -> None:
    """Leaves out the sockets to ``hosts`` (the client's: an HTTP copy's
    request and macaroon connections share the data's port)."""
    sampler.samples = [(t, kept) for t, socks in sampler.samples
                       if (kept := [s for s in socks if peer_host(s) not in hosts])]


def sockets_summary(s_a: Sampler, s_b: Sampler, started: float, seconds: float, nbytes: int,
                    interval: float, client: set[str] | None = None) -> dict:
    """A sends, B receives (in every entry): the data phase (from the first
    payload byte B's sockets saw to the client's exit), the most all data
    sockets held at once at each end, the kernel's RTT on A's data sockets
    (the median over samples of the least over its busy streams), A's
    retransmits and most streams.  Sockets to ``client`` are not data
    sockets."""
    for s in (s_a, s_b):
        drop_peers(s, client or set())
    first = next((t for t, socks in s_b.samples if sum(x.get("bytes_received") or 0 for x in socks) > 0), None)
    data_s = seconds - max(0.0, first - started - interval / 2) if first is not None else None
    rtts = []
    for _, socks in s_a.samples:
        busy = [s["rtt_ms"] for s in socks if s.get("rtt_ms") and (s.get("bytes_acked") or 0) > 1 << 20]
        if busy:
            rtts.append(min(busy))
    return {"data_seconds": round(data_s, 3) if data_s else None,
            "data_mbps": round(nbytes * 8 / data_s / 1e6, 1) if data_s else None,
            "peak_snd_used": max(_sums(s_a, "sk_w"), default=0), "peak_rcv_used": max(_sums(s_b, "sk_r"), default=0),
            "peak_snd_buf": max(_sums(s_a, "sk_tb"), default=0), "peak_rcv_buf": max(_sums(s_b, "sk_rb"), default=0),
            "ss_rtt_ms": round(statistics.median(rtts), 1) if rtts else None,
            "streams_max": max((len(socks) for _, socks in s_a.samples), default=0),
            "retransmits": max(_sums(s_a, "retrans"), default=0)}


def _median(rows: list[dict], key: str, scale: float = 1.0) -> float | None:
    xs = [r[key] * scale for r in rows if r.get(key)]
    return round(statistics.median(xs), 3) if xs else None


def _max(rows: list[dict], key: str) -> int | None:
    return max((r[key] for r in rows if r.get(key) is not None), default=None)


def _series(d: dict) -> tuple[list[dict], list[dict]]:
    servers = d.get("servers") or {}
    return list(servers.get("source") or []), list(servers.get("destination") or [])


def copy_summary(d: dict) -> dict:
    """A drsftp client's --json in brief: for a copy both servers' DRS
    replies (A's RTT, cwnd and send buffer; B's window and receive buffer;
    the first few replies whole) and -P auto's decisions; for a get the
    client's own RTT; for a tree (``files``) the per-file figures."""
    if isinstance(d.get("files"), list):
        return _tree_summary(d)
    out = {k: d.get(k) for k in ("direction", "mode", "streams", "parallel", "streams_start", "data_rtt_first_ms",
                                 "rtt_min_ms", "rtt_avg_ms", "note", "relayed") if d.get(k) is not None}
    out["stream_changes"] = (d.get("stream_changes") or [])[:8]
    src, dst = _series(d)
    if src or dst:
        out.update(source_rtt_ms=_median(src, RTT_US, 1e-3), source_cwnd_max=_max(src, CWND),
                   source_sndbuf_max=_max(src, SNDBUF), source_streams_max=_max(src, STREAMS),
                   dest_rtt_ms=_median(dst, RTT_US, 1e-3), dest_wnd_max=_max(dst, WND),
                   dest_rcvbuf_max=_max(dst, RCVBUF), reports=[len(src), len(dst)],
                   first_reports={"source": src[:FIRST_ROWS], "destination": dst[:FIRST_ROWS]})
    return out


def _tree_summary(d: dict) -> dict:
    files = [f for f in d["files"] if isinstance(f, dict)]
    ok = [f for f in files if f.get("status") == "ok"]
    src = [row for f in ok for row in _series(f)[0]]
    dst = [row for f in ok for row in _series(f)[1]]
    secs = [f["seconds"] for f in ok if isinstance(f.get("seconds"), (int, float))]
    return {"direction": d.get("direction"), "files": len(files), "ok": len(ok),
            "cached": sum(1 for f in ok if f.get("cached")), "sessions_max": d.get("sessions_max"),
            "mode": next((f.get("mode") for f in ok if f.get("mode")), None),
            "file_seconds_median": round(statistics.median(secs), 3) if secs else None,
            "file_seconds_max": round(max(secs), 3) if secs else None,
            "source_rtt_ms": _median(src, RTT_US, 1e-3), "dest_rtt_ms": _median(dst, RTT_US, 1e-3),
            "dest_wnd_max": _max(dst, WND), "rtt_min_ms": _median(ok, "rtt_min_ms")}


_FIELD = re.compile(r"(\w+)=(\S+)")


def server_lines(path: str, offset: int) -> dict:
    """B's transfer log lines from ``offset`` on (`drsftp serve`: one per
    COPY it pulled): how many, the streams each used, how many exchanged
    DRS reports with A (drs_peer=yes), the median seconds of one."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read(1 << 22).decode(errors="replace")
    except OSError:
        return {}
    rows = [dict(_FIELD.findall(line)) for line in text.splitlines() if " transfer " in line and "remote=" in line]
    secs = [float(r["seconds"]) for r in rows if r.get("seconds", "").replace(".", "", 1).isdigit()]
    return {"copies": len(rows), "streams": sorted({int(r["streams"]) for r in rows if r.get("streams", "").isdigit()}),
            "drs_peer": sum(1 for r in rows if r.get("drs_peer") == "yes"),
            "complete": sum(1 for r in rows if r.get("complete") == "yes"),
            "seconds_median": round(statistics.median(secs), 3) if secs else None}
