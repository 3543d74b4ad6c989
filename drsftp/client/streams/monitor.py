"""The loop beside a running parallel transfer, FTP's or HTTP's: progress,
a timeline, the resume record every second, --max-time, and -P auto's
steering (:mod:`.autosteer`; docs/PARALLEL.md, "-P auto").

A driver has ``run()``, ``moved`` (bytes this run) and ``samples()``
(one :class:`~drsftp.tuning.count.streams.StreamSample` a stream), and
``left()`` where it knows what it still has to move."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...tuning.count.streams import StreamController
from ..transfer import maxtime
from ..transfer.options import TransferOptions
from ..transfer.progress import ProgressView
from .autosteer import AutoSteering

TICK = 0.25
SAVE_EVERY = 1.0  # seconds between resume-record writes
TIMELINE_LIMIT = 20_000  # timeline rows kept (bounded memory)


@dataclass
class Outcome:
    seconds: float = 0.0
    timed_out: bool = False
    start: int | None = None  # -P auto: the streams it started with
    changes: list[dict[str, Any]] = field(default_factory=list)  # -P auto: when the stream count changed
    timeline: list[dict[str, Any]] = field(default_factory=list)  # every TICK: the sum over the streams


async def watch(driver: Any, opts: TransferOptions, view: ProgressView, resumed: int,
                save: Callable[[], None] | None, steering: AutoSteering | None = None) -> Outcome:
    """Run ``driver.run()`` to its end (or --max-time's: ``timed_out``);
    meanwhile show progress, keep a timeline, ``save()`` the resume record
    and apply ``steering`` (-P auto)."""
    out = Outcome(start=steering.applied if steering is not None else None)
    started = time.monotonic()
    deadline = maxtime.lift(opts)  # (the driver's run stops at its instant: below)
    run = asyncio.ensure_future(driver.run())
    last_save = last_ctl = started
    last_moved, last_tick, rate, ctl_moved = 0, started, 0.0, 0
    interval = StreamController.interval(None)
    try:
        while not run.done():
            await asyncio.wait([run], timeout=min(TICK, deadline.left()) if deadline else TICK)
            now = time.monotonic()
            moved = driver.moved
            if now - last_tick > 0:
                rate = (moved - last_moved) / (now - last_tick)
            samples = driver.samples()
            rtt = min((s.rtt for s in samples if s.rtt), default=None)
            view.update(resumed + moved, rate * 8, rtt, None)
            if len(out.timeline) < TIMELINE_LIMIT:
                out.timeline.append({"t": round(now - started, 4), "bytes": moved, "rate_bps": round(rate * 8),
                                     "streams": len(samples), "rtt_ms": round(rtt * 1000, 3) if rtt else None})
            if save is not None and now - last_save >= SAVE_EVERY:
                save()
                last_save = now
            if deadline is not None and deadline.passed and not run.done():
                out.timed_out = True
                run.cancel()
                break
            if steering is not None and now - last_ctl >= interval:
                goodput = (moved - ctl_moved) / (now - last_ctl)
                left = bytes_left(driver, resumed)
                if steering.update(goodput, samples,
                                   left / goodput / interval if left is not None and goodput > 0 else None):
                    out.changes.append({"t": round(now - started, 3), "streams": steering.applied,
                                        "window": steering.window})
                interval = StreamController.interval(rtt)
                last_ctl, ctl_moved = now, moved
            last_moved, last_tick = moved, now
        try:
            await run
        except asyncio.CancelledError:
            if not out.timed_out:
                raise
    finally:
        if not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    out.seconds = time.monotonic() - started
    return out


def bytes_left(driver: Any, resumed: int) -> int | None:
    """What the transfer still has to move (None: its size is unknown)."""
    left = getattr(driver, "left", None)
    if left is not None:
        return int(left())
    size = getattr(driver, "size", None) or getattr(driver, "total", None) or getattr(
        getattr(driver, "plan", None), "size", None)
    return max(0, size - resumed - driver.moved) if size else None
