"""One client's figures from what it left: drsftp's and the stock client's
--json record, curl's -w output."""

from __future__ import annotations

import json

from ...client.result import TransferResult


def client_figures(kind, code, stdout, stderr, out_json, direction) -> dict:
    if kind == "curl":
        try:
            d = json.loads(stdout.decode() or "{}")
        except ValueError:
            d = {}
        moved = d.get("size_download" if direction == "get" else "size_upload", 0) or 0
        start = d.get("time_starttransfer" if direction == "get" else "time_pretransfer", 0) or 0
        seconds = max((d.get("time_total") or 0) - start, 1e-9)
        if code not in (0, 28):
            return {"error": f"curl exit {code}: {stderr.decode(errors='replace').strip()[-200:]}"}
        return {"bytes": moved, "seconds": seconds, "mbps": moved * 8 / seconds / 1e6, "complete": code == 0}
    try:
        with open(out_json) as f:
            t = TransferResult.from_dict(json.load(f))  # the client's own record (drsftp --json, stockclient)
    except (OSError, ValueError, TypeError):
        return {"error": f"client exit {code}: {stderr.decode(errors='replace').strip()[-300:]}"}
    fig: dict = {"bytes": t.bytes, "seconds": t.seconds, "mbps": t.mbps, "complete": t.complete}
    if t.extra.get("first_block_s") is not None:  # stock ftplib: how long its first block took to go
        fig["first_block_s"] = t.extra["first_block_s"]
    if kind == "drsftp":
        fig.update(client_report={"tuning": t.tuning, "rtt_min_ms": t.rtt_min_ms, "rtt_avg_ms": t.rtt_avg_ms,
                                  "rtt_max_ms": t.rtt_max_ms, "retransmits": t.retransmits,
                                  "peak_rcvbuf": t.peak_rcvbuf, "peak_sndbuf": t.peak_sndbuf,
                                  "drs_replies": t.drs_replies, "kernel_owns": t.kernel_owns,
                                  "handshake_window": t.handshake_window},
                   client_timeline=t.timeline)
        if t.extra.get("parallel") == "auto":  # -P auto: its first streams and when it changed them
            fig.update(streams_start=t.extra.get("streams_start"), stream_changes=t.extra.get("stream_changes"))
    return fig
