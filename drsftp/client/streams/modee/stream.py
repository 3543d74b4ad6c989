"""One extended-block-mode data connection of the client (GFD.20;
docs/PARALLEL.md, "Extended block mode"): its state and figures
(:class:`BlockStream`), and the get's asyncio protocol that decodes its
blocks and writes them where the ledger allows (:class:`BlockSink`)."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from typing import Protocol

from ....ftp.eblock import BlockDecoder, BlockError, Data, EndOfData, EndOfFile, ReceiveLedger
from ....io.fileio import pwrite_all
from ....io.tlsbio import TLSPipe
from ....io.tuner import SocketTuner
from ....tuning.count.streams import StreamSample
from ...session.control import FTPError
from ...transfer.dataconn import LocalWriteError
from ..rangeplan import read_chunk

FIRST_READ = 64 << 10  # a stream's first read buffer: a small file's blocks fit in it


class ReadBuffer:
    """A stream's read buffer, sized to what its data needs: FIRST_READ at
    first, doubled each time a read fills it, up to ``most`` (read_chunk):
    a session of small files holds 64 KiB a stream, not 4 MiB, while a
    big file's stream grows to the full size within a few reads."""

    __slots__ = ("most", "view")

    def __init__(self, most: int) -> None:
        self.most = most
        self.view = memoryview(bytearray(min(FIRST_READ, most)))

    def used(self, nbytes: int) -> None:
        """A read of ``nbytes`` was consumed (call after: the view is replaced)."""
        size = len(self.view)
        if nbytes >= size and size < self.most:
            self.view = memoryview(bytearray(min(size * 2, self.most)))


class BlockGet(Protocol):
    """What a get's streams need from their transfer (get.ModeEGet)."""

    ledger: ReceiveLedger
    wanted: int
    fd: int

    def fail(self, exc: FTPError) -> None: ...

    def progress(self) -> None: ...


@dataclass
class BlockStream:
    """One data connection's state and figures."""

    index: int
    sock: socket.socket
    tuner: SocketTuner
    bytes: int = 0
    blocks: int | None = None  # sent (put); a receiver sees fragments, not blocks
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    retire: bool = False  # -P auto: end after the current block
    tls: TLSPipe | None = None  # a put stream's TLS (a get's is its transport's)
    copy: bool = False  # a put stream sends copies, not sendfile (a peer on this host: filesend)

    def sample(self) -> StreamSample:
        st = self.tuner.stats
        return StreamSample(self.tuner.last_rtt, st.rtt_min, st.retransmits)

    def as_dict(self) -> dict:
        s = self.tuner.summary()
        secs = (self.ended or time.monotonic()) - self.started
        return {"stream": self.index, "bytes": self.bytes, "blocks": self.blocks, "seconds": round(secs, 4),
                "mbps": round(self.bytes * 8 / secs / 1e6, 3) if secs > 0 else 0.0,
                "rtt_min_ms": s["rtt_min_ms"], "rtt_avg_ms": s["rtt_avg_ms"], "retransmits": s["retransmits"],
                "peak_rcvbuf": s["peak_rcvbuf"], "peak_sndbuf": s["peak_sndbuf"]}


class BlockSink(asyncio.BufferedProtocol):
    """A get's stream: blocks decoded, checked by the transfer's ledger,
    written at their offsets (pwrite)."""

    def __init__(self, owner: BlockGet, stream: BlockStream) -> None:
        self.owner, self.stream = owner, stream
        self.decoder = BlockDecoder(max_count=owner.ledger.limit or (1 << 40))
        self.buf = ReadBuffer(read_chunk(owner.wanted))
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        return self.buf.view  # not a bytearray: asyncio's TLS transport fills slices of it (streammode.FileSink)

    def buffer_updated(self, nbytes: int) -> None:
        moved = False  # (only data and ends are progress: empty headers forever keep no get alive)
        try:
            for ev in self.decoder.feed(self.buf.view[:nbytes]):
                moved = moved or not isinstance(ev, Data) or len(ev.data) > 0
                if isinstance(ev, Data):
                    n = len(ev.data)
                    self.owner.ledger.check(ev.offset, n)  # bounds and overlap, before the write
                    pwrite_all(self.owner.fd, ev.data, ev.offset)
                    self.owner.ledger.took(ev.offset, n)  # (held once written: a failed write is not)
                    self.stream.bytes += n
                elif isinstance(ev, EndOfFile):
                    self.owner.ledger.end_of_file(ev)
                elif isinstance(ev, EndOfData):
                    self.owner.ledger.end_of_data()
                    self.stream.ended = time.monotonic()
        except BlockError as exc:
            self.owner.fail(FTPError(f"extended block mode: {exc}", transient=False))
            return
        except OSError as exc:  # the local file's write (a full disk)
            self.owner.fail(LocalWriteError(exc))
            return
        self.buf.used(nbytes)
        if moved:
            self.owner.progress()

    def eof_received(self) -> bool:
        if not self.decoder.ended and not self.owner.ledger.complete:
            self.owner.fail(FTPError("a data connection closed before its EOD"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and not self.decoder.ended:
            self.owner.fail(FTPError(f"data connection failed: {exc}"))
