"""The programs a bench run starts and how: drsftp's and GridFTP's servers and
clients on an emulated link, with GridFTP's private hosts file."""

from __future__ import annotations

import os
import socket
import subprocess

from ...netem.link import Link
from .tunings import DRSFTP, PASSWORD, PY, USER, drsftp_server
from .tunings import PORT as DRS_PORT

GRIDFTP_PORT = 2811
__all__ = ["DRSFTP", "DRS_PORT", "GRIDFTP_PORT", "PASSWORD", "PY", "USER", "finish_client", "hosts_wrap",
           "hosts_wrapped", "server_argv"]


def hosts_wrap(link: Link, side: str, argv: list[str], workdir: str) -> list[str]:
    """hosts_wrapped for one side ("server" or "client") of ``link``, its hosts file in ``workdir``."""
    me = link.server_addr if side == "server" else link.client_addr
    return hosts_wrapped(me, argv, os.path.join(workdir, f"hosts-{side}"))


def hosts_wrapped(me: str, argv: list[str], hosts: str) -> list[str]:
    """GridFTP resolves the host's own name, which the namespaces cannot:
    give the process a hosts file of its own (HOSTS, naming ``me``) in a
    private mount namespace (the host's /etc/hosts is never touched)."""
    with open(hosts, "w") as f:
        f.write(f"127.0.0.1 localhost\n{me} {socket.gethostname()}\n")
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, hosts, *argv]


def server_argv(kind: str, link: Link, root: str, workdir: str) -> tuple[list[str], int]:
    """The command of a ``kind`` server ("drsftp" or "gridftp") on the link's server side, and its port."""
    if kind == "drsftp":
        return drsftp_server(root, link.server_addr, port=DRS_PORT), DRS_PORT
    argv = ["/usr/sbin/globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-p", str(GRIDFTP_PORT),
            "-control-interface", link.server_addr, "-data-interface", link.server_addr,
            "-fork", "-no-chdir", "-d", "error"]
    return hosts_wrap(link, "server", argv, workdir), GRIDFTP_PORT


def finish_client(client: subprocess.Popen, max_time: float, result: dict) -> tuple[bytes, bytes]:
    """The client's output once it ends; past ``max_time`` seconds it is
    killed and ``result`` says so."""
    try:
        return client.communicate(timeout=max_time)
    except subprocess.TimeoutExpired:
        client.kill()
        result["error"] = f"over {max_time:g} s"
        return client.communicate()
