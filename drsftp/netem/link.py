"""Python API: an emulated WAN link as a context manager.

    with Link(rtt=0.1, rate=100e6) as link:
        srv = link.popen("server", ["drsftp", "serve", ...])
        link.run("client", ["ping", "-c", "3", link.server_addr], timeout=10)

Everything it made (namespaces, devices, the owner process, processes
started with popen) is gone when the block ends, on error or Ctrl-C too.
"""

from __future__ import annotations

import json
import secrets
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Self

from . import namespaces as nsmod
from .errors import NetemError
from .namespaces import Names
from .spec import LinkSpec, check_name
from .tcnetem import read_stats
from .topospec import TopologySpec


def start_owner(name: str, spec: LinkSpec | TopologySpec, *, detach: bool, timeout: float = 60.0):
    """Start the owner process of a two-node link (LinkSpec) or a topology
    (TopologySpec); returns (Popen, ready info).  Raises NetemError."""
    nsmod.require_root()
    if isinstance(spec, TopologySpec):
        what, arg = "topology", ["--topology", json.dumps(spec.as_dict())]
    else:
        what, arg = "link", ["--spec", json.dumps(asdict(spec))]
    cmd = [sys.executable, "-m", "drsftp.netem.owner", "--name", name, *arg]
    if not detach:
        cmd.append("--pdeathsig")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=detach, text=True)
    assert proc.stdout is not None and proc.stderr is not None  # (PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
    except BaseException:
        stop_process(proc)
        raise
    try:
        msg = json.loads(line) if line else {}
    except ValueError:
        msg = {}
    if "ready" in msg:
        return proc, msg["ready"]
    stop_process(proc)
    err = msg.get("error") or (proc.stderr.read().strip().splitlines() or ["owner exited"])[-1]
    raise NetemError(f"cannot bring {what} {name!r} up: {err}")


def stop_children(children: list[subprocess.Popen]) -> None:
    """End processes started inside the namespaces (by PID): TERM, then KILL after 5 s."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    for child in children:
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    children.clear()


def stop_process(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Terminate, then kill after ``timeout``; close its pipes."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


class Emulated:
    """What a Link and a Topology share: an owner process started on up()
    and ended on close() with every process started inside, and commands
    run in one of its namespaces (``namespace(where)``, the subclass's)."""

    def __init__(self, spec, name: str | None) -> None:
        self.spec = spec
        self.name = check_name(name) if name else secrets.token_hex(4)
        self.names = Names(self.name)
        self.info: dict = {}
        self._owner: subprocess.Popen | None = None
        self._children: list[subprocess.Popen] = []
        self.final_stats: dict | None = None

    # -- lifecycle ---------------------------------------------------------
    def up(self) -> Self:
        self._owner, self.info = start_owner(self.name, self.spec, detach=False)
        return self

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        stop_children(self._children)
        if self._owner is not None:
            stop_process(self._owner)
            self._owner = None
            self.final_stats = self._read_stats()
        nsmod.remove_link(self.name)  # whatever a crash may have left

    # -- use -----------------------------------------------------------------
    @property
    def backend(self) -> str:
        return self.info.get("backend", "?")

    def namespace(self, where: str) -> str:
        raise NotImplementedError

    def command(self, where: str, argv: list[str]) -> list[str]:
        return nsmod.ns_exec_prefix(self.namespace(where)) + list(argv)

    def popen(self, where: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start a process in ``where``'s namespace; it is ended (by PID) on close."""
        proc = subprocess.Popen(self.command(where, argv), **kwargs)
        self._children.append(proc)
        return proc

    def run(self, where: str, argv: list[str], *, timeout: float, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(where, argv), timeout=timeout, **kwargs)

    def _read_stats(self) -> dict | None:
        try:
            with open(self.names.stats_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @property
    def owner_pid(self) -> int | None:
        return self._owner.pid if self._owner else None


class Link(Emulated):
    def __init__(self, rtt: float = 0.1, rate: float = 100e6, *, queue: int | None = None,
                 loss: float = 0.0, jitter: float = 0.0, backend: str = "auto",
                 sysctls: dict | None = None, name: str | None = None, seed: int | None = None) -> None:
        super().__init__(LinkSpec(rtt=rtt, rate=rate, queue=queue, loss=loss, jitter=jitter,
                                  backend=backend, sysctls=dict(sysctls or {}), seed=seed).validate(), name)

    @property
    def client_addr(self) -> str:
        return self.names.addr("client")

    @property
    def server_addr(self) -> str:
        return self.names.addr("server")

    def namespace(self, side: str) -> str:
        return self.names.ns(nsmod.check_side(side))

    def stats(self) -> dict:
        """Both directions' counters: the kernel's now (tc), the forwarder's
        of at most 0.5 s ago (tun)."""
        if self.backend == "tc" and self._owner is not None:
            return read_stats(self.names, loss=self.spec.loss, rate=self.spec.rate)
        return self._read_stats() or {}


def wait_for_port(link, side: str, port: int, timeout: float = 10.0) -> None:
    """Until something listens on ``port`` on ``side`` (checked inside the
    namespace); ``link`` is a Link or a Topology (whose sides are its nodes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = link.run(side, ["ss", "-ltnH", f"sport = :{port}"], timeout=5).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise NetemError(f"nothing listens on port {port} on the {side} side")
