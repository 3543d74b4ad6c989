"""The two servers of a third-party run, each on its node address: `drsftp
serve` (FTP; with HTTPS beside it for the HTTP entries), GridFTP's server,
XRootD with XrdHttpTPC and macaroons.  Each lists the other as its peer:
drsftp's --third-party-peers (FTP's PORT/PASV and HTTP's COPY alike:
docs/HTTP.md, "Third-party copy"), and --tpc-ca-file the run's CA, which
XRootD's outbound copies trust through xrd.tlsca."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from ...netem.topology import Topology
from ..common.certs import make_certs
from ..common.peers import DRS_PORT, GRIDFTP_PORT, HTTPS_PORT, XRD_HTTPS_PORT, XRD_PORT, hosts_wrapped
from ..common.tunings import drsftp_server
from ..common.xrootd import TLSFiles, XRootDSetup, xrootd_argv

GRIDFTP = "/usr/sbin/globus-gridftp-server"
# the port each kind is ready on, and the one `ss` leaves out at A and B: FTP's
# control connections (an HTTP copy's data goes over its server's port)
READY = {"drsftp": DRS_PORT, "gridftp": GRIDFTP_PORT, "drsftp-https": HTTPS_PORT, "xrootd": XRD_HTTPS_PORT}
CONTROL = {"drsftp": DRS_PORT, "gridftp": GRIDFTP_PORT, "drsftp-https": DRS_PORT, "xrootd": XRD_PORT}
PROGRAMS = {"gridftp": ("globus-url-copy", GRIDFTP), "drsftp-https": ("gfal-copy",),
            "xrootd": ("gfal-copy", "/usr/bin/xrootd")}


def run_certs(topo: Topology, workdir: str) -> TLSFiles:
    """One CA and one certificate naming A's and B's node addresses, which both servers serve."""
    return make_certs(Path(workdir) / "tls", topo.node_addr("a"), topo.node_addr("b"))


def server_argv(topo: Topology, kind: str, node: str, peer: str, root: str, workdir: str,
                tls: TLSFiles | None = None, serve: tuple[str, ...] = ()) -> list[str]:
    """The command of ``node``'s server of ``kind`` serving ``root``, ``peer``
    its peer; ``serve``: a drsftp serve's further options (the entry's)."""
    me, other = topo.node_addr(node), topo.node_addr(peer)
    peers = ("--third-party-peers", other, "--data-interface", me, *serve)
    if kind == "drsftp":
        return drsftp_server(root, me, port=DRS_PORT, extra=peers)
    if kind == "gridftp":
        return hosts_wrapped(me, [GRIDFTP, "-aa", "-anonymous-user", "nobody", "-p", str(GRIDFTP_PORT),
                                  "-control-interface", me, "-data-interface", me, "-fork", "-no-chdir", "-d",
                                  "error"], os.path.join(workdir, f"hosts-{node}"))
    if tls is None:
        raise ValueError(f"a {kind} server needs the run's certificates")
    if kind == "drsftp-https":
        return drsftp_server(root, me, port=DRS_PORT, extra=(
            *peers, "--http-port", str(HTTPS_PORT), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
            "--tpc-ca-file", str(tls.ca)))
    if kind != "xrootd":
        raise ValueError(f"unknown third-party server {kind!r}")
    top = Path(workdir) / f"xrootd-{node}"
    top.mkdir(parents=True, exist_ok=True)
    secret = top / "secret.b64"  # XrdMacaroons' key, one per server (as drsftp serve's random one)
    secret.write_text(base64.b64encode(os.urandom(48)).decode() + "\n")
    # its node's namespace is its own: every host is admitted (the client, the peer)
    return xrootd_argv(XRootDSetup(XRD_PORT, XRD_HTTPS_PORT, Path(root), top / "server", tls, allow=None,
                                   tpc=True, macaroons_secret=secret))
