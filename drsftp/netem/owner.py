"""The process that owns one emulated link.

It makes the namespaces and the link, prints one JSON line when ready,
forwards packets (tun backend) or just waits (tc backend), and removes
everything it made on SIGTERM/SIGINT/SIGHUP, on error, and when its parent
dies if asked (--pdeathsig).  After a kill -9, `drsftp netem down` removes
the namespaces it left (the TUN devices vanish with their descriptors).

    python -m drsftp.netem.owner --name NAME --spec JSON [--pdeathsig]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import select
import signal
import sys
import time
from collections import deque

from . import namespaces as nsmod
from .errors import NetemError
from .namespaces import Names, run
from .shaper import Shaper
from .spec import LinkSpec
from .tcnetem import netem_args, read_stats
from .tun import READ_SIZE, TimerFD, open_tun, segments_and_wire_size

STATS_EVERY = 0.5
READ_BURST = 256


class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop()


class LinkOwner:
    def __init__(self, name: str, spec: LinkSpec) -> None:
        self.names = Names(name)
        self.spec = spec
        self.backend: str | None = None
        self.made_ns: list[str] = []
        self.tun_fds: list[int] = []
        self.rng = random.Random(spec.seed)
        self.shapers: dict[str, Shaper] = {}
        self.write_errors = 0
        self.wrote_state = False

    # -- set-up --------------------------------------------------------------
    def build(self) -> dict:
        nsmod.require_root()
        n = self.names
        present = nsmod.list_namespaces()
        state = nsmod.read_state(n.link)
        if any(n.ns(s) in present for s in nsmod.SIDES) or (state and nsmod.owner_pid_alive(state)):
            raise NetemError(f"link {n.link!r} is up already (drsftp netem down {n.link})")
        for side in nsmod.SIDES:
            run(["ip", "netns", "add", n.ns(side)])
            self.made_ns.append(n.ns(side))
            run(["ip", "-n", n.ns(side), "link", "set", "lo", "up"])
        backend = self.spec.backend
        if backend in ("auto", "tc"):
            try:
                self._build_tc()
                backend = "tc"
            except NetemError as exc:
                if backend == "tc":
                    raise NetemError(f"tc backend unavailable: {exc}") from exc
                for side in nsmod.SIDES:  # undo a half-made veth
                    run(["ip", "-n", n.ns(side), "link", "delete", n.dev(side)], check=False)
                backend = "tun"
        if backend == "tun":
            self._build_tun()
        self.backend = backend
        for side in nsmod.SIDES:
            for key, value in self.spec.sysctls.items():
                self._set_sysctl(n.ns(side), key, value)
        info = {
            "name": n.link,
            "pid": os.getpid(),
            "backend": backend,
            "spec": self.spec.as_dict(),
            "sides": {
                side: {
                    "namespace": n.ns(side),
                    "device": n.dev(side),
                    "address": n.addr(side),
                    "sysctls": nsmod.read_sysctls(n.ns(side), nsmod.REPORTED_SYSCTLS),
                }
                for side in nsmod.SIDES
            },
            "started": time.time(),
        }
        os.makedirs(nsmod.STATE_DIR, exist_ok=True)
        tmp = n.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f, indent=1)
        os.replace(tmp, n.state_file)
        self.wrote_state = True
        return info

    @staticmethod
    def _set_sysctl(ns: str, key: str, value: str) -> None:
        proc = run(nsmod.ns_exec_prefix(ns) + ["sysctl", "-q", "-w", f"{key}={value}"], check=False)
        if proc.returncode == 0:
            return
        if key == "net.ipv4.tcp_congestion_control":
            allowed = run(["sysctl", "-n", "net.ipv4.tcp_allowed_congestion_control"], check=False).stdout.split()
            if value not in allowed:
                raise NetemError(
                    f"congestion control {value!r} is not in the host's net.ipv4."
                    f"tcp_allowed_congestion_control ({' '.join(allowed)}); namespaces may only pick "
                    f"from that list: add it on the host first"
                )
        raise NetemError(f"cannot set {key}={value} inside the namespace: "
                         f"{(proc.stderr or '').strip() or 'failed'}")

    def _configure_side(self, side: str) -> None:
        n = self.names
        other = "server" if side == "client" else "client"
        ns = ["ip", "-n", n.ns(side)]
        run(ns + ["link", "set", "dev", n.dev(side), "up", "txqueuelen", "10000", "mtu", "1500"])
        run(ns + ["addr", "add", f"{n.addr(side)}/32", "peer", f"{n.addr(other)}/32", "dev", n.dev(side)])

    def _build_tun(self) -> None:
        n = self.names
        for side in nsmod.SIDES:
            try:
                fd = open_tun(n.dev(side))
            except OSError as exc:
                raise NetemError(f"cannot create TUN device {n.dev(side)}: {exc.strerror}") from exc
            self.tun_fds.append(fd)
            run(["ip", "link", "set", "dev", n.dev(side), "netns", n.ns(side)])
            self._configure_side(side)
        one_way, spec = self.spec.one_way, self.spec
        for direction in ("c2s", "s2c"):
            self.shapers[direction] = Shaper(rate=spec.rate, delay=one_way, queue_packets=spec.queue_packets,
                                             loss=spec.loss, jitter=spec.jitter, rng=self.rng)

    def _build_tc(self) -> None:
        n, spec = self.names, self.spec
        # gso_max_segs 1: TCP hands the qdisc 1500-byte packets, never 64 KB
        # GSO super-packets, so netem's loss and its packet limit count real
        # packets; a link with neither keeps GSO, the faster (docs/NETEM.md#the-tc-backend)
        segs = ["gso_max_segs", "1"] if spec.rate or spec.loss else []
        run(["ip", "link", "add", n.dev("client"), "netns", n.ns("client"), "address", n.mac("client"), *segs,
             "type", "veth", "peer", "name", n.dev("server"), "netns", n.ns("server"), "address", n.mac("server"),
             *segs])
        for side in nsmod.SIDES:
            other = "server" if side == "client" else "client"
            ns = ["ip", "-n", n.ns(side)]
            # a point-to-point link as the tun backend's: no IPv6 link-local
            # chatter and no ARP crosses the emulated link
            run(ns + ["link", "set", "dev", n.dev(side), "addrgenmode", "none"])
            self._configure_side(side)
            run(ns + ["neigh", "replace", n.addr(other), "lladdr", n.mac(other), "dev", n.dev(side),
                      "nud", "permanent"])
            run(["tc", "-n", n.ns(side), "qdisc", "add", "dev", n.dev(side), "root", "netem", *netem_args(spec)])

    # -- running ---------------------------------------------------------------
    def serve(self) -> None:
        if self.backend == "tun":
            self._forward()
        else:  # the kernel shapes; whoever asks reads its counters (tcnetem.read_stats)
            while True:
                signal.pause()

    def _forward(self) -> None:
        fd_c, fd_s = self.tun_fds
        routes: dict[int, tuple[int, Shaper, deque[tuple[float, bytes]]]] = {
            fd_c: (fd_s, self.shapers["c2s"], deque()),
            fd_s: (fd_c, self.shapers["s2c"], deque()),
        }
        ep = select.epoll()
        timer = TimerFD()
        for fd in (fd_c, fd_s, timer.fd):
            ep.register(fd, select.EPOLLIN)
        next_stats = time.monotonic() + STATS_EVERY
        queues = [r[2] for r in routes.values()]
        try:
            while True:
                heads = [q[0][0] for q in queues if q]
                if heads:
                    timer.arm(min(heads))
                events = ep.poll(STATS_EVERY)
                now = time.monotonic()
                for fd, _ in events:
                    if fd == timer.fd:
                        timer.clear()
                        continue
                    _out, shaper, queue = routes[fd]
                    for _ in range(READ_BURST):
                        try:
                            pkt = os.read(fd, READ_SIZE)
                        except BlockingIOError:
                            break
                        segs, wire = segments_and_wire_size(pkt)
                        release = shaper.offer(now, wire, segs)
                        if release is not None:
                            queue.append((release, pkt))
                now = time.monotonic()
                for out, _shaper, queue in routes.values():
                    while queue and queue[0][0] <= now:
                        try:
                            os.write(out, queue.popleft()[1])
                        except OSError:
                            self.write_errors += 1
                if now >= next_stats:
                    self._write_stats()
                    next_stats = now + STATS_EVERY
        finally:
            ep.close()
            timer.close()

    def stats(self) -> dict:
        if self.backend == "tc":
            return {**read_stats(self.names, loss=self.spec.loss, rate=self.spec.rate), "time": time.time()}
        out: dict[str, object] = {"backend": self.backend, "write_errors": self.write_errors, "time": time.time()}
        for direction, shaper in self.shapers.items():
            out[direction] = shaper.stats.as_dict()
        return out

    def _write_stats(self) -> None:
        path = self.names.stats_file
        try:
            with open(path + ".tmp", "w") as f:
                json.dump(self.stats(), f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass

    # -- tear-down -------------------------------------------------------------
    def cleanup(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # finish cleaning whatever arrives
        if self.wrote_state:
            self._write_stats()
        for fd in self.tun_fds:
            try:
                os.close(fd)  # the TUN devices vanish with their descriptors
            except OSError:
                pass
        for ns in self.made_ns:
            nsmod.delete_namespace(ns)
        if self.wrote_state:
            try:
                os.unlink(self.names.state_file)
            except FileNotFoundError:
                pass


def _set_pdeathsig() -> None:
    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="drsftp.netem.owner")
    ap.add_argument("--name", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--pdeathsig", action="store_true")
    args = ap.parse_args(argv)
    parent = os.getppid()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if args.pdeathsig:
        _set_pdeathsig()
        if os.getppid() != parent:
            return 1  # the parent died before prctl took effect
    fields = json.loads(args.spec)
    owner = LinkOwner(args.name, LinkSpec(**fields).validate())
    try:
        info = owner.build()
        print(json.dumps({"ready": info}), flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        owner.serve()
    except _Stop:
        pass
    except NetemError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    except Exception as exc:  # report, then clean up below
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    finally:
        owner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
