"""One bench run: a :class:`~drsftp.client.result.TransferResult` as the bench
measured it, with what ran and where.  ``timeline`` holds the sender's
`ss` samples and ``receiver_timeline`` the receiver's; ``client_report``
and ``client_timeline`` keep what a drsftp client reported itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...client.result import TransferResult


@dataclass(kw_only=True)
class BenchRun(TransferResult):
    rep: int = 0
    profile: str = "default"  # host profile (common.host.PROFILES)
    rate_bps: float = 0.0  # the emulated path
    rtt_s: float = 0.0
    loss: float = 0.0
    ceiling_mbps: float = 0.0  # TCP goodput of the line (tunings.Path.ceiling_mbps)
    file_size: int | None = None
    probe_size: int | None = None  # probe-static's measured size
    commit: str | None = None  # the drsftp code measured
    link: dict[str, Any] = field(default_factory=dict)
    server_cpu_s: float | None = None
    client_cpu_s: float | None = None
    first_block_s: float | None = None  # stock ftplib: how long its first block took
    tcp_counters: dict[str, dict[str, int]] = field(default_factory=dict)
    peak_rcv_used: int | None = None  # skmem r at the receiver
    peak_snd_used: int | None = None  # skmem w at the sender
    receiver_timeline: list[dict[str, Any]] = field(default_factory=list)
    client_report: dict[str, Any] | None = None
    client_timeline: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
