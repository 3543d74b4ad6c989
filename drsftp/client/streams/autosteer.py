"""-P auto applied to a parallel transfer (docs/PARALLEL.md, "-P auto").

The controller (:mod:`drsftp.tuning.count.streams`, :mod:`drsftp.tuning.count.window`)
decides from numbers; this hands it the driver's figures every interval and
applies what it returns: the streams, one connection at a time until the
driver runs as many as the controller counts (a cut may give several back
at once), and each stream's window (a receiver's clamp, a sender's buffer).
"""

from __future__ import annotations

from ...tuning.count.sharing import PathSample
from ...tuning.count.streams import Action, StreamSample


def path_sample_of(driver: object) -> PathSample | None:
    """The path as ``driver``'s senders report it (tuning/count/sharing.py), where
    the driver knows it (MODE E sessions, parallel transfers)."""
    sample = getattr(driver, "path_sample", None)
    return sample() if sample is not None else None


class AutoSteering:
    """``driver``: a parallel transfer (``add_stream``, ``remove_stream``,
    and where it has them ``path_sample`` and ``cap_windows``)."""

    def __init__(self, controller, driver) -> None:
        self.controller, self.driver = controller, driver
        self.applied = controller.streams  # the streams the driver was asked to run
        self.window: int | None = None  # the window per stream last applied

    def update(self, goodput: float, samples: list[StreamSample], intervals_left: float | None) -> bool:
        """One interval: True when the streams or their window changed."""
        c, d = self.controller, self.driver
        c.update(goodput, samples, intervals_left, path=path_sample_of(d))
        changed = False
        while self.applied != c.streams:
            up = c.streams > self.applied
            if not (d.add_stream() if up else d.remove_stream()):
                c.refused(Action.ADD if up else Action.REMOVE, running=self.applied)
                break
            self.applied += 1 if up else -1
            changed = True
        window = getattr(c, "stream_window", None)
        if (window is not None or self.window is not None) and hasattr(d, "cap_windows"):
            d.cap_windows(window)  # every interval while capped: streams that joined since too
        changed = changed or window != self.window
        self.window = window
        return changed
