"""What a dataset job leaves: an outcome per entry, the job's result, its
summary line and its --json record (docs/DATASETS.md, "What a job does"
step 4, "--json"), and the report that records each outcome as it comes
and shows it (drsftp.client.trees.job.view)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
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


# outcomes other than failures kept whole, the first ones; the rest are
# counted (and with --json written to its spool as they come): a job's
# memory does not grow with its tree (docs/DATASETS.md, "--json")
KEEP_DONE = 1000


@dataclass
class JobResult:
    """A job's outcomes, summarised: every failure with its reason, the
    first KEEP_DONE others whole, every status counted."""

    direction: str
    outcomes: list[FileOutcome] = field(default_factory=list)  # failures, and the first KEEP_DONE others
    seconds: float = 0.0
    sessions_max: int = 0
    stopped: bool = False  # at --max-time: files still moving were left as they were (.part)
    counts: dict[str, int] = field(default_factory=dict)  # outcomes by status
    entries: int = 0  # outcomes in all
    moved: int = 0  # bytes of the files moved
    spool: JsonSpool | None = None  # --json: every file record, written as it comes
    _kept: int = 0

    def add(self, outcome: FileOutcome) -> None:
        self.entries += 1
        self.counts[outcome.status] = self.counts.get(outcome.status, 0) + 1
        if outcome.result is not None:
            self.moved += outcome.result.bytes
        if self.spool is not None:
            self.spool.write(outcome.as_dict())
        if outcome.status == "failed":
            self.outcomes.append(outcome)
        elif self._kept < KEEP_DONE:
            self._kept += 1
            self.outcomes.append(outcome)

    @property
    def detailed(self) -> bool:
        """Whether the next file's outcome is kept or written whole (else
        only its bytes and time are: a file's full figures cost CPU)."""
        return self.spool is not None or self._kept < KEEP_DONE

    @property
    def bytes(self) -> int:
        return self.moved

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    def summary_line(self) -> str:
        rate = self.bytes * 8 / self.seconds if self.seconds > 0 else 0.0
        return (f"{self.direction}: {self.count('ok')} files, {human_bytes(self.bytes)} in {self.seconds:.2f} s"
                f" = {human_bits(rate)}; {self.count('skipped')} skipped, {self.count('deleted')} deleted,"
                f" {self.count('failed')} failed; up to {self.sessions_max} sessions")

    def head(self) -> dict:
        return {"direction": self.direction, "seconds": round(self.seconds, 4), "bytes": self.bytes,
                "sessions_max": self.sessions_max, "stopped": self.stopped}

    def as_dict(self) -> dict:
        """The --json record of the whole job: the kept outcomes (all of a
        job of up to KEEP_DONE entries; write_json writes every one)."""
        return {**self.head(), "files": [o.as_dict() for o in self.outcomes]}

    def write_json(self, path: str) -> None:
        """The --json record at ``path``: the job's figures, then every
        file's record from the spool (or the kept ones without one),
        streamed: never all in memory."""
        with open(path, "w") as f:
            f.write(json.dumps(self.head(), indent=1)[:-2] + ',\n "files": [')
            records = self.spool.records() if self.spool is not None else (o.as_dict() for o in self.outcomes)
            for n, rec in enumerate(records):
                f.write(("\n  " if n == 0 else ",\n  ") + json.dumps(rec))
            f.write("\n ]\n}\n")
        if self.spool is not None:
            self.spool.close()


class JsonSpool:
    """--json's file records as they come, one JSON line each in an
    unnamed temporary file (gone when closed, or when the process ends)."""

    def __init__(self, folder: str | None = None) -> None:
        try:  # beside the record it becomes (the room it will take is there)
            self.file = tempfile.TemporaryFile("w+", dir=folder, prefix="drs-json-")  # noqa: SIM115 (close())
        except OSError:  # (that folder's error is the record's, said when it is written)
            self.file = tempfile.TemporaryFile("w+", prefix="drs-json-")  # noqa: SIM115

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")

    def records(self) -> Iterator[dict]:
        self.file.flush()
        self.file.seek(0)
        for line in self.file:
            yield json.loads(line)

    def close(self) -> None:
        self.file.close()


class JobReport:
    """A job's outcomes as they come: each recorded in its result and
    shown by its view (a line per file with -v, failures always)."""

    def __init__(self, direction: str, progress: bool | None, verbose: int, json_path: str | None = None) -> None:
        self.result = JobResult(direction)
        if json_path is not None:
            self.result.spool = JsonSpool(os.path.dirname(os.path.abspath(json_path)))
        self.view = JobView(direction, progress, verbose)

    @property
    def detailed(self) -> bool:
        """Whether a file's outcome needs its full figures (JobResult.detailed, or -v)."""
        return self.result.detailed

    def record(self, outcome: FileOutcome) -> None:
        self.result.add(outcome)
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
