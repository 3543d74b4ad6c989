"""drsftp with one client knob changed, for benchmarks/peer_cpu.py:

    python benchmarks/peer_cpu_variant.py KNOB=V,... -- get URL DEST

KNOB: chunk=KiB (get: read size), lowat=off|KiB (get: SO_RCVLOWAT batch),
quickack=1 (get: TCP_QUICKACK after every read), drain=KiB (get: read on
after a wakeup until the socket is empty or this much went),
send=sendfile|copy (put: that path whatever the peer's host), sendsize=KiB
(put: copies of this size), sfsize=KiB (put: sendfile calls capped; on
loopback only with send=sendfile, since a peer on this host gets copies);
"-" for none, "+" or "," between knobs.
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.cli import main
from drsftp.client.transfer import filesend, streammode
from drsftp.tuning import actuation


def _read_size(kib: int) -> None:
    streammode.RECV_CHUNK = kib << 10


def _read_batch(value: str) -> None:
    if value == "off":
        actuation.BufferPlan.read_batch_for = lambda self, window: None
    else:
        actuation.READ_BATCH_MAX = int(value) << 10
        actuation.READ_BATCH_MIN = min(actuation.READ_BATCH_MIN, actuation.READ_BATCH_MAX)


def _quickack(value: int) -> None:
    updated = streammode.FileSink.buffer_updated

    def buffer_updated(self, nbytes):
        updated(self, nbytes)
        sock = self.xfer.tuner._attached
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, value)

    streammode.FileSink.buffer_updated = buffer_updated


def _drain(kib: int) -> None:
    """After each read, read on from the socket into the same buffer until
    it is empty or ``kib`` KiB went since the wakeup (0: one read per
    wakeup, as the client does; docs/decisions/0017-smaller-get-reads.md)."""
    updated = streammode.FileSink.buffer_updated

    def buffer_updated(self, nbytes):
        updated(self, nbytes)
        sock = self.xfer.tuner._attached
        got = nbytes
        while sock is not None and got < kib << 10:
            try:
                n = sock.recv_into(self.view)
            except (BlockingIOError, InterruptedError):
                return
            if not n:
                return  # (the transport sees the end on its next read)
            updated(self, n)
            got += n

    streammode.FileSink.buffer_updated = buffer_updated


def _send_path(value: str) -> None:
    """send=sendfile|copy, whatever the peer's host (filesend's rule undone)."""
    real = filesend.send_range

    def send_range(fd, fileno, offset, count, stop, copy, on_sent=None):
        return real(fd, fileno, offset, count, stop, value == "copy", on_sent)

    filesend.send_range = send_range


def _send_copying(kib: int) -> None:
    filesend.COPY_CHUNK = kib << 10
    _send_path("copy")


def _sendfile_cap(kib: int) -> None:
    real = os.sendfile

    def capped(out_fd, in_fd, offset, count):
        return real(out_fd, in_fd, offset, min(count, kib << 10))

    os.sendfile = capped  # this process is the client alone


KNOBS = {"chunk": lambda v: _read_size(int(v)), "lowat": _read_batch, "quickack": lambda v: _quickack(int(v)),
         "sendsize": lambda v: _send_copying(int(v)), "send": _send_path, "sfsize": lambda v: _sendfile_cap(int(v)),
         "drain": lambda v: _drain(int(v))}

if __name__ == "__main__":
    spec, _, *args = sys.argv[1:]
    for item in spec.replace("+", ",").split(",") if spec != "-" else []:
        key, _, value = item.partition("=")
        KNOBS[key](value)
    sys.argv = ["drsftp", *args]
    sys.exit(main())
