"""A file's bytes onto a blocking data socket, from a sending thread.

The rule (docs/decisions/0016-copying-sends-on-one-host.md): sendfile(2)
to a peer on another host, copies from a small buffer to a peer on this
host.  Across loopback, sendfile's page-cache fragments reach the receiver
as they are: they coalesce less in its receive queue, and a receiver that
reads 64 KiB at a time (vsftpd, drsftp serve) ACKs nearly every one.  Copied
64 KiB writes cost this end a copy and save the receiver more than that; a
NIC gives the receiver buffers of its own, so elsewhere the copy is waste.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

COPY_CHUNK = 64 << 10  # curl's upload buffer; 256 KiB saved the receiver less (0016)
SEND_POLL = 0.2  # seconds a blocked send waits before it looks for a stop (SO_SNDTIMEO)


def send_range(fd: int, fileno: int, offset: int, count: int, stop: threading.Event, copy: bool,
               on_sent: Callable[[int], None] | None = None) -> int:
    """Send ``count`` bytes of ``fileno`` from ``offset`` to the blocking
    socket ``fd`` (SO_SNDTIMEO set: a blocked send returns EAGAIN now and
    then, so ``stop`` is seen); the bytes sent.  Short only when stopped or
    when the file ended early."""
    send = _copy if copy else _sendfile
    return send(fd, fileno, offset, count, stop, on_sent or _ignore)


def _ignore(n: int) -> None:
    pass


def _sendfile(fd: int, fileno: int, offset: int, count: int, stop: threading.Event,
              on_sent: Callable[[int], None]) -> int:
    sent = 0
    while sent < count and not stop.is_set():
        try:
            n = os.sendfile(fd, fileno, offset + sent, count - sent)
        except BlockingIOError:  # (EINTR is retried by os.sendfile, PEP 475)
            continue  # SO_SNDTIMEO passed with nothing sent
        if n == 0:
            break  # the file ended
        sent += n
        on_sent(n)
    return sent


def _copy(fd: int, fileno: int, offset: int, count: int, stop: threading.Event,
          on_sent: Callable[[int], None]) -> int:
    view = memoryview(bytearray(min(COPY_CHUNK, max(count, 1))))
    sent = 0
    while sent < count and not stop.is_set():
        n = os.preadv(fileno, [view[:min(len(view), count - sent)]], offset + sent)
        if n == 0:
            break  # the file ended
        done = 0
        while done < n:
            if stop.is_set():
                on_sent(done)
                return sent + done
            try:
                done += os.write(fd, view[done:n])
            except BlockingIOError:
                continue  # SO_SNDTIMEO passed with nothing sent
        sent += n
        on_sent(n)
    return sent
