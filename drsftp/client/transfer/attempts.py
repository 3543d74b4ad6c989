"""What every get and put does around its transfer, whatever the
protocol: retries with backoff and resume (--retries, --max-time over all
attempts), the destination's parents, the result of a file already whole.
Light on purpose: the HTTPS commands use it without the FTP client's
transfer machinery (decision 0045)."""

from __future__ import annotations

import asyncio
import errno
import os

from ..result import TransferResult
from ..session.control import FTPError
from . import maxtime
from .options import TransferOptions


def make_parents(dest: str) -> None:
    """The directories DEST names that are missing, as `get -r` makes its
    destination's: only those of the path the user gave (its dirname)."""
    folder = os.path.dirname(dest)
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:  # a file where a directory must be: say so, not "file exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder) from None


async def with_retries(run, opts: TransferOptions, retries: int, *, base_delay: float = 1.0,
                       max_delay: float = 30.0, on_retry=None) -> TransferResult:
    """Run ``run(opts)``; after a transient failure (lost connection, 4yz
    reply, short transfer) reconnect with exponential backoff and resume
    with REST, up to ``retries`` more times: only what an attempt of this
    run wrote (``resume_own``), never an older DEST or remote file, which
    only --continue takes as a prefix."""
    from dataclasses import replace

    attempt = 0
    opts = maxtime.started(replace(opts, wrote=set()))  # (one --max-time for every attempt, as curl's)
    while True:
        try:
            return await run(opts)
        except FTPError as exc:
            if not exc.transient or attempt >= retries:
                raise
            delay = min(base_delay * 2 ** attempt, max_delay)
            attempt += 1
            if on_retry:
                on_retry(attempt, delay, exc)
            await asyncio.sleep(delay)
            opts = replace(opts, resume_own=True)


def already_complete(direction: str, path: str, size: int) -> TransferResult:
    r = TransferResult(direction=direction, path=path, bytes=0, seconds=0.0, total_size=size, resumed_from=size)
    r.update(note="already complete")
    return r
