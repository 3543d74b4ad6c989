"""Sessions x streams for a dataset job: the fleet controller
(drsftp.tuning.count.fleet) fed the job's goodput, its data connections'
samples and the work left every few RTTs, and a big file's streams
changed as it decides (docs/DATASETS.md, "Sessions x streams: one
controller"; the job starts and stops workers for its session count)."""

from __future__ import annotations

import time
from collections.abc import Hashable

from ....tuning.count.fleet import Change, FleetConfig, FleetController, Work
from ....tuning.count.sharing import PathSample, combine
from ....tuning.count.streams import StreamSample
from ...streams.autosteer import path_sample_of


class FleetSteering:
    """The job's side of the controller: the big files running on sessions
    of their own (each one's size and parallel driver), and the time and
    bytes of the controller's last update."""

    def __init__(self, config: FleetConfig | None, fixed_sessions: int | None) -> None:
        self.controller = FleetController(config, fixed_sessions=fixed_sessions)
        self.big: dict[int, tuple[int, object]] = {}  # id(a big file) -> its size, its parallel driver
        self.last = (time.monotonic(), 0)  # (time, bytes moved) at the controller's last update

    @property
    def sessions(self) -> int:
        return self.controller.sessions

    def limit_sessions(self, n: int) -> None:
        """The server takes no more than ``n`` sessions (421, refused)."""
        self.controller.limit_sessions(n)

    def big_started(self, key: int, first: int | None) -> int:
        """A big file starts on sessions of its own: its first streams."""
        return self.controller.start_file(key, first)

    def big_running(self, key: int, size: int, driver: object | None) -> None:
        """``driver``: the file's parallel transfer; None: it has ended."""
        if driver is None:
            self.big.pop(key, None)
            self.controller.end_file(key)
        else:
            self.big[key] = (size, driver)

    def big_drivers(self) -> list[object]:
        return [d for _, d in self.big.values()]

    def begin(self, now: float, moved: int) -> None:
        """The goodput counts from here (the job's monitor starts)."""
        self.last = (now, moved)

    def due(self, now: float, rtt: float | None) -> bool:
        """Whether the controller is asked again (every 4 RTTs, at least 0.25 s)."""
        return now - self.last[0] >= self.controller.interval(rtt)

    def update(self, now: float, moved: int, samples: list[StreamSample], rtt: float | None,
               work: Work, path: PathSample | None = None) -> Change | None:
        """The controller's next decision, from the goodput since its last
        update (``path``: the senders' figures, :func:`path_of`)."""
        then, before = self.last
        self.controller.note_rtt(rtt)
        change = self.controller.update((moved - before) / (now - then), samples, work, path)
        self.last = (now, moved)
        return change

    def work(self, queued: int, queued_bytes: int, left: int) -> Work:
        """What is left: the queued files and their bytes, each big file's
        bytes still to move, and ``left`` bytes in all."""
        big_left: dict[Hashable, int] = {k: max(0, size - getattr(d, "moved", 0))
                                         for k, (size, d) in self.big.items()}
        return Work(queued, queued_bytes, big_left, left)

    def change_streams(self, change: Change) -> None:
        """A stream more or less, asked of the big file's transfer; one it
        does not take (a server that cannot, a file that has ended) is
        refused back to the controller."""
        entry = self.big.get(change.file) if isinstance(change.file, int) else None
        driver = entry[1] if entry is not None else None
        ok = driver is not None and (driver.add_stream() if change.delta > 0  # type: ignore[attr-defined]
                                     else driver.remove_stream())  # type: ignore[attr-defined]
        if not ok:
            self.controller.refused(change)


def path_of(drivers: list[object]) -> PathSample | None:
    """The path as the job's senders report it (tuning/count/sharing.py), from
    the transfers that know it (MODE E sessions, parallel transfers)."""
    return combine(path_sample_of(d) for d in drivers)


def samples_of(driver: object) -> list[StreamSample]:
    """The data connections of a running transfer, for the fleet controller."""
    samples = getattr(driver, "samples", None)
    if samples is not None:
        return samples()
    tuner = getattr(driver, "tuner", None)
    if tuner is None:
        return []
    return [StreamSample(tuner.last_rtt, tuner.stats.rtt_min, tuner.stats.retransmits)]
