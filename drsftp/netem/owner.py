"""The process that owns one emulated link or topology.

It makes the namespaces and the links (plan.py), prints one JSON line when ready,
forwards packets (tun backend) or just waits (tc backend), and removes
everything it made on SIGTERM/SIGINT/SIGHUP, on error, and when its parent
dies if asked (--pdeathsig).  After a kill -9, `drsftp netem down` removes
the namespaces it left (the TUN devices vanish with their descriptors).

    python -m drsftp.netem.owner --name NAME (--spec JSON | --topology JSON) [--pdeathsig]
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
from .plan import WireEnd, topology_plan, two_node_plan
from .shaper import Shaper
from .spec import LinkSpec
from .tcnetem import netem_args, read_wire_stats
from .topospec import TopologySpec
from .tun import READ_SIZE, TimerFD, open_tun, segments_and_wire_size

STATS_EVERY = 0.5
READ_BURST = 256


class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop()


class LinkOwner:
    """Owns one two-node link (a LinkSpec) or one topology (a TopologySpec)."""

    def __init__(self, name: str, spec: LinkSpec | TopologySpec) -> None:
        self.spec = spec
        self.plan = topology_plan(name, spec) if isinstance(spec, TopologySpec) else two_node_plan(name, spec)
        self.names = Names(name)
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
        plan = self.plan
        state = nsmod.read_state(plan.name)
        if nsmod.link_namespaces(plan.name) or (state and nsmod.owner_pid_alive(state)):
            raise NetemError(f"a link or topology named {plan.name!r} is up already (drsftp netem down {plan.name})")
        for ns in plan.nodes.values():
            run(["ip", "netns", "add", ns])
            self.made_ns.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        backend = plan.backend
        if backend in ("auto", "tc"):
            try:
                self._build_tc()
                backend = "tc"
            except NetemError as exc:
                if backend == "tc":
                    raise NetemError(f"tc backend unavailable: {exc}") from exc
                for wire in plan.wires:  # undo half-made veth pairs
                    for end in wire.ends:
                        run(["ip", "-n", end.ns, "link", "delete", end.dev], check=False)
                backend = "tun"
        if backend == "tun":
            self._build_tun()
        self.backend = backend
        self._route_node_addresses()
        for ns in plan.nodes.values():
            for key, value in plan.sysctls.items():
                self._set_sysctl(ns, key, value)
        info = self._describe()
        os.makedirs(nsmod.STATE_DIR, exist_ok=True)
        tmp = self.names.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f, indent=1)
        os.replace(tmp, self.names.state_file)
        self.wrote_state = True
        return info

    def _describe(self) -> dict:
        plan = self.plan
        nodes = plan.node_entries()
        for entry in nodes.values():
            entry["sysctls"] = nsmod.read_sysctls(entry["namespace"], nsmod.REPORTED_SYSCTLS)
        info: dict = {"name": plan.name, "kind": "topology" if plan.topology else "link", "pid": os.getpid(),
                      "backend": self.backend, "spec": self.spec.as_dict(), "nodes": nodes,
                      "links": plan.wire_entries()}
        if not plan.topology:  # the two-node form's own keys
            (wire,) = plan.wires
            info["sides"] = {end.node: {"namespace": end.ns, "device": end.dev, "address": end.addr,
                                        "sysctls": nodes[end.node]["sysctls"]} for end in wire.ends}
        info["started"] = time.time()
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

    @staticmethod
    def _configure_end(end: WireEnd, peer: WireEnd) -> None:
        ns = ["ip", "-n", end.ns]
        run(ns + ["link", "set", "dev", end.dev, "up", "txqueuelen", "10000", "mtu", "1500"])
        run(ns + ["addr", "add", f"{end.addr}/32", "peer", f"{peer.addr}/32", "dev", end.dev])

    def _route_node_addresses(self) -> None:
        """Each topology node's loopback address, reached by each direct
        neighbour over their wire (docs/NETEM.md#topologies)."""
        plan = self.plan
        for node, addr in plan.node_addrs.items():
            ns = plan.nodes[node]
            run(["ip", "-n", ns, "addr", "add", f"{addr}/32", "dev", "lo"])
        for node, addr in plan.node_addrs.items():
            for own, peer in plan.neighbours(node):
                run(["ip", "-n", own.ns, "route", "add", f"{plan.node_addrs[peer.node]}/32", "via", peer.addr,
                     "dev", own.dev, "src", addr])

    def _build_tun(self) -> None:
        for wire in self.plan.wires:
            for end in wire.ends:
                try:
                    fd = open_tun(end.dev)
                except OSError as exc:
                    raise NetemError(f"cannot create TUN device {end.dev}: {exc.strerror}") from exc
                self.tun_fds.append(fd)
                run(["ip", "link", "set", "dev", end.dev, "netns", end.ns])
            x, y = wire.ends
            self._configure_end(x, y)
            self._configure_end(y, x)
            spec = wire.spec
            for direction in wire.directions:
                self.shapers[direction] = Shaper(rate=spec.rate, delay=spec.one_way, queue_packets=spec.queue_packets,
                                                 loss=spec.loss, jitter=spec.jitter, rng=self.rng)

    def _build_tc(self) -> None:
        for wire in self.plan.wires:
            x, y = wire.ends
            # gso_max_segs 1: TCP hands the qdisc 1500-byte packets, never 64 KB
            # GSO super-packets, so netem's loss and its packet limit count real
            # packets; a link with neither keeps GSO, the faster (docs/NETEM.md#the-tc-backend)
            segs = ["gso_max_segs", "1"] if wire.spec.rate or wire.spec.loss else []
            run(["ip", "link", "add", x.dev, "netns", x.ns, "address", x.mac, *segs,
                 "type", "veth", "peer", "name", y.dev, "netns", y.ns, "address", y.mac, *segs])
            for end, peer in ((x, y), (y, x)):
                ns = ["ip", "-n", end.ns]
                # a point-to-point link as the tun backend's: no IPv6 link-local
                # chatter and no ARP crosses the emulated link
                run(ns + ["link", "set", "dev", end.dev, "addrgenmode", "none"])
                self._configure_end(end, peer)
                run(ns + ["neigh", "replace", peer.addr, "lladdr", peer.mac, "dev", end.dev, "nud", "permanent"])
                run(["tc", "-n", end.ns, "qdisc", "add", "dev", end.dev, "root", "netem", *netem_args(wire.spec)])

    # -- running ---------------------------------------------------------------
    def serve(self) -> None:
        if self.backend == "tun":
            self._forward()
        else:  # the kernel shapes; whoever asks reads its counters (tcnetem.read_wire_stats)
            while True:
                signal.pause()

    def _forward(self) -> None:
        """One loop for every wire: each TUN fd's packets go through its
        direction's shaper to the other end's fd (one process, one core)."""
        routes: dict[int, tuple[int, Shaper, deque[tuple[float, bytes]]]] = {}
        fds = iter(self.tun_fds)
        for link, fd_x, fd_y in zip(self.plan.wires, fds, fds, strict=True):  # tun_fds: each wire's two ends
            routes[fd_x] = (fd_y, self.shapers[link.directions[0]], deque())
            routes[fd_y] = (fd_x, self.shapers[link.directions[1]], deque())
        ep = select.epoll()
        timer = TimerFD()
        for fd in (*routes, timer.fd):
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
            return {**read_wire_stats(self.plan.wire_entries()), "time": time.time()}
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
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--spec", help="a two-node link: LinkSpec's fields as JSON")
    what.add_argument("--topology", help="a topology: TopologySpec.as_dict() as JSON")
    ap.add_argument("--pdeathsig", action="store_true")
    args = ap.parse_args(argv)
    parent = os.getppid()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if args.pdeathsig:
        _set_pdeathsig()
        if os.getppid() != parent:
            return 1  # the parent died before prctl took effect
    spec: LinkSpec | TopologySpec
    if args.topology:
        spec = TopologySpec.from_dict(json.loads(args.topology))
    else:
        spec = LinkSpec(**json.loads(args.spec)).validate()
    owner = LinkOwner(args.name, spec)
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
