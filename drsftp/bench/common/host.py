"""What a bench run records of the host and the code it measured, and the
host profiles a run can set."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import time

from ...io.sockopt import read_host_limits

# Host profiles.  net.core.rmem_max/wmem_max are global (read-only inside a
# namespace), so `tuned` raises only the per-namespace TCP limits, as ESnet's
# host-tuning advice does for 10G hosts (tcp_rmem/tcp_wmem max 64 MiB).
PROFILES = {
    "default": {},
    "tuned": {"net.ipv4.tcp_rmem": "4096 131072 67108864", "net.ipv4.tcp_wmem": "4096 65536 67108864"},
}


def environment(force: bool = False, cc: str | None = None) -> dict:
    """The host a run measured on: kernel, cores, buffer limits, whether
    SO_*BUFFORCE was asked for (``force``) and could be used, the congestion
    control (``cc``, else the host's), and the code's commit."""
    import psutil  # (the bench extras: checked by options.need_bench_extras first)

    limits = read_host_limits()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "kernel": platform.release(),
        "machine": f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB",
        "host_sysctls": limits.as_dict(),
        "buffer_force_available": limits.can_force,
        "buffer_force_used": force and limits.can_force,
        "congestion_control": cc or limits.congestion_control,
        "commit": commit(),
    }


@functools.lru_cache(maxsize=1)
def commit() -> str | None:
    """The drsftp code measured: its git commit, "+" if the tree has changes."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the drsftp package
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+" if dirty else "")
