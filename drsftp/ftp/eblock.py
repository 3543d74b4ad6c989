"""GridFTP extended block mode (MODE E), sans-IO: the block codec and the
receiver's ledger, shared by the server and the client.

GFD.20 ("GridFTP: Protocol Extensions to FTP for the Grid", Allcock 2003),
"Extended Block Mode": every block starts with a 17-byte header, an 8-bit
descriptor, a 64-bit byte count and a 64-bit offset (network byte order).
Data may arrive on any of N connections in any order; the offset says
where it goes.  Each connection ends its part of a transfer with EOD; one
EOF header (count 0) carries in its offset field how many EODs make the
whole transfer (the EOD count).  A connection stays open for the next
transfer unless the sender marks it with CLOSE (GridFTP's cached data
channels); in MODE E the side that sends the data always connects.

Nothing here touches a socket or a file: ``BlockDecoder.feed`` takes bytes
and returns events; ``ReceiveLedger`` takes the events' offsets and counts
and says when a transfer is complete or a peer misbehaves.  Drivers move
the bytes (docs/DESIGN.md, "Extended block mode").
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

HEADER = struct.Struct(">BQQ")  # descriptor, count, offset (GFD.20)
HEADER_SIZE = HEADER.size  # 17
MAX_OFFSET = 1 << 62  # keeps offset + count inside a signed 64-bit off_t
MAX_EOD_COUNT = 1 << 16  # no peer opens more connections than this
# streams one transfer runs at most: the client's -P N and copy -P N, and drsftp
# serve's default --max-streams per session (docs/PARALLEL.md, docs/EBLOCK.md)
MAX_STREAMS = 64


def parse_parallel(text: str) -> int | None:
    """``-P``: ``N`` (1 to MAX_STREAMS) or ``auto`` (None); one rule for a
    file, a job's sessions and a copy (the command line parses it once)."""
    if text.strip().lower() == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_STREAMS:
        raise ValueError(f"1 to {MAX_STREAMS} streams or auto, not {text!r}")
    return n


class Desc(enum.IntFlag):
    """Descriptor bits (GFD.20, extended block mode; the values GridFTP sends)."""

    NONE = 0
    CLOSE = 0x04  # the sender closes this connection after this block
    EOD = 0x08  # no more data on this connection for this transfer
    RESTART = 0x10  # a restart marker (not sent by drsftp)
    ERRORS = 0x20  # suspected errors in this block
    EOF = 0x40  # offset field = the EOD count of the whole transfer
    EOR = 0x80  # end of record (record structure only: not supported)


_EOF, _EOD, _CLOSE, _EOR_RESTART = int(Desc.EOF), int(Desc.EOD), int(Desc.CLOSE), int(Desc.EOR | Desc.RESTART)


class BlockError(ValueError):
    """The peer broke extended block mode's rules; the transfer must end."""


def header(desc: Desc | int, count: int, offset: int) -> bytes:
    return HEADER.pack(int(desc), count, offset)


def data_header(offset: int, count: int) -> bytes:
    return HEADER.pack(0, count, offset)


def eod(*, eof_streams: int | None = None, close: bool = False) -> bytes:
    """The header that ends one connection's part of a transfer; with
    ``eof_streams`` it is also the transfer's EOF, carrying the EOD count
    (one header for both, as GridFTP sends them)."""
    desc = _EOD | (_CLOSE if close else 0)
    if eof_streams is None:
        return header(desc, 0, 0)
    return header(desc | _EOF, 0, eof_streams)


# -- decoding ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Data:
    """``data`` belongs at file offset ``offset`` (a view into the fed buffer:
    write it before the next ``feed``)."""

    offset: int
    data: memoryview


@dataclass(frozen=True, slots=True)
class EndOfFile:
    """EOF: the whole transfer is ``eod_count`` EODs, over all connections."""

    eod_count: int


@dataclass(frozen=True, slots=True)
class EndOfData:
    """This connection's part of the transfer is over (EOD); ``close``:
    the sender closes it next (else it stays cached for the next one)."""

    close: bool


Event = Data | EndOfFile | EndOfData


class BlockDecoder:
    """Parses one connection's byte stream into Data and EndOfData events.

    Payload bytes pass through as views (no copy); only a header split
    across two reads is buffered (at most 16 bytes).  ``max_count`` bounds
    one block (a hostile count cannot make the receiver wait forever for a
    block it must buffer: nothing is buffered, but the bound keeps offsets
    and counts inside 63 bits and a sane size)."""

    def __init__(self, max_count: int = 1 << 40) -> None:
        self._partial = bytearray()
        self._offset = 0  # file offset of the next payload byte
        self._left = 0  # payload bytes left in the current block
        self._max_count = max_count
        self.ended = False  # EOD seen: anything more is an error until reset()

    @property
    def in_block(self) -> bool:
        return self._left > 0 or bool(self._partial)

    @property
    def committed(self) -> int:
        """Bytes the peer must still send before this connection's EOD can
        come: the current block's rest and the next header (EOD never rides
        on a data block); 0 once the EOD came."""
        return 0 if self.ended else self._left + HEADER_SIZE - len(self._partial)

    def reset(self) -> None:
        """A cached connection starts its next transfer."""
        if self.in_block:
            raise BlockError("connection reused in the middle of a block")
        self.ended = False

    def feed(self, buf: bytes | bytearray | memoryview) -> list[Event]:
        return self.feed_some(buf)[0]

    def feed_some(self, buf: bytes | bytearray | memoryview, stop_at_eod: bool = False) -> tuple[list[Event], int]:
        """The events in ``buf`` and the bytes consumed; with ``stop_at_eod``
        it stops right after an EOD, so the rest of ``buf`` can go to the
        connection's next transfer (cached data channels, GFD.20)."""
        view = memoryview(buf).cast("B")
        events: list[Event] = []
        pos, end = 0, len(view)
        while pos < end:
            if stop_at_eod and self.ended:
                break
            if self._left:
                n = min(self._left, end - pos)
                events.append(Data(self._offset, view[pos:pos + n]))
                self._offset += n
                self._left -= n
                pos += n
                continue
            if self.ended:
                raise BlockError("data after EOD on this connection")
            if not self._partial and end - pos >= HEADER_SIZE:  # a whole header in the buffer (the common case)
                desc, count, offset = HEADER.unpack_from(view, pos)
                pos += HEADER_SIZE
                if desc == 0 and 0 < count <= self._max_count and offset + count <= MAX_OFFSET:
                    self._offset, self._left = offset, count  # a data block's header: nothing more to check
                else:
                    events.extend(self._header(desc, count, offset))
                continue
            need = HEADER_SIZE - len(self._partial)
            take = view[pos:pos + need]
            pos += len(take)
            if len(take) < need or self._partial:
                self._partial += take
                if len(self._partial) < HEADER_SIZE:
                    continue
                raw, self._partial = bytes(self._partial), bytearray()
            else:
                raw = bytes(take)
            events.extend(self._header(*HEADER.unpack(raw)))
        return events, pos

    def _header(self, desc: int, count: int, offset: int) -> list[Event]:
        # (plain ints, not Desc: enum arithmetic costs a per-file block header more than the rest)
        if desc & 0x03:
            raise BlockError(f"unknown descriptor bits 0x{desc:02x}")
        if desc & _EOR_RESTART:
            raise BlockError("record structure and restart-marker blocks are not supported")
        events: list[Event] = []
        if desc & _EOF:
            if count:
                raise BlockError("an EOF header carries no data")
            if not 1 <= offset <= MAX_EOD_COUNT:
                raise BlockError(f"EOD count {offset} out of range")
            events.append(EndOfFile(offset))
        elif count:
            if count > self._max_count or offset + count > MAX_OFFSET:
                raise BlockError(f"block of {count} bytes at {offset} is out of bounds")
            self._offset, self._left = offset, count
        if desc & _EOD:
            if count:
                raise BlockError("EOD on a block that carries data")
            self.ended = True
            events.append(EndOfData(bool(desc & _CLOSE)))
        return events


# -- the receiver's ledger -----------------------------------------------------------


class RangeSet:
    """Disjoint half-open byte ranges, kept merged and sorted."""

    def __init__(self, ranges: list[tuple[int, int]] | None = None) -> None:
        self._r: list[tuple[int, int]] = []
        for a, b in ranges or ():
            self.add(a, b)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._r)

    def __len__(self) -> int:
        return len(self._r)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RangeSet) and self._r == other._r

    @property
    def total(self) -> int:
        return sum(b - a for a, b in self._r)

    def overlaps(self, a: int, b: int) -> bool:
        # O(log n): of the ranges starting before b, only the last can reach past a
        i = bisect.bisect_left(self._r, (b,))
        return i > 0 and self._r[i - 1][1] > a

    def add(self, a: int, b: int) -> None:
        """Add [a, b), merged with every range it touches or overlaps
        (O(log n) search: a hostile peer's many small blocks stay cheap)."""
        if b <= a:
            return
        lo = bisect.bisect_left(self._r, (a,))
        if lo > 0 and self._r[lo - 1][1] >= a:
            lo -= 1
        hi = bisect.bisect_right(self._r, (b, float("inf")))
        if lo < hi:
            a, b = min(a, self._r[lo][0]), max(b, self._r[hi - 1][1])
        self._r[lo:hi] = [(a, b)]

    def missing(self, size: int) -> list[tuple[int, int]]:
        """The gaps in [0, size)."""
        gaps, at = [], 0
        for a, b in self._r:
            if a > at:
                gaps.append((at, min(a, size)))
            at = max(at, b)
            if at >= size:
                break
        if at < size:
            gaps.append((at, size))
        return [(a, b) for a, b in gaps if b > a]

    def marker(self) -> str:
        """GridFTP's range-marker text: ``0-1048576,2097152-3145728``."""
        return ",".join(f"{a}-{b}" for a, b in self._r)

    @classmethod
    def parse(cls, text: str) -> RangeSet:
        rs = cls()
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            a, sep, b = part.partition("-")
            if not sep or not a.isdigit() or not b.isdigit() or int(b) < int(a):
                raise ValueError(f"bad range {part!r}")
            rs.add(int(a), int(b))
        return rs


def marker_ranges(text: str, size: int | None) -> list[tuple[int, int]]:
    """The ranges a ``111 Range Marker a-b,c-d`` reply's text says the
    receiver holds (GFD.20); none when the text is not one, does not parse,
    or names a byte past ``size`` (a hostile or confused server)."""
    _, sep, rest = text.partition("Range Marker")
    if not sep:
        return []
    try:
        ranges = list(RangeSet.parse(rest))
    except ValueError:
        return []
    return [] if size is not None and any(b > size for _, b in ranges) else ranges


class ReceiveLedger:
    """What a receiver knows of one MODE E transfer across its connections.

    Rules (GFD.20, extended block mode; the hostile-peer bounds are
    drsftp's, docs/SECURITY.md): a block outside ``[0, limit)`` or over a
    byte already received is an error (a peer cannot make the receiver
    write anywhere else or twice); the transfer is complete when EOF came
    and as many EODs as it announced, and never more EODs than that."""

    def __init__(self, limit: int | None = None, base: RangeSet | None = None) -> None:
        self.limit = limit  # announced size (ALLO), else the server's limit
        self.received = RangeSet(list(base or ()))  # already on disk (resume)
        self.eod_count: int | None = None
        self.eods = 0
        self.new_bytes = 0

    def apply(self, event: Event) -> None:
        """Account one decoded event (Data events by offset and length)."""
        if isinstance(event, Data):
            self.data(event.offset, len(event.data))
        elif isinstance(event, EndOfFile):
            self.end_of_file(event)
        else:
            self.end_of_data()

    def data(self, offset: int, count: int) -> None:
        self.check(offset, count)
        self.took(offset, count)

    def check(self, offset: int, count: int) -> None:
        """A block's bounds and overlap, before it is written (BlockError)."""
        end = offset + count
        if self.limit is not None and end > self.limit:
            raise BlockError(f"block at {offset}+{count} past the limit of {self.limit} bytes")
        if self.received.overlaps(offset, end):
            raise BlockError(f"block at {offset}+{count} overlaps data already received")

    def took(self, offset: int, count: int) -> None:
        """A checked block is written: held from now (a resume record may say so)."""
        self.received.add(offset, offset + count)
        self.new_bytes += count

    def end_of_file(self, event: EndOfFile) -> None:
        if self.eod_count is not None:
            raise BlockError("a second EOF")
        self.eod_count = event.eod_count
        if self.eods > self.eod_count:
            raise BlockError(f"{self.eods} EODs for an EOD count of {self.eod_count}")

    def end_of_data(self) -> None:
        self.eods += 1
        if self.eod_count is not None and self.eods > self.eod_count:
            raise BlockError(f"{self.eods} EODs for an EOD count of {self.eod_count}")

    @property
    def complete(self) -> bool:
        return self.eod_count is not None and self.eods == self.eod_count

    def size(self) -> int:
        """The file's length as received (the end of the last range)."""
        return max((b for _, b in self.received), default=0)

