"""`drsftp netem up|exec|down|status`."""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

from . import namespaces as nsmod
from .errors import NetemError, NetemUsageError
from .link import start_owner
from .spec import LinkSpec, check_name, parse_duration, parse_loss, parse_rate, parse_sysctl
from .tcnetem import read_stats


def add_parser(sub) -> None:
    p = sub.add_parser("netem", help="emulated WAN links between network namespaces")
    nsub = p.add_subparsers(dest="netem_command", required=True)

    up = nsub.add_parser("up", help="bring a link up (stays up until down)")
    up.add_argument("name", help="1-8 lower-case letters or digits")
    up.add_argument("--rtt", default="100ms", help="round-trip delay, split evenly (default 100ms)")
    up.add_argument("--rate", default="100mbit", help="bottleneck rate, e.g. 100mbit, 1gbit, 0 = unlimited")
    up.add_argument("--queue", type=int, help="drop-tail queue in packets (default: 1 BDP, at least 64)")
    up.add_argument("--loss", default="0", help="random loss per packet, e.g. 0.1%%")
    up.add_argument("--jitter", default="0", help="uniform delay variation, never reorders, e.g. 1ms")
    up.add_argument("--backend", choices=("auto", "tc", "tun"), default="auto",
                    help="tc (netem qdiscs), tun (drsftp's own shaper) or auto: tc where it works")
    up.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE",
                    help="set on both sides, e.g. net.ipv4.tcp_wmem=\"4096 16384 33554432\"")
    up.add_argument("--cc", choices=("bbr", "cubic", "reno"), help="congestion control on both sides")
    up.add_argument("--seed", type=int, help="random seed for loss and jitter")
    up.add_argument("--json", action="store_true", help="print the link as JSON")
    up.set_defaults(func=cmd_up)

    ex = nsub.add_parser("exec", help="run a command on one side: exec NAME client|server -- CMD ...")
    ex.add_argument("name", help="the link's name")
    ex.add_argument("side", choices=nsmod.SIDES, help="which end's namespace")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="the command and its arguments")
    ex.set_defaults(func=cmd_exec)

    down = nsub.add_parser("down", help="remove a link (or --all of them, crashed ones too)")
    down.add_argument("name", nargs="?", help="the link's name")
    down.add_argument("--all", action="store_true", help="every drsftp link, crashed ones too")
    down.set_defaults(func=cmd_down)

    st = nsub.add_parser("status", help="list links, their settings, sysctls and counters")
    st.add_argument("--json", action="store_true", help="print the links as JSON")
    st.set_defaults(func=cmd_status)


def spec_from_args(args) -> LinkSpec:
    sysctls = dict(parse_sysctl(s) for s in args.sysctl)
    if args.cc:
        sysctls["net.ipv4.tcp_congestion_control"] = args.cc
    return LinkSpec(
        rtt=parse_duration(args.rtt), rate=parse_rate(args.rate), queue=args.queue,
        loss=parse_loss(args.loss), jitter=parse_duration(args.jitter), backend=args.backend,
        sysctls=sysctls, seed=args.seed,
    ).validate()


def cmd_up(args) -> int:
    name = check_name(args.name)
    spec = spec_from_args(args)
    proc, info = start_owner(name, spec, detach=True)
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        print(describe(info))
    return 0


def describe(info: dict) -> str:
    s = info["spec"]
    rate = f"{s['rate'] / 1e6:g} Mbit/s" if s["rate"] else "unlimited"
    lines = [
        f"link {info['name']}: backend {info['backend']}, rtt {s['rtt'] * 1000:g} ms, rate {rate}, "
        f"queue {s['queue_packets']} packets, loss {s['loss'] * 100:g}%, jitter {s['jitter'] * 1000:g} ms"
    ]
    for side, d in info["sides"].items():
        lines.append(f"  {side:6} namespace {d['namespace']:16} address {d['address']}")
        for k, v in d.get("sysctls", {}).items():
            lines.append(f"           {k} = {v}")
    lines.append(f"run:  drsftp netem exec {info['name']} client -- CMD    remove: drsftp netem down {info['name']}")
    return "\n".join(lines)


def cmd_exec(args) -> int:
    name = check_name(args.name)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise NetemUsageError("exec needs a command after --")
    nsmod.require_root()
    ns = nsmod.Names(name).ns(args.side)
    if ns not in nsmod.list_namespaces():
        raise NetemError(f"no link named {name!r} is up")
    try:
        return subprocess.call(nsmod.ns_exec_prefix(ns) + argv)
    except KeyboardInterrupt:
        return 130


def cmd_down(args) -> int:
    if args.all and args.name:
        raise NetemUsageError("give a link name or --all, not both")
    if not args.all and not args.name:
        raise NetemUsageError("give a link name or --all")
    name = None if args.all else check_name(args.name)
    nsmod.require_root()
    targets = sorted(nsmod.our_links_on_host()) if name is None else [name]
    removed = [t for t in targets if nsmod.remove_link(t)]
    if not args.all and not removed:
        raise NetemError(f"no link named {args.name!r} exists")
    print(f"removed: {', '.join(removed) if removed else 'nothing'}")
    return 0


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
            print(f"link {e['name']}: leftover namespaces, no owner (drsftp netem down {e['name']})")
        st = e["stats"]
        if st:
            for d in ("c2s", "s2c"):
                if d in st:
                    print(f"  {d}: {direction_counters(st[d])}")
    return 0



def _stats(name: str, state: dict | None) -> dict | None:
    """A link's counters: the kernel's now for a live tc link, else the owner's last file."""
    if state and state.get("backend") == "tc" and nsmod.owner_pid_alive(state):
        spec = state["spec"]
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
