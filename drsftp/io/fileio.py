"""File reads and writes shared by client and server: the parallel data
paths' positioned writes, and the one digest loop (HASH, CKSM, HTTP's
Digest, the client's --verify)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

DIGEST_CHUNK = 1 << 20  # bytes read per update


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def pwrite_all(fd: int, data: memoryview | bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (os.pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def digest_file(path: str, new: Callable[[], Hasher], offset: int = 0, length: int | None = None) -> tuple[int, str]:
    """(the offset after the last byte read, the hex digest) of ``length``
    bytes (None: the rest) from ``offset``, with a hasher from ``new``.
    Blocking: drivers run it in a thread."""
    h = new()
    with open(path, "rb") as f:
        f.seek(offset)
        left = length
        while left is None or left > 0:
            chunk = f.read(DIGEST_CHUNK if left is None else min(DIGEST_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
        return f.tell(), h.hexdigest()
