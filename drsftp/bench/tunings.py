"""The columns of the bench: how each tuning's server and client are run."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from ..netem.link import wait_for_port
from ..tuning import names as registered_tunings

PY = sys.executable
DRSFTP = [PY, "-m", "drsftp"]
USER, PASSWORD = "bench", "bench-password"  # serve wants 8 characters or more
PORT = 2121


@dataclass(frozen=True)
class Path:
    rate: float  # bit/s
    rtt: float  # s
    loss: float = 0.0
    queue: int | None = None

    @property
    def bdp(self) -> int:
        return int(self.rate * self.rtt / 8)

    @property
    def ceiling_mbps(self) -> float:
        """TCP goodput of the line: 1448 payload bytes per 1500-byte packet
        (timestamps on), no Ethernet framing on the TUN link."""
        return self.rate / 1e6 * 1448 / 1500

    def label(self) -> str:
        rate = f"{self.rate / 1e9:g} Gbit/s" if self.rate >= 1e9 else f"{self.rate / 1e6:g} Mbit/s"
        loss = f", loss {self.loss * 100:g}%" if self.loss else ""
        return f"{rate}, {self.rtt * 1000:g} ms{loss}"


@dataclass
class RunPlan:
    """Commands for one run of one tuning."""

    server: list[str]
    client: list[str]
    kind: str  # "drsftp" | "stock" (ftplib) | "curl"


# The columns.  The registry's strategies (drsftp.tuning) run as drsftp at
# both ends under their own names, except `fixed`, which the bench runs at
# three sizes, and `kernel`, which it runs as stock programs (never touching
# a buffer, as drsftp's `kernel` does not either).
BASELINES = {
    "stock-64k": "static 64 KiB buffers set before the handshake at both ends (old stock FTP)",
    "kernel": "stock pyftpdlib server + Python ftplib client: buffers never touched (autotuning)",
    "kernel-vsftpd": "vsftpd server + curl client from Debian: buffers never touched",
    "manual": "static 2 x BDP from the configured rate and RTT, before the handshake (hand tuning)",
    "probe-static": "static size from a short RTT/bandwidth probe before the transfer (NLANR-style)",
}
FIXED_SIZES = ("stock-64k", "manual", "probe-static")  # drsftp with --tuning fixed:SIZE
DRSFTP_TUNINGS = tuple(n for n in registered_tunings() if n not in ("fixed", "kernel"))
TUNINGS = (*BASELINES, *DRSFTP_TUNINGS)
_DRSFTP_DESCRIPTIONS = {
    "drs": "drsftp server and client: Dynamic Right-Sizing with the in-band DRS exchange",
    "drs-closed": "drs without the open start: right-sized from the first byte, slower ramp",
}
DESCRIPTIONS = {**BASELINES, **{n: _DRSFTP_DESCRIPTIONS.get(n, f"drsftp server and client with --tuning {n}")
                                for n in DRSFTP_TUNINGS}}


def available(name: str) -> str | None:
    """None if the tuning can run here, else why not."""
    if name == "kernel-vsftpd":
        missing = [p for p in ("vsftpd", "curl") if not (shutil.which(p) or os.path.exists(f"/usr/sbin/{p}"))]
        if missing:
            return f"{' and '.join(missing)} not installed (./run setup installs them as root)"
    return None


def drsftp_server(root: str, host: str, tuning: str, force: bool, port: int = PORT) -> list[str]:
    cmd = [*DRSFTP, "serve", "--root", root, "--host", host, "--port", str(port),
           "--user", USER, "--password", PASSWORD, "--tuning", tuning]
    return cmd + (["--force-buffers"] if force else [])


def drsftp_url(host: str, path: str, port: int = PORT) -> str:
    """The bench user's URL of ``path`` on a server drsftp_server started."""
    return f"ftp://{USER}:{PASSWORD}@{host}:{port}/{path}"


@contextlib.contextmanager
def serving(link, root: str, tuning: str = "drs", force: bool = False) -> Iterator[subprocess.Popen]:
    """`drsftp serve` of ``root`` on ``link``'s server side, ready, for the
    block (ended by its PID)."""
    server = link.popen("server", drsftp_server(root, link.server_addr, tuning, force),
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(link, "server", PORT)
        yield server
    finally:
        server.terminate()
        server.wait(10)


def drsftp_client(direction: str, url: str, local: str, out_json: str, tuning: str, force: bool,
                  max_time: float) -> list[str]:
    if direction == "get":
        cmd = [*DRSFTP, "get", url, local]
    else:
        cmd = [*DRSFTP, "put", local, url]
    cmd += ["--tuning", tuning, "--json", out_json, "--max-time", f"{max_time:g}", "--progress", "never"]
    return cmd + (["--force-buffers"] if force else [])


def plan(name: str, *, direction: str, root: str, host: str, local: str, remote: str, out_json: str,
         path: Path, force: bool, max_time: float, probe_size: int | None = None,
         vsftpd_conf: str | None = None, port: int = PORT) -> RunPlan:
    url = drsftp_url(host, remote, port)
    if name in FIXED_SIZES or name in DRSFTP_TUNINGS:
        tuning = {
            "stock-64k": "fixed:64k",
            "manual": f"fixed:{max(2 * path.bdp, 65536)}",
            "probe-static": f"fixed:{probe_size or 65536}",
        }.get(name, name)
        fixed_force = force and name != "stock-64k"
        return RunPlan(drsftp_server(root, host, tuning, fixed_force, port),
                    drsftp_client(direction, url, local, out_json, tuning, fixed_force, max_time), "drsftp")
    if name == "kernel":
        server = [PY, "-m", "pyftpdlib", "-i", host, "-p", str(port), "-w", "-d", root,
                  "-u", USER, "-P", PASSWORD]
        client = [PY, "-m", "drsftp.bench.stockclient", direction, url, local, "--json", out_json,
                  "--max-time", f"{max_time:g}"]
        return RunPlan(server, client, "stock")
    if name == "kernel-vsftpd":
        anon = f"ftp://{host}:{port}/{'pub/' if direction == 'put' else ''}{remote}"
        if direction == "get":
            client = ["curl", "-sS", "-o", local, "--max-time", f"{max_time:g}", "-w", "%{json}", anon]
        else:
            client = ["curl", "-sS", "-T", local, "--max-time", f"{max_time:g}", "-w", "%{json}", anon]
        if vsftpd_conf is None:
            raise ValueError("kernel-vsftpd needs a vsftpd configuration (vsftpd_config)")
        return RunPlan(["vsftpd", vsftpd_conf], client, "curl")
    raise ValueError(f"unknown tuning {name!r}")


def vsftpd_config(root: str, host: str, workdir: str, port: int = PORT) -> str:
    """An anonymous-only vsftpd for the bench, run as the launching user.
    Downloads from ROOT, uploads into ROOT/pub."""
    empty = os.path.join(workdir, "vsftpd-empty")
    os.makedirs(empty, exist_ok=True)
    os.makedirs(os.path.join(root, "pub"), exist_ok=True)
    os.chmod(os.path.join(root, "pub"), 0o777)
    conf = os.path.join(workdir, "vsftpd.conf")
    with open(conf, "w") as f:
        f.write("\n".join([
            "listen=YES", "listen_ipv6=NO", f"listen_address={host}", f"listen_port={port}",
            "background=NO", "run_as_launching_user=YES", "anonymous_enable=YES", "local_enable=NO",
            "no_anon_password=YES", f"anon_root={root}", "write_enable=YES", "anon_upload_enable=YES",
            "anon_other_write_enable=YES", "anon_umask=022", f"secure_chroot_dir={empty}",
            "seccomp_sandbox=NO", "pasv_enable=YES", "connect_from_port_20=NO", "xferlog_enable=NO",
            "vsftpd_log_file=/dev/null", "dual_log_enable=NO", "syslog_enable=NO", "",
        ]))
    return conf
