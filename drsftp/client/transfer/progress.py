"""Live progress on a terminal (throughput, RTT, window); silent otherwise."""

from __future__ import annotations

import sys

from ..result import human_bits, human_bytes


class ProgressView:
    def __init__(self, label: str, total: int | None, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress = None
        if self.enabled:
            # rich only when a bar is shown: its import is a tenth of the start-up
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(binary_units=True),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task(label, total=total, stats="")
            self._progress.start()

    def update(self, done: int, rate_bps: float, rtt: float | None, window: int | None) -> None:
        if not self._progress:
            return
        rtt_s = f"{rtt * 1000:.1f} ms" if rtt else "-"
        win_s = human_bytes(window) if window else "-"
        self._progress.update(
            self._task, completed=done, stats=f"{human_bits(rate_bps)}  rtt {rtt_s}  wnd {win_s}"
        )

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
            self._progress = None
