"""Network namespaces, names and the state directory of emulated links.

Every object a link makes is named after it: namespaces ``drs-NAME-c`` and
``drs-NAME-s``, devices ``drsNAMEc``/``drsNAMEs``; a topology's are
``drs-NAME-NODE`` and ``drsNAME{K:02x}a``/``b`` (plan.py).  State lives in
``/run/drsftp/netem/NAME.json``.  Each node holds point-to-point addresses
and no default route, so nothing inside can reach any other host.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

from .errors import NetemError

STATE_DIR = os.environ.get("DRSFTP_NETEM_STATE", "/run/drsftp/netem")
CLIENT_ADDR = "10.201.0.1"  # private, and only ever inside our namespaces
SERVER_ADDR = "10.201.0.2"
CLIENT_MAC = "02:d5:00:00:00:01"  # locally administered; only ever on our veth pair
SERVER_MAC = "02:d5:00:00:00:02"
# a two-node link's drs-NAME-c/-s and a topology's drs-NAME-NODE (topospec.NODE_RE)
NS_RE = re.compile(r"^drs-([a-z0-9]{1,8})-([a-z][a-z0-9_]{0,11})$")
SIDES = ("client", "server")


@dataclass(frozen=True)
class Names:
    link: str

    def ns(self, side: str) -> str:
        return f"drs-{self.link}-{side[0]}"

    def dev(self, side: str) -> str:
        return f"drs{self.link}{side[0]}"

    def addr(self, side: str) -> str:
        return CLIENT_ADDR if side == "client" else SERVER_ADDR

    def mac(self, side: str) -> str:
        return CLIENT_MAC if side == "client" else SERVER_MAC

    @property
    def state_file(self) -> str:
        return os.path.join(STATE_DIR, f"{self.link}.json")

    @property
    def stats_file(self) -> str:
        return os.path.join(STATE_DIR, f"{self.link}.stats.json")


def check_side(side: str) -> str:
    if side not in SIDES:
        raise NetemError(f"side must be 'client' or 'server', not {side!r}")
    return side


def run(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise NetemError(f"{args[0]} is not installed (iproute2 is needed)") from exc
    except subprocess.TimeoutExpired as exc:
        raise NetemError(f"{' '.join(args)} timed out") from exc
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise NetemError(f"{' '.join(args)}: {msg[-1] if msg else 'failed'}")
    return proc


def require_root() -> None:
    if os.geteuid() != 0:
        raise NetemError("emulated links need root (network namespaces, TUN devices); run as root")
    if not os.path.exists("/dev/net/tun") and not os.path.isdir("/proc/sys/net"):
        raise NetemError("this kernel offers no network namespaces or TUN")


def list_namespaces() -> list[str]:
    proc = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def link_namespaces(link: str) -> list[str]:
    """The namespaces of link or topology ``link`` that exist now."""
    return [ns for ns in list_namespaces() if (m := NS_RE.match(ns)) and m.group(1) == link]


def link_devices(link: str) -> list[str]:
    """Devices of ``link`` in this (the root) namespace: TUN devices not yet moved in."""
    dev_re = re.compile(rf"^drs{re.escape(link)}([cs]|[0-9a-f]{{2}}[ab])$")
    try:
        return [d for d in os.listdir("/sys/class/net") if dev_re.match(d)]
    except OSError:
        return []


def our_links_on_host() -> set[str]:
    """Names of links with a namespace or a state file here."""
    links = {m.group(1) for ns in list_namespaces() if (m := NS_RE.match(ns))}
    if os.path.isdir(STATE_DIR):
        for f in os.listdir(STATE_DIR):
            if f.endswith(".json") and not f.endswith(".stats.json"):
                links.add(f[:-5])
    return links


def ns_pids(ns: str) -> list[int]:
    proc = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_ns_processes(ns: str, grace: float = 2.0) -> None:
    """End the processes running inside one of our namespaces, by PID."""
    pids = ns_pids(ns)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def delete_namespace(ns: str) -> None:
    if ns in list_namespaces():
        kill_ns_processes(ns)
        run(["ip", "netns", "delete", ns], check=False)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def read_state(link: str) -> dict | None:
    try:
        with open(Names(link).state_file) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def owner_pid_alive(state: dict) -> bool:
    """The link's owner process still runs (and is ours: same command line)."""
    pid = state.get("pid")
    if not pid or not _alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return False
    return b"drsftp.netem.owner" in cmd and state["name"].encode() in cmd


def remove_link(link: str, timeout: float = 10.0) -> bool:
    """Stop the owner (it cleans up), then remove whatever is left.  Returns
    True if anything of the link existed."""
    names = Names(link)
    state = read_state(link)
    existed = state is not None
    if state and owner_pid_alive(state):
        _signal(state["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(state["pid"]):
            time.sleep(0.05)
        if _alive(state["pid"]):
            _signal(state["pid"], signal.SIGKILL)
    for ns in link_namespaces(link):
        existed = True
        delete_namespace(ns)
    for dev in link_devices(link):
        existed = True
        run(["ip", "link", "delete", dev], check=False)
    for path in (names.state_file, names.stats_file):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return existed


def ns_exec_prefix(ns: str) -> list[str]:
    return ["ip", "netns", "exec", ns]


def read_sysctls(ns: str, keys: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key in keys:
        proc = run(ns_exec_prefix(ns) + ["sysctl", "-n", key], check=False)
        out[key] = " ".join(proc.stdout.split()) if proc.returncode == 0 else None
    return out


REPORTED_SYSCTLS = [
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
]
