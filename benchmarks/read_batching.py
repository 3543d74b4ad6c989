"""Receiver CPU per GB at a paced rate, by how the reader waits for data.

    python benchmarks/read_batching.py              # 1 Gbit/s, 300 MB, 3 rounds (~25 s)
    python benchmarks/read_batching.py 2.5e9 600e6  # rate (bit/s), bytes per run

Loopback, no root.  A sender thread paces 64 KiB writes at the rate, as a
link delivers them; the receiver (this thread, CPU from RUSAGE_THREAD)
writes what it reads to /dev/null:

- sock_recv_into:  asyncio loop.sock_recv_into, then sleep(0) (drsftp's old
                   get: a future and two epoll_ctl per read;
                   docs/decisions/0009-sock-recv-into-read-loop.md)
- protocol:        asyncio BufferedProtocol (the socket stays registered)
- protocol+lowat:  the same with SO_RCVLOWAT 256 KiB / 512 KiB (drsftp now:
                   1/8 of the receive window, within 64-512 KiB)
- blocking recv:   8 KiB blocking recv_into (ftplib's retrbinary)

Rounds interleave the modes; the figure is the median.
"""

import asyncio
import os
import resource
import socket
import statistics
import sys
import threading
import time

CHUNK = 64 * 1024
MODES = ("sock_recv_into", "protocol", "protocol+lowat 256K", "protocol+lowat 512K", "blocking recv")


def _pace(sock: socket.socket, total: int, rate: float) -> None:
    data, sent, t0 = b"x" * CHUNK, 0, time.monotonic()
    while sent < total:
        sock.sendall(data)
        sent += CHUNK
        ahead = sent * 8 / rate - (time.monotonic() - t0)
        if ahead > 0.001:
            time.sleep(ahead)
    sock.close()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


async def _recv_into_loop(sock, sink) -> int:
    loop, buf = asyncio.get_running_loop(), bytearray(4 << 20)
    view, reads = memoryview(buf), 0
    while n := await loop.sock_recv_into(sock, buf):
        sink.write(view[:n])
        reads += 1
        await asyncio.sleep(0)
    return reads


class _Sink(asyncio.BufferedProtocol):
    def __init__(self, sink, done):
        self.buf = bytearray(4 << 20)
        self.view, self.sink, self.done, self.reads = memoryview(self.buf), sink, done, 0

    def get_buffer(self, hint):
        return self.buf

    def buffer_updated(self, n):
        self.sink.write(self.view[:n])
        self.reads += 1

    def eof_received(self):
        self.done.set_result(None)

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_result(None)


async def _protocol(sock, sink) -> int:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    transport, proto = await loop.create_connection(lambda: _Sink(sink, done), sock=sock)
    await done
    transport.close()
    return proto.reads


def _blocking(sock, sink) -> int:
    sock.setblocking(True)
    buf, reads = bytearray(8192), 0
    while n := sock.recv_into(buf):
        sink.write(memoryview(buf)[:n])
        reads += 1
    return reads


def run(mode: str, rate: float, total: int) -> tuple[float, float]:
    """(receiver CPU seconds per GB, reads per second)."""
    lst = socket.create_server(("127.0.0.1", 0))
    snd = socket.create_connection(lst.getsockname())
    rcv, _ = lst.accept()
    lst.close()
    rcv.setblocking(False)
    if "lowat" in mode:
        rcv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, int(mode.split()[-1][:-1]) * 1024)
    threading.Thread(target=_pace, args=(snd, total, rate), daemon=True).start()
    t0, c0 = time.monotonic(), _cpu()
    with open(os.devnull, "wb", buffering=0) as sink, rcv:
        if mode == "blocking recv":
            reads = _blocking(rcv, sink)
        elif mode == "sock_recv_into":
            reads = asyncio.run(_recv_into_loop(rcv, sink))
        else:
            reads = asyncio.run(_protocol(rcv, sink))
    return (_cpu() - c0) / (total / 1e9), reads / (time.monotonic() - t0)


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 1e9
    total = int(float(sys.argv[2])) if len(sys.argv) > 2 else 300_000_000
    rounds = {m: [] for m in MODES}
    for _ in range(3):
        for m in MODES:
            rounds[m].append(run(m, rate, total))
    base = statistics.median(c for c, _ in rounds[MODES[0]])
    print(f"receiver at {rate / 1e9:g} Gbit/s paced, {total / 1e6:.0f} MB x 3 rounds (median)")
    print(f"{'reader':22} {'CPU s/GB':>9} {'vs sock_recv_into':>18} {'reads/s':>8}")
    for m in MODES:
        cpu = statistics.median(c for c, _ in rounds[m])
        reads = statistics.median(r for _, r in rounds[m])
        print(f"{m:22} {cpu:9.2f} {cpu / base:17.2f}x {reads:8.0f}")


if __name__ == "__main__":
    main()
