"""drsftp with one client knob changed, for benchmarks/peer_cpu.py:

    python benchmarks/peer_cpu_variant.py KNOB=V,... -- get URL DEST

KNOB: chunk=KiB (get: read size), lowat=off|KiB (get: SO_RCVLOWAT batch),
quickack=1 (get: TCP_QUICKACK after every read), sendsize=KiB (put: pread
and write instead of sendfile), sfsize=KiB (put: sendfile calls capped);
"-" for none.
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.cli import main
from drsftp.client import transfer
from drsftp.tuning import actuation


def _read_size(kib: int) -> None:
    transfer.RECV_CHUNK = kib << 10


def _read_batch(value: str) -> None:
    if value == "off":
        actuation.BufferPlan.read_batch_for = lambda self, window: None
    else:
        actuation.READ_BATCH_MAX = int(value) << 10
        actuation.READ_BATCH_MIN = min(actuation.READ_BATCH_MIN, actuation.READ_BATCH_MAX)


def _quickack(value: int) -> None:
    updated = transfer._FileSink.buffer_updated

    def buffer_updated(self, nbytes):
        updated(self, nbytes)
        sock = self.xfer.tuner._attached
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, value)

    transfer._FileSink.buffer_updated = buffer_updated


def _send_copying(kib: int) -> None:
    size = kib << 10

    def sendfile_until(fd, fileno, offset, count, stop):
        sent = 0
        view = memoryview(bytearray(size))
        try:
            while sent < count and not stop.is_set():
                n = os.preadv(fileno, [view[:min(size, count - sent)]], offset + sent)
                if n == 0:
                    break
                done = 0
                while done < n and not stop.is_set():
                    try:
                        done += os.write(fd, view[done:n])
                    except BlockingIOError:
                        continue
                sent += n
        finally:
            os.close(fd)
        return sent

    transfer._sendfile_until = sendfile_until


def _sendfile_cap(kib: int) -> None:
    real = os.sendfile

    def capped(out_fd, in_fd, offset, count):
        return real(out_fd, in_fd, offset, min(count, kib << 10))

    os.sendfile = capped  # this process is the client alone


KNOBS = {"chunk": lambda v: _read_size(int(v)), "lowat": _read_batch, "quickack": lambda v: _quickack(int(v)),
         "sendsize": lambda v: _send_copying(int(v)), "sfsize": lambda v: _sendfile_cap(int(v))}

if __name__ == "__main__":
    spec, _, *args = sys.argv[1:]
    for item in spec.split(",") if spec != "-" else []:
        key, _, value = item.partition("=")
        KNOBS[key](value)
    sys.argv = ["drsftp", *args]
    sys.exit(main())
