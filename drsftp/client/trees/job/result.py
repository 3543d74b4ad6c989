"""What a dataset job leaves: an outcome per entry, the job's result, its
summary line and its --json record (docs/DATASETS.md, "What a job does"
step 4, "--json"), and the report that records each outcome as it comes
and shows it (drsftp.client.trees.job.view)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...result import TransferResult
from ...transfer.progress import human_bits, human_bytes
from .view import JobView


@dataclass
class FileOutcome:
    """What became of one entry of a job: a file moved, skipped, deleted,
    or one that failed (and why)."""

    path: str  # destination path
    status: str  # ok, failed, skipped, deleted
    result: TransferResult | None = None
    error: str | None = None

    def as_dict(self) -> dict:
        """Its --json record: an ``ok`` one carries the single-file record's
        fields without its timeline."""
        d = {"path": self.path, "status": self.status, "error": self.error}
        if self.result is not None:
            r = self.result.to_dict()
            r.pop("timeline", None)
            d.update(r, path=self.path, remote=self.result.path)
        return d


@dataclass
class JobResult:
    direction: str
    outcomes: list[FileOutcome] = field(default_factory=list)
    seconds: float = 0.0
    sessions_max: int = 0
    stopped: bool = False  # at --max-time: files still moving were left as they were (.part)

    @property
    def bytes(self) -> int:
        return sum(o.result.bytes for o in self.outcomes if o.result is not None)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def summary_line(self) -> str:
        rate = self.bytes * 8 / self.seconds if self.seconds > 0 else 0.0
        return (f"{self.direction}: {self.count('ok')} files, {human_bytes(self.bytes)} in {self.seconds:.2f} s"
                f" = {human_bits(rate)}; {self.count('skipped')} skipped, {self.count('deleted')} deleted,"
                f" {self.count('failed')} failed; up to {self.sessions_max} sessions")

    def as_dict(self) -> dict:
        """The --json record of the whole job."""
        return {"direction": self.direction, "seconds": round(self.seconds, 4), "bytes": self.bytes,
                "sessions_max": self.sessions_max, "stopped": self.stopped,
                "files": [o.as_dict() for o in self.outcomes]}


class JobReport:
    """A job's outcomes as they come: each recorded in its result and
    shown by its view (a line per file with -v, failures always)."""

    def __init__(self, direction: str, progress: bool | None, verbose: int) -> None:
        self.result = JobResult(direction)
        self.view = JobView(direction, progress, verbose)

    def record(self, outcome: FileOutcome) -> None:
        self.result.outcomes.append(outcome)
        r = outcome.result
        self.view.file_line(outcome.status, outcome.path, r.bytes if r else 0, r.seconds if r else 0.0,
                            outcome.error)

    def fail(self, path: str, error: str) -> None:
        self.record(FileOutcome(path, "failed", error=error))

    def note(self, path: str, why: str, *, verbose_only: bool = False) -> None:
        """An entry left out that is no outcome of the job (a directory
        seen before; with -v a symlink), said on stderr."""
        if self.view.verbose or not verbose_only:
            self.view.file_line("skipped", path, 0, 0, why)
