"""What a person sees of a dataset job: one live bar for the whole job
(files done of total, bytes, rate, sessions, RTT), a line per file with
-v, and a summary line at the end."""

from __future__ import annotations

import sys

from ...transfer.progress import human_bits, human_bytes

# control characters in a name shown escaped: one line per file stays one line
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127)}


def shown(path: str) -> str:
    """``path`` for a terminal: control characters (a CR or LF in a file
    name) as \\xNN."""
    return path.translate(_CONTROL)


class JobView:
    def __init__(self, label: str, enabled: bool | None = None, verbose: int = 0) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.verbose = verbose
        self._progress = None
        if self.enabled:
            # rich only when a bar is shown (progress.py)
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                TextColumn("{task.fields[stats]}"), TimeRemainingColumn(),
                console=Console(stderr=True, highlight=False), transient=False)
            self._task = self._progress.add_task(label, total=None, stats="")
            self._progress.start()

    def update(self, *, files_done: int, files_total: int, done: int, total: int | None,
               rate_bps: float, sessions: int, rtt: float | None) -> None:
        if not self._progress:
            return
        rtt_s = f"{rtt * 1000:.1f} ms" if rtt else "-"
        self._progress.update(
            self._task, completed=done, total=total,
            stats=f"{files_done}/{files_total} files  {human_bits(rate_bps)}  x{sessions}  rtt {rtt_s}")

    def file_line(self, status: str, path: str, nbytes: int, seconds: float, error: str | None) -> None:
        """One line per file with -v; failures always, as the single-file
        path prints its failure ("drsftp: error: ..."), and notes of a skip."""
        if status == "failed":
            self._print(f"drsftp: error: {shown(path)}: {error or 'failed'}")
        elif error is not None:
            self._print(f"drsftp: {shown(path)}: {error}")
        elif self.verbose:
            rate = nbytes * 8 / seconds if seconds > 0 else 0.0
            extra = f" {human_bytes(nbytes)} in {seconds:.2f} s = {human_bits(rate)}" if status == "ok" else ""
            self._print(f"{status} {shown(path)}{extra}")

    def _print(self, text: str) -> None:
        if self._progress:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
            self._progress = None
