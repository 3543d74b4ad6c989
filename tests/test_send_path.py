"""The client's put data path (blocking sends in a thread: sendfile, or
copies to a peer on this host), on loopback, each path forced both ways."""

import asyncio
import hashlib
import os
import threading
import time
import types

import pytest
from conftest import make_file, tcp_pair

from drsftp.client.transfer import filesend
from drsftp.client.transfer.filesend import SEND_POLL
from drsftp.client.transfer.streammode import send_file
from drsftp.io import sockopt

MiB = 1 << 20


@pytest.fixture(params=["sendfile", "copy"])
def path(request, monkeypatch):
    """Which path send_file takes: the peer is on this host (copies) or not."""
    calls = []
    real = filesend.send_range

    def spy(fd, fileno, offset, count, stop, copy, on_sent=None):
        calls.append(copy)
        return real(fd, fileno, offset, count, stop, copy, on_sent)

    monkeypatch.setattr(sockopt, "peer_on_this_host", lambda sock: request.param == "copy")
    monkeypatch.setattr(filesend, "send_range", spy)
    yield request.param
    assert calls and all(c == (request.param == "copy") for c in calls)


def _read_to_eof(sock, timeout=10.0) -> tuple[bytes, int, float]:
    sock.settimeout(timeout)
    h, n = hashlib.sha256(), 0
    while chunk := sock.recv(MiB):
        h.update(chunk)
        n += len(chunk)
    return h.digest(), n, time.monotonic()


def test_a_send_delivers_the_range_asked_for(tmp_path, path):
    src = make_file(tmp_path / "s.bin", 24 * MiB, seed=7)
    sender, receiver = tcp_pair("sender")
    offset, count = 3 * MiB + 17, 16 * MiB
    xfer = types.SimpleNamespace(moved=0)
    fds = len(os.listdir("/proc/self/fd"))

    async def main():
        with open(src, "rb") as f:
            await send_file(sender, f, offset, count, xfer)
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


def test_a_cancelled_send_stops_within_the_poll_and_lets_the_socket_close(tmp_path, path):
    """The peer reads nothing, so sendfile blocks in the kernel; a cancel
    (Ctrl-C, --max-time, a stall) must not wait for the file's end: the
    thread sees the stop within SEND_POLL and closes its descriptor, so
    closing the socket closes the connection (the peer gets EOF)."""
    src = make_file(tmp_path / "s.bin", 64 * MiB, seed=8)
    sender, receiver = tcp_pair("sender")
    xfer = types.SimpleNamespace(moved=0)

    async def main():
        with open(src, "rb") as f:
            task = asyncio.ensure_future(send_file(sender, f, 0, 64 * MiB, xfer))
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


@pytest.mark.parametrize("copy", [False, True], ids=["sendfile", "copy"])
def test_a_file_that_ends_early_sends_what_it_has(tmp_path, copy):
    """Both paths stop at the file's end, not at the count asked for (the
    server's ALLO check tells a short upload), and report what went."""
    src = make_file(tmp_path / "s.bin", 3 * MiB + 5, seed=9)
    sender, receiver = tcp_pair("receiver")
    sockopt.block_with_send_timeout(sender, SEND_POLL)
    got, seen = {}, []
    with receiver:
        receiver.setblocking(True)
        reader = threading.Thread(target=lambda: got.update(r=_read_to_eof(receiver)))
        reader.start()
        with open(src, "rb") as f, sender:
            n = filesend.send_range(sender.fileno(), f.fileno(), MiB, 8 * MiB, threading.Event(), copy, seen.append)
        reader.join(15)
    assert n == sum(seen) == 2 * MiB + 5
    assert got["r"][1] == 2 * MiB + 5


@pytest.mark.parametrize("local, peer, same", [
    ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.2", True), ("::1", "::1", True),
    ("::ffff:127.0.0.1", "::ffff:127.0.0.1", True), ("10.9.0.1", "10.9.0.1", True),
    ("10.9.0.1", "10.9.0.2", False), ("fd00::1", "fd00::2", False), ("fe80::1%eth0", "fe80::2%eth0", False),
    ("10.9.0.1", "not-an-address", False),
])
def test_a_peer_is_on_this_host_by_a_loopback_or_its_own_address(local, peer, same):
    assert sockopt.same_host(local, peer) is same


def test_a_connected_socket_knows_its_peer_is_here():
    sender, receiver = tcp_pair("sender")
    with sender, receiver:
        assert sockopt.peer_on_this_host(sender) and sockopt.peer_on_this_host(receiver)
    assert not sockopt.peer_on_this_host(sender)  # closed: no peer to ask about
