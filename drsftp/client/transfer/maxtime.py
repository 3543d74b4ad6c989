"""--max-time, as curl's: one instant for the whole command (log-in,
transfer, retries), after which it stops, keeps what arrived and exits 28.

Until data moves, every await ends at the instant (``asyncio.timeout_at``
around the transfer: a stop then moved nothing).  The data phase lifts
that guard and stops itself at the same instant (a wait bounded by
:meth:`Deadline.left`), so it can ABOR, write its resume record and report
what it moved; after the data is complete nothing stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from ..result import TransferResult
from .options import Deadline, TransferOptions


def started(opts: TransferOptions) -> TransferOptions:
    """``opts`` with its deadline set (from now) where --max-time is given."""
    if opts.max_time is None or opts.deadline is not None:
        return opts
    return replace(opts, deadline=Deadline.after(opts.max_time))


def lift(opts: TransferOptions) -> Deadline | None:
    """The data phase's deadline (None: no --max-time), its guard lifted."""
    if opts.deadline is not None:
        opts.deadline.lift()
    return opts.deadline


async def within(opts: TransferOptions, direction: str, path: str,
                 run: Callable[[TransferOptions], Awaitable[TransferResult]]) -> TransferResult:
    """``run(opts)`` stopped at the deadline; a stop before its data phase
    is a result that counts no bytes (``complete`` False)."""
    opts = started(opts)
    deadline = opts.deadline
    if deadline is None or deadline.guard is not None:  # (none; or an enclosing transfer's)
        return await run(opts)
    guard = deadline.guard = asyncio.timeout_at(deadline.at)
    try:
        async with guard:
            return await run(opts)
    except TimeoutError:
        if not guard.expired():
            raise  # (a timeout of the transfer's own)
        result = TransferResult(direction=direction, path=path, bytes=0, seconds=0.0, complete=False)
        result.update(note="stopped at --max-time before its data phase")
        return result
    finally:
        deadline.guard = None
