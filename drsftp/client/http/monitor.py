"""The loop beside a running HTTP transfer: progress, a timeline, the
resume record every second, --max-time, and -P auto's steering (as the FTP
client's parallel transfers: drsftp/client/streams/parallel.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...tuning.count.streams import StreamController
from ..streams.autosteer import AutoSteering
from ..transfer import maxtime
from ..transfer.options import TransferOptions
from ..transfer.progress import ProgressView

TICK = 0.25
SAVE_EVERY = 1.0  # seconds between resume-record writes
TIMELINE_LIMIT = 20_000  # rows kept (bounded memory)


@dataclass
class Outcome:
    seconds: float = 0.0
    timed_out: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)  # -P auto: when the connections changed
    timeline: list[dict[str, Any]] = field(default_factory=list)


async def watch(driver: Any, opts: TransferOptions, view: ProgressView, resumed: int,
                save: Callable[[], None] | None, steering: AutoSteering | None = None) -> Outcome:
    """Run ``driver.run()`` to its end (or --max-time's: ``timed_out``)."""
    out = Outcome()
    started = last_save = last_ctl = last_tick = time.monotonic()
    deadline = maxtime.lift(opts)
    run = asyncio.ensure_future(driver.run())
    last_moved = ctl_moved = 0
    interval = StreamController.interval(None)
    try:
        while not run.done():
            await asyncio.wait([run], timeout=min(TICK, deadline.left()) if deadline else TICK)
            now, moved = time.monotonic(), driver.moved
            rate = (moved - last_moved) / (now - last_tick) if now > last_tick else 0.0
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
                break
            if steering is not None and now - last_ctl >= interval:
                goodput = (moved - ctl_moved) / (now - last_ctl)
                left = driver.left()
                if steering.update(goodput, samples, left / goodput / interval if goodput > 0 else None):
                    out.changes.append({"t": round(now - started, 3), "streams": steering.applied})
                interval = StreamController.interval(rtt)
                last_ctl, ctl_moved = now, moved
            last_moved, last_tick = moved, now
        if not out.timed_out:
            await run
    finally:
        if not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    out.seconds = time.monotonic() - started
    return out
