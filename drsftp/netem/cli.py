"""`drsftp netem up|exec|down|status`: two-node links and topologies (docs/NETEM.md)."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
from typing import Any

from . import namespaces as nsmod
from .errors import NetemError, NetemUsageError
from .link import start_owner
from .plan import topology_namespace
from .spec import LinkSpec, check_name, parse_duration, parse_loss, parse_rate, parse_sysctl
from .tcnetem import read_stats, read_wire_stats
from .topospec import TopologySpec, check_node, parse_edge


def add_parser(sub) -> None:
    p = sub.add_parser("netem", help="emulated WAN links between network namespaces")
    nsub = p.add_subparsers(dest="netem_command", required=True)

    up = nsub.add_parser("up", help="bring a link or a topology up (stays up until down)")
    up.add_argument("name", help="1-8 lower-case letters or digits")
    up.add_argument("--link", action="append", default=[], metavar="NODE-NODE:rtt=R,rate=B[,loss=L,queue=Q]",
                    help="a topology instead of the client-server link: one emulated link between two nodes "
                         "(repeat for more; each node a namespace)")
    up.add_argument("--rtt", help="round-trip delay, split evenly (default 100ms)")
    up.add_argument("--rate", help="bottleneck rate, e.g. 100mbit, 1gbit, 0 = unlimited (default 100mbit)")
    up.add_argument("--queue", type=int, help="drop-tail queue in packets (default: 1 BDP, at least 64)")
    up.add_argument("--loss", help="random loss per packet, e.g. 0.1%%")
    up.add_argument("--jitter", help="uniform delay variation, never reorders, e.g. 1ms")
    up.add_argument("--backend", choices=("auto", "tc", "tun"), default="auto",
                    help="tc (netem qdiscs), tun (drsftp's own shaper) or auto: tc where it works")
    up.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE",
                    help="set on every node, e.g. net.ipv4.tcp_wmem=\"4096 16384 33554432\"")
    up.add_argument("--cc", choices=("bbr", "cubic", "reno"), help="congestion control on every node")
    up.add_argument("--seed", type=int, help="random seed for loss and jitter")
    up.add_argument("--json", action="store_true", help="print the link or topology as JSON")
    up.set_defaults(func=cmd_up)

    ex = nsub.add_parser("exec", help="run a command on one node: exec NAME client|server|NODE -- CMD ...")
    ex.add_argument("name", help="the link's or topology's name")
    ex.add_argument("node", help="client or server (a link), or a topology's node")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="the command and its arguments")
    ex.set_defaults(func=cmd_exec)

    down = nsub.add_parser("down", help="remove a link or topology (or --all of them, crashed ones too)")
    down.add_argument("name", nargs="?", help="the link's or topology's name")
    down.add_argument("--all", action="store_true", help="every drsftp link and topology, crashed ones too")
    down.add_argument("--crashed", action="store_true",
                      help="only those whose owner process is gone, leaving running ones (other users') alone")
    down.set_defaults(func=cmd_down)

    st = nsub.add_parser("status", help="list links and topologies, their settings, sysctls and counters")
    st.add_argument("--json", action="store_true", help="print them as JSON")
    st.set_defaults(func=cmd_status)


PER_LINK = ("rtt", "rate", "queue", "loss", "jitter")


def _sysctls_from_args(args) -> dict:
    sysctls = dict(parse_sysctl(s) for s in args.sysctl)
    if args.cc:
        sysctls["net.ipv4.tcp_congestion_control"] = args.cc
    return sysctls


def spec_from_args(args) -> LinkSpec:
    return LinkSpec(
        rtt=parse_duration(args.rtt or "100ms"), rate=parse_rate(args.rate or "100mbit"), queue=args.queue,
        loss=parse_loss(args.loss or "0"), jitter=parse_duration(args.jitter or "0"), backend=args.backend,
        sysctls=_sysctls_from_args(args), seed=args.seed,
    ).validate()


def topology_from_args(args) -> TopologySpec:
    given = [f"--{k}" for k in PER_LINK if getattr(args, k) is not None]
    if given:
        raise NetemUsageError(f"with --link each link carries its own settings: drop {', '.join(given)}")
    return TopologySpec(links=tuple(parse_edge(text) for text in args.link), backend=args.backend,
                        sysctls=_sysctls_from_args(args), seed=args.seed).validate()


def cmd_up(args) -> int:
    name = check_name(args.name)
    spec: LinkSpec | TopologySpec = topology_from_args(args) if args.link else spec_from_args(args)
    proc, info = start_owner(name, spec, detach=True)
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        print(describe(info))
    return 0


def describe(info: dict) -> str:
    if info.get("kind") == "topology":
        return describe_topology(info)
    s = info["spec"]
    lines = [f"link {info['name']}: backend {info['backend']}, {_link_settings(s)}"]
    for side, d in info["sides"].items():
        lines.append(f"  {side:6} namespace {d['namespace']:16} address {d['address']}")
        for k, v in d.get("sysctls", {}).items():
            lines.append(f"           {k} = {v}")
    lines.append(f"run:  drsftp netem exec {info['name']} client -- CMD    remove: drsftp netem down {info['name']}")
    return "\n".join(lines)


def _link_settings(s: dict) -> str:
    rate = f"{s['rate'] / 1e6:g} Mbit/s" if s["rate"] else "unlimited"
    return (f"rtt {s['rtt'] * 1000:g} ms, rate {rate}, queue {s['queue_packets']} packets, "
            f"loss {s['loss'] * 100:g}%, jitter {s['jitter'] * 1000:g} ms")


def describe_topology(info: dict) -> str:
    nodes, links = info["nodes"], info["links"]
    lines = [f"topology {info['name']}: backend {info['backend']}, {len(nodes)} nodes, {len(links)} links"]
    for node, d in nodes.items():
        reach = ", ".join(f"{peer} reaches it at {addr}" for peer, addr in d["addresses"].items())
        lines.append(f"  node {node}: namespace {d['namespace']}, address {d['address']}; {reach}")
    for link in links:
        lines.append(f"  link {link['label']}: {_link_settings(link['spec'])}")
    first: dict = next(iter(nodes.values()), {})
    for k, v in first.get("sysctls", {}).items():
        lines.append(f"  (every node) {k} = {v}")
    lines.append(f"run:  drsftp netem exec {info['name']} NODE -- CMD    remove: drsftp netem down {info['name']}")
    return "\n".join(lines)


def cmd_exec(args) -> int:
    name = check_name(args.name)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise NetemUsageError("exec needs a command after --")
    nsmod.require_root()
    ns = node_namespace(name, args.node)
    return run_forwarding(nsmod.ns_exec_prefix(ns) + argv)


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
SI_KERNEL = 0x80  # siginfo's si_code for a signal the kernel sent (a terminal's Ctrl-C, a hangup): kill(2)'s is 0


def run_forwarding(argv: list[str]) -> int:
    """``argv`` run as a child; SIGTERM, SIGINT and SIGHUP sent to this
    process (kill, a supervisor) are passed on to it, so a server inside a
    node stops when the exec is told to, and the exit status is the
    child's (128 + N for a signal N, as a shell's).  A terminal's Ctrl-C
    or hangup already reaches the child in its process group: not sent
    twice."""
    mask = set(FORWARDED)
    signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        child = subprocess.Popen(argv, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, mask))
        while child.poll() is None:
            info = signal.sigtimedwait(mask, 0.2)
            if info is not None and info.si_code != SI_KERNEL:
                child.send_signal(info.si_signo)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, mask)
    rc = child.returncode
    return 128 - rc if rc < 0 else rc


def node_namespace(name: str, node: str) -> str:
    """The namespace of ``node`` (client/server of a link, or a topology's
    node), from the state file; a crashed owner's by the naming rule."""
    state = nsmod.read_state(name)
    if state and state.get("kind") == "topology":
        if node not in state["nodes"]:
            raise NetemError(f"topology {name!r} has no node {node!r} (nodes: {', '.join(state['nodes'])})")
        ns = state["nodes"][node]["namespace"]
    elif state:
        if node not in nsmod.SIDES:
            raise NetemError(f"link {name!r} has the nodes client and server, not {node!r}")
        ns = nsmod.Names(name).ns(node)
    else:
        ns = nsmod.Names(name).ns(node) if node in nsmod.SIDES else topology_namespace(name, check_node(node))
    if ns not in nsmod.list_namespaces():
        raise NetemError(f"no link or topology named {name!r} with a node {node!r} is up")
    return ns


def cmd_down(args) -> int:
    every = args.all or args.crashed
    if every and args.name:
        raise NetemUsageError("give a link name or --all, not both")
    if not every and not args.name:
        raise NetemUsageError("give a link name or --all")
    name = None if every else check_name(args.name)
    nsmod.require_root()
    targets = sorted(nsmod.our_links_on_host()) if name is None else [name]
    if args.crashed:
        targets = [t for t in targets if not _alive(t)]
    removed = [t for t in targets if nsmod.remove_link(t)]
    if not every and not removed:
        raise NetemError(f"no link named {args.name!r} exists")
    print(f"removed: {', '.join(removed) if removed else 'nothing'}")
    return 0


def _alive(name: str) -> bool:
    state = nsmod.read_state(name)
    return bool(state and nsmod.owner_pid_alive(state))


def cmd_status(args) -> int:
    nsmod.require_root()
    out: list[dict[str, Any]] = []
    for name in sorted(nsmod.our_links_on_host()):
        state = nsmod.read_state(name)
        entry = {"name": name, "alive": bool(state and nsmod.owner_pid_alive(state)), "info": state,
                 "stats": _stats(name, state)}
        out.append(entry)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if not out:
        print("no links")
    for e in out:
        if e["info"]:
            print(describe(e["info"]) + ("" if e["alive"] else "\n  (owner gone: crashed; run down)"))
        else:
            print(f"{e['name']}: leftover namespaces, no owner (drsftp netem down {e['name']})")
        st = e["stats"]
        if st:
            for d, counters in st.items():
                if isinstance(counters, dict):  # a direction: c2s, s2c, or a topology's A>B
                    print(f"  {d}: {direction_counters(counters)}")
    return 0


def _stats(name: str, state: dict | None) -> dict | None:
    """A link's counters: the kernel's now for a live tc link, else the owner's last file."""
    if state and state.get("backend") == "tc" and nsmod.owner_pid_alive(state):
        if "links" in state:
            return read_wire_stats(state["links"])
        spec = state["spec"]  # a state file written before topologies
        return read_stats(nsmod.Names(name), loss=spec["loss"], rate=spec["rate"])
    try:
        with open(nsmod.Names(name).stats_file) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def direction_counters(c: dict) -> str:
    """One direction's counters; tc's netem counts loss and queue drops as one figure
    where the link has both (tcnetem.direction_stats)."""
    if c.get("lost") is None:
        drops = f"{c['dropped']} dropped (loss and queue together)"
    else:
        drops = f"{c['lost']} lost, {c['queue_drops']} queue drops"
    return f"{c['packets_in']} packets in, {drops}, {c['bytes_out']} bytes out"
