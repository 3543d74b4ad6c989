"""The client's put data path (blocking sendfile in a thread), on loopback."""

import asyncio
import hashlib
import os
import threading
import time
import types

import pytest
from conftest import make_file, tcp_pair

from drsftp.client.transfer import SEND_POLL, _send

MiB = 1 << 20


def _read_to_eof(sock, timeout=10.0) -> tuple[bytes, int, float]:
    sock.settimeout(timeout)
    h, n = hashlib.sha256(), 0
    while chunk := sock.recv(MiB):
        h.update(chunk)
        n += len(chunk)
    return h.digest(), n, time.monotonic()


def test_a_send_delivers_the_range_asked_for(tmp_path):
    src = make_file(tmp_path / "s.bin", 24 * MiB, seed=7)
    sender, receiver = tcp_pair("sender")
    offset, count = 3 * MiB + 17, 16 * MiB
    xfer = types.SimpleNamespace(moved=0)
    fds = len(os.listdir("/proc/self/fd"))

    async def main():
        with open(src, "rb") as f:
            await _send(sender, f, offset, count, xfer)
        sender.close()

    got = {}
    with receiver:
        reader = threading.Thread(target=lambda: got.update(r=_read_to_eof(receiver)))
        reader.start()
        asyncio.run(main())
        reader.join(15)
    with open(src, "rb") as f:
        f.seek(offset)
        want = hashlib.sha256(f.read(count)).digest()
    assert got["r"][:2] == (want, count)
    assert xfer.moved == count
    assert len(os.listdir("/proc/self/fd")) <= fds  # the thread's duplicate is closed


def test_a_cancelled_send_stops_within_the_poll_and_lets_the_socket_close(tmp_path):
    """The peer reads nothing, so sendfile blocks in the kernel; a cancel
    (Ctrl-C, --max-time, a stall) must not wait for the file's end: the
    thread sees the stop within SEND_POLL and closes its descriptor, so
    closing the socket closes the connection (the peer gets EOF)."""
    src = make_file(tmp_path / "s.bin", 64 * MiB, seed=8)
    sender, receiver = tcp_pair("sender")
    xfer = types.SimpleNamespace(moved=0)

    async def main():
        with open(src, "rb") as f:
            task = asyncio.ensure_future(_send(sender, f, 0, 64 * MiB, xfer))
            await asyncio.sleep(0.5)
            assert not task.done()  # blocked: the peer reads nothing
            task.cancel()
            t0 = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t0 < 0.1  # the task ends at once...
            sender.close()
            return time.monotonic()

    with receiver:
        closed_at = asyncio.run(main())
        _, n, eof_at = _read_to_eof(receiver)
    assert 0 < n < 64 * MiB
    assert eof_at - closed_at < SEND_POLL + 1.0  # ... and the thread within the poll
    assert xfer.moved == 0
