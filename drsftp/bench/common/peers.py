"""The programs a bench run starts and how: drsftp's (FTP, and HTTPS beside
it), GridFTP's and XRootD's servers and clients on an emulated link, with
GridFTP's private hosts file."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from ...netem.link import Link
from .tunings import DRSFTP, PASSWORD, PY, USER, drsftp_server
from .tunings import PORT as DRS_PORT
from .xrootd import TLSFiles, XRootDSetup, xrootd_argv

GRIDFTP_PORT = 2811
HTTPS_PORT = 8443  # drsftp serve --http-port
XRD_PORT, XRD_HTTPS_PORT = 1094, 8444  # xrootd's root:// and XrdHttp's https://
SERVERS = ("drsftp", "drsftp-https", "gridftp", "xrootd")
__all__ = ["DRSFTP", "DRS_PORT", "GRIDFTP_PORT", "HTTPS_PORT", "PASSWORD", "PY", "SERVERS", "USER", "XRD_HTTPS_PORT",
           "finish_client", "hosts_wrap", "hosts_wrapped", "server_argv"]


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


def server_argv(kind: str, link: Link, root: str, workdir: str,
                tls: TLSFiles | None = None) -> tuple[list[str], int]:
    """The command of a ``kind`` server (of SERVERS) on the link's server
    side serving ``root``, and the port it is ready on.  "drsftp-https" is
    `drsftp serve` with HTTPS beside FTP, "xrootd" XRootD's XrdHttp: both
    serve ``tls``'s certificate."""
    if kind == "drsftp":
        return drsftp_server(root, link.server_addr, port=DRS_PORT), DRS_PORT
    if kind in ("drsftp-https", "xrootd") and tls is None:
        raise ValueError(f"a {kind} server needs a TLS certificate")
    if kind == "drsftp-https" and tls is not None:
        extra = ("--http-port", str(HTTPS_PORT), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
        return drsftp_server(root, link.server_addr, port=DRS_PORT, extra=extra), HTTPS_PORT
    if kind == "xrootd" and tls is not None:
        # the server side's namespace is its own: any client host (the link's client) is admitted
        setup = XRootDSetup(XRD_PORT, XRD_HTTPS_PORT, Path(root), Path(workdir) / "xrootd", tls, allow=None)
        return xrootd_argv(setup), XRD_HTTPS_PORT
    if kind != "gridftp":
        raise ValueError(f"unknown server {kind!r} (of {', '.join(SERVERS)})")
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
