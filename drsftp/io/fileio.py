"""File writes shared by the parallel data paths (client and server)."""

from __future__ import annotations

import os


def pwrite_all(fd: int, data: memoryview | bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (os.pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n
