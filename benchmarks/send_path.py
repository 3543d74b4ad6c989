"""Sender CPU per GB at a paced rate, by how the sender waits for buffer room.

    python benchmarks/send_path.py              # 1 Gbit/s, 300 MB, 3 rounds (~45 s)
    python benchmarks/send_path.py 2.5e9 600e6  # rate (bit/s), bytes per run

Loopback, no root.  A child process reads at the rate (64 KiB reads, paced
as a link drains them); this process sends a file from the page cache
with SO_SNDBUF set as DRS sets it on a short path (256 KiB) and as a
large hand-tuned buffer (4 MiB).  CPU is this process's (all threads):

- sock_sendfile:     asyncio loop.sock_sendfile (drsftp's old put: a
                     wakeup, two epoll_ctl and a callback each time about
                     a third of the buffer frees;
                     docs/decisions/0008-asyncio-sock-sendfile.md)
- thread sendfile:   drsftp's put now (drsftp.client.transfer.streammode.send_file: a
                     blocking sendfile in a thread, SO_SNDTIMEO to see a stop)
- blocking send 8K:  read 8 KiB, sendall (ftplib's storbinary)

Rounds interleave the modes; the figure is the median.
"""

import asyncio
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
import types

from drsftp.client.transfer.streammode import send_file

CHUNK = 64 * 1024
MODES = ("sock_sendfile", "thread sendfile", "blocking send 8K")
SNDBUFS = (256 * 1024, 4 << 20)


def _paced_reader(port: int, rate: float) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    buf, got, t0 = bytearray(CHUNK), 0, time.monotonic()
    while n := sock.recv_into(buf):
        got += n
        ahead = got * 8 / rate - (time.monotonic() - t0)
        if ahead > 0.001:
            time.sleep(ahead)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(mode: str, sndbuf: int, path: str, rate: float) -> float:
    """Sender CPU seconds per GB."""
    total = os.path.getsize(path)
    lst = socket.create_server(("127.0.0.1", 0))
    reader = multiprocessing.get_context("fork").Process(target=_paced_reader, args=(lst.getsockname()[1], rate))
    reader.start()
    sock, _ = lst.accept()
    lst.close()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    c0 = _cpu()
    with open(path, "rb") as f, sock:
        if mode == "blocking send 8K":
            while block := f.read(8192):
                sock.sendall(block)
        else:
            sock.setblocking(False)

            async def send():
                if mode == "sock_sendfile":
                    await asyncio.get_running_loop().sock_sendfile(sock, f, 0, total)
                else:
                    await send_file(sock, f, 0, total, types.SimpleNamespace(moved=0))

            asyncio.run(send())
    cpu = _cpu() - c0
    reader.join(60)
    return cpu / (total / 1e9)


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 1e9
    total = int(float(sys.argv[2])) if len(sys.argv) > 2 else 300_000_000
    with tempfile.NamedTemporaryFile(prefix="drs-send-") as tmp:
        block = os.urandom(1 << 20)
        for _ in range(total >> 20):  # a MiB at a time: the file, not a copy of it in memory
            tmp.write(block)
        tmp.flush()
        cells = {(m, b): [] for b in SNDBUFS for m in MODES}
        for _ in range(3):
            for cell in cells:
                cells[cell].append(run(*cell, tmp.name, rate))
    print(f"sender at {rate / 1e9:g} Gbit/s paced, {total / 1e6:.0f} MB x 3 rounds (median CPU s/GB)")
    print(f"{'sender':18} " + " ".join(f"{f'SO_SNDBUF {b >> 10} KiB':>18}" for b in SNDBUFS))
    for m in MODES:
        print(f"{m:18} " + " ".join(f"{statistics.median(cells[m, b]):18.2f}" for b in SNDBUFS))


if __name__ == "__main__":
    main()
