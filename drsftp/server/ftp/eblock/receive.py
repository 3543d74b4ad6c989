"""The receiving end of a MODE E transfer in ``drsftp serve`` (STOR):
blocks from any stream written at their offsets (GFD.20, extended block
mode; docs/EBLOCK.md, "Data format" and "Replies during and after a
transfer").

Rules:
- every block passes the ledger (drsftp/ftp/eblock.py) before it is
  written (os.pwrite) into the ``.NAME.part`` file that stream-mode STOR
  uses: inside ALLO's size or the server's limit, no byte twice, at most
  ``Limits.max_ranges`` disjoint ranges (docs/EBLOCK.md, "Limits");
- 112 Perf and 111 Range markers every 2 s while it runs, and before its
  final reply unless that is 226, it sent none while it ran and the
  session sent some less than 2 s ago (docs/decisions/0041: a tree of
  small files gets them at most every 2 s a session);
- when the EOF and as many EODs as it counts came, the file is renamed
  into place if whole (ALLO's size when announced) and its part file's
  name still leads to it (else 451: another file is there), else kept for
  REST (451); a part file started anew (no REST) that ends empty is removed.
"""

from __future__ import annotations

import errno
import os
import ssl
import time
from typing import Any

from ....ftp.eblock import BlockError, Data, EndOfFile, RangeSet, ReceiveLedger
from ....io.fileio import pwrite_all
from ....io.tlsbio import reason
from ....tuning import Role
from .. import partfile
from ..partfile import discard_if_empty
from .job import Job, TransferSession
from .streams import Stream

RECV_CHUNK = 1 << 20  # one recv_into per MiB
MARKER_INTERVAL = 2.0  # seconds between 112/111 markers during STOR


class Receive(Job):
    role = Role.RECEIVER

    def __init__(self, session: TransferSession, fd: int, temp: str, final: str, expected: int | None,
                 base: RangeSet | None, fresh: bool = False) -> None:
        super().__init__(session)
        self.fd, self.temp, self.final, self.expected = fd, temp, final, expected
        self.fresh = fresh  # the part file was started anew (no REST): removed if it ends empty
        if temp != final:
            partfile.claim(temp)  # one writer at a time (partfile.BUSY to another session's STOR)
        self.discarded = False
        limit = expected if expected is not None else session.limits.max_file
        self.ledger = ReceiveLedger(limit=limit, base=base)
        self.buf = session.receive_buffer()  # one per session (1 MiB zeroed per STOR cost more than a small file)
        self._markers: Any = None
        self._marked = False  # it sent markers while it ran: its last ones come before its 226 too

    def arm(self) -> None:
        super().arm()
        if not self.finished and self._markers is None:
            self._markers = self.session.h.ioloop.call_later(MARKER_INTERVAL, self._send_markers)

    @property
    def moved(self) -> int:
        return self.ledger.new_bytes

    def read(self, s: Stream) -> None:
        """One read of ``s`` (first what it held from past its last EOD),
        decoded up to its EOD: what follows is the next transfer's, held."""
        if s.held:
            view, s.held = memoryview(s.held), b""
        else:
            try:
                n = s.recv_into(self.buf)
            except (BlockingIOError, InterruptedError):
                return
            except ssl.SSLError as exc:  # a forged or broken record: the transfer's data is suspect
                s.close()
                return self.fail(f"426 TLS error on a data connection: {reason(exc)}; transfer aborted.")
            except OSError as exc:
                return s.lost(f"426 Data connection lost: {exc.strerror}; transfer aborted.")
            if n == 0:
                return s.lost("426 Data connection closed before its end of data (EOD); transfer aborted.")
            s.moved += n
            if s.idle:
                s.bytes_moved()
            view = memoryview(self.buf)[:n]
        self.members.add(s)
        s.used = True
        self.touch()
        close = False
        try:
            events, used = s.decoder.feed_some(view, stop_at_eod=True)
            for ev in events:
                if isinstance(ev, Data):
                    self.ledger.data(ev.offset, len(ev.data))  # bounds and overlap first
                    if len(self.ledger.received) > self.session.limits.max_ranges:
                        raise BlockError(f"more than {self.session.limits.max_ranges} disjoint ranges")
                    self._write(ev.offset, ev.data)
                elif isinstance(ev, EndOfFile):
                    self.ledger.end_of_file(ev)
                else:
                    self.ledger.end_of_data()
                    close = ev.close
        except BlockError as exc:
            return self.fail(f"451 Extended block mode error: {exc}; transfer aborted.")
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return self.fail("452 Insufficient storage space; transfer aborted.")
            return self.fail(f"451 Local error: {exc.strerror}; transfer aborted.")
        if close:
            s.close()  # EOD|CLOSE: the sender closes it next
        elif used < len(view):
            s.hold(view[used:])
        s.batch_reads()
        if self.ledger.complete:
            self._complete()

    def _write(self, offset: int, data: memoryview) -> None:
        pwrite_all(self.fd, data, offset)

    def _send_markers(self) -> None:
        if self.finished:
            return
        self._marker_replies()
        self._marked = True
        self._markers = self.session.h.ioloop.call_later(MARKER_INTERVAL, self._send_markers)

    def _marker_replies(self) -> None:
        """112 Perf Marker and 111 Range Marker, as GridFTP servers send them."""
        h = self.session.h
        self.session.last_markers = time.monotonic()
        h.push(f"112-Perf Marker\r\n Timestamp:  {time.time():.1f}\r\n Stripe Index: 0\r\n"
               f" Stripe Bytes Transferred: {self.ledger.new_bytes}\r\n Total Stripe Count: 1\r\n")
        h.respond("112 End.")
        if len(self.ledger.received):
            h.respond(f"111 Range Marker {self.ledger.received.marker()}")

    def _complete(self) -> None:
        """Every EOD came: rename if the file is whole (ALLO's size when
        announced), else keep the .part for a restart (451)."""
        if self.finished:
            return
        self._cancel_markers()
        with self.session.h.replies_together():  # the markers and the final reply in one send
            reply = self._place()
            if (not reply.startswith("226") or self._marked
                    or time.monotonic() - self.session.last_markers >= MARKER_INTERVAL):
                self._marker_replies()
            self._end(complete=reply.startswith("226"))
            self.session.h.respond(reply)

    def _cancel_markers(self) -> None:
        if self._markers is not None:
            self._markers.cancel()

    def _place(self) -> str:
        """The file renamed into place, or kept: the final reply."""
        size = self.expected if self.expected is not None else self.ledger.size()
        missing = self.ledger.received.missing(size)
        try:
            if missing:
                raise _Incomplete(f"451 Upload incomplete: {size - sum(b - a for a, b in missing)} of {size}"
                                  " bytes")
            if not self.fresh:  # a fresh part file (O_TRUNC) ends where its last byte was written
                os.ftruncate(self.fd, size)
            if self.temp != self.final and not partfile.same_file(self.temp, self.fd):
                raise _Replaced(partfile.REPLACED)
            os.close(self.fd)
            self.fd = -1
            if self.temp != self.final:
                os.replace(self.temp, self.final)
        except _Replaced as exc:
            self.fresh = False  # (the file there is another's, even an empty one)
            self.cleanup()
            return str(exc)
        except _Incomplete as exc:
            self.cleanup()
            return f"{exc}." if self.discarded else f"{exc}; kept for REST to resume."
        except OSError as exc:
            self.cleanup()
            return f"451 Cannot move the upload into place: {exc.strerror}."
        self._release()
        return "226 Transfer complete."

    def _release(self) -> None:
        if self.temp != self.final:
            partfile.release(self.temp)

    def cleanup(self) -> None:
        """After a failure: a part file of its own with nothing written goes."""
        self._cancel_markers()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.fresh and self.temp != self.final:
            self.discarded = discard_if_empty(self.temp)
        self._release()


class _Incomplete(Exception):
    pass


class _Replaced(Exception):
    pass
