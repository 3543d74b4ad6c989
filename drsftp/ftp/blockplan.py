"""The sender's block plan in extended block mode, one rule for both ends
(GFD.20 sec. 3: any block on any stream; docs/EBLOCK.md, "Data format").

Blocks of 256 KiB-4 MiB, about 8 a stream: small enough that the last
blocks spread over the streams, large enough to cost little.  Toward the
end a block is at most what is left over 4 x the streams sending (guided
self-scheduling, Polychronopoulos and Kuck, IEEE Trans. Computers 1987):
the streams end together instead of one still sending a whole block.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

MIN_BLOCK = 256 << 10
MAX_BLOCK = 4 << 20
BLOCKS_PER_STREAM = 8
ALIGN = 64 << 10  # block sizes in whole 64 KiB (the senders' read and copy unit)
TAPER = 4  # near the end a block is at most left / (TAPER x streams)


def block_size(total: int, streams: int) -> int:
    """The block size for ``total`` bytes over ``streams`` streams."""
    per_block = total // max(streams * BLOCKS_PER_STREAM, 1) // ALIGN * ALIGN
    return max(MIN_BLOCK, min(MAX_BLOCK, per_block))


class BlockPlan:
    """(offset, count) in file order over ``ranges`` (``[a, b)`` each)."""

    def __init__(self, ranges: Iterable[tuple[int, int]], block: int) -> None:
        if block <= 0:
            raise ValueError("block size must be positive")
        self._ranges = deque((a, b) for a, b in ranges if b > a)
        self.block = block
        self.left = sum(b - a for a, b in self._ranges)

    @property
    def done(self) -> bool:
        return not self._ranges

    def next(self, streams: int | None = None) -> tuple[int, int] | None:
        """The next block, tapered for ``streams`` sending (None: not tapered)."""
        if not self._ranges:
            return None
        a, b = self._ranges[0]
        n = min(self.block, b - a)
        if streams:
            n = min(n, max(MIN_BLOCK, self.left // (TAPER * streams)))
        if a + n >= b:
            self._ranges.popleft()
        else:
            self._ranges[0] = (a + n, b)
        self.left -= n
        return a, n

    def all(self, streams: int | None = None) -> list[tuple[int, int]]:
        """Every block that is left (a static plan)."""
        out = []
        while (blk := self.next(streams)) is not None:
            out.append(blk)
        return out
