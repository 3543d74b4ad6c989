"""Receiver window strategies on an emulated 1 Gbit/s, 100 ms link (root).

    python benchmarks/open_start.py            # all four, ~40 s
    python benchmarks/open_start.py open-clamp # one

A plain Python sender (64 MiB forced send buffer) and receiver, six seconds
each; the receiver prints its throughput per RTT with rcv_ssthresh (the
ceiling of the window it advertises) from TCP_INFO:

- manual:      25 MB SO_RCVBUFFORCE before connect() (2 x BDP, hand tuning)
- small-clamp: nothing before connect(); every RTT W = 2 x bytes of the last
               RTT, SO_RCVBUF = 0.8 W and TCP_WINDOW_CLAMP = W (DRS, closed start)
- open-buf:    32 MiB before connect(), 0.8 x 256 KiB right after; every RTT
               SO_RCVBUF = 0.8 W only
- open-clamp:  as open-buf, with TCP_WINDOW_CLAMP = W too (DRS's open start)

docs/DESIGN.md cites it.
"""

import json
import socket
import sys
import time

from drsftp.io.sockopt import SO_RCVBUFFORCE, SO_SNDBUFFORCE, TCP_WINDOW_CLAMP, tcp_info
from drsftp.netem.link import Link, wait_for_port

MODES = ("manual", "small-clamp", "open-buf", "open-clamp")
RTT, SECONDS = 0.1, 6.0


def receive(mode: str, host: str, port: int) -> dict:
    s = socket.socket()
    if mode == "manual":
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 25_000_000)
    elif mode.startswith("open"):
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
    s.connect((host, port))
    window = 256 << 10
    if mode.startswith("open"):
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, int(0.8 * window))
    s.setblocking(False)
    buf = bytearray(4 << 20)
    t0 = last = time.monotonic()
    got = last_got = 0
    rows = []
    while time.monotonic() - t0 < SECONDS:
        try:
            n = s.recv_into(buf)
            if n == 0:
                break
            got += n
        except BlockingIOError:
            time.sleep(0.0005)
        now = time.monotonic()
        if now - last >= RTT:
            per_rtt, last_got, last = got - last_got, got, now
            if mode != "manual":
                window = max(window, min(2 * per_rtt, 64 << 20))
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, int(0.8 * window))
                if mode != "open-buf":
                    s.setsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP, window)
            rows.append([round(now - t0, 2), round(per_rtt * 8 / RTT / 1e6), tcp_info(s).get("rcv_ssthresh")])
    return {"mbps": got * 8 / SECONDS / 1e6, "rows": rows}


def send(port: int) -> None:
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("0.0.0.0", port))
    lst.listen(1)
    conn, _ = lst.accept()
    conn.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
    data, t0 = b"x" * (1 << 20), time.monotonic()
    try:
        while time.monotonic() - t0 < SECONDS + 1:
            conn.sendall(data)
    except OSError:
        pass


def main(modes: list[str]) -> None:
    with Link(rtt=RTT, rate=1e9) as link:
        for i, mode in enumerate(modes):
            port = 5001 + i
            sender = link.popen("server", [sys.executable, __file__, "--send", str(port)])
            wait_for_port(link, "server", port)
            r = link.run("client", [sys.executable, __file__, "--receive", mode, link.server_addr, str(port)],
                         timeout=60, capture_output=True, text=True)
            sender.wait(30)
            res = json.loads(r.stdout)
            print(f"{mode}: {res['mbps']:.0f} Mbit/s over {SECONDS:g} s;  t(s) Mbit/s rcv_ssthresh:")
            for row in res["rows"][:24:2]:
                print("   ", *row)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--send"]:
        send(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--receive"]:
        print(json.dumps(receive(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    else:
        chosen = sys.argv[1:] or list(MODES)
        bad = [m for m in chosen if m not in MODES]
        if bad:
            sys.exit(f"unknown mode {bad[0]!r}; choose from {', '.join(MODES)}")
        main(chosen)
