"""The third-party bench's entries (run.py): which servers each runs, where
its client runs, its command line.  FTP: `drsftp copy` between two `drsftp
serve`, GridFTP's `globus-url-copy` between two `globus-gridftp-server`,
direct gets on B.  HTTP (docs/HTTP.md, "Third-party copy"): `drsftp copy
https://A https://B` (a COPY pull by B) and gfal-copy, the client FTS3
drives transfers with, pulling between two `drsftp serve --http-port` and
between two XRootD servers (XrdHttpTPC); gfal2 asks each end for a
macaroon itself (RETRIEVE_BEARER_TOKEN), as in tests/test_http_tpc.py."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..common.datasets import Workload
from ..common.peers import DRS_PORT, DRSFTP, GRIDFTP_PORT, HTTPS_PORT, PASSWORD, USER, XRD_HTTPS_PORT
from ..common.xrootd import TLSFiles

# gfal2's Python scripts under the system's interpreter, not the bench's venv
GFAL_PYTHON = "/usr/bin/python3"
# davix sends no credentials until asked, and then not Basic ones: the
# header up front (RFC 7617) logs gfal2's macaroon requests in
BASIC = "Authorization: Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SERVERS = ("drsftp", "gridftp", "drsftp-https", "xrootd")


@dataclass
class Ctx:
    """Where one run's ends are: node addresses, roots, the workload, the
    run's certificates (the HTTP entries')."""

    a: str  # A's node address
    b: str
    root_a: str  # the workloads live under it
    root_b: str  # emptied before every run
    wl: Workload
    json_out: str
    tls: TLSFiles | None = None

    def drs(self, host: str, tail: str) -> str:
        return f"ftp://{USER}:{PASSWORD}@{host}:{DRS_PORT}/{tail}"

    def gsi(self, host: str, root: str, tail: str) -> str:
        return f"ftp://{host}:{GRIDFTP_PORT}{root}/{tail}"

    def https(self, host: str, tail: str, *, scheme: str = "https", login: bool = True,
              port: int = HTTPS_PORT) -> str:
        who = f"{USER}:{PASSWORD}@" if login else ""
        return f"{scheme}://{who}{host}:{port}/{tail}"

    @property
    def name(self) -> str:  # the workload's file or directory, the same at both ends
        return self.wl.files[0][0] if not self.wl.tree else self.wl.name + "/"

    @property
    def tree(self) -> bool:
        return self.wl.tree

    def certs(self) -> TLSFiles:
        if self.tls is None:
            raise ValueError("an HTTP entry needs the run's certificates")
        return self.tls


@dataclass(frozen=True)
class ThirdEntry:
    """One column: which servers (of SERVERS), where the client runs, its command."""

    name: str
    servers: str
    node: str  # where the client runs: "client" (third-party) or "b" (direct)
    tree: bool  # the tree workload (200 x 1 MiB) or the one file
    argv: Callable[[Ctx], list[str]]
    description: str
    serve: tuple[str, ...] = ()  # options both drsftp serves take beside the bench's

    @property
    def third_party(self) -> bool:
        return self.node == "client"

    @property
    def http(self) -> bool:
        return self.servers in ("drsftp-https", "xrootd")


def _copy(*flags: str) -> Callable[[Ctx], list[str]]:
    def cmd(c: Ctx) -> list[str]:
        tree = ["-r"] if c.tree else []
        return [*DRSFTP, "copy", "-q", "--progress", "never", "--json", c.json_out, *tree, *flags,
                c.drs(c.a, c.name), c.drs(c.b, c.name)]
    return cmd


def _get(*flags: str) -> Callable[[Ctx], list[str]]:
    def cmd(c: Ctx) -> list[str]:
        tree = ["-r"] if c.tree else []
        return [*DRSFTP, "get", "-q", "--progress", "never", "--json", c.json_out, *tree, *flags,
                c.drs(c.a, c.name), os.path.join(c.root_b, c.name)]
    return cmd


def _guc(*flags: str, direct: bool = False) -> Callable[[Ctx], list[str]]:
    def cmd(c: Ctx) -> list[str]:
        tree = ["-r", "-cd"] if c.tree else []
        dest = "file://" + os.path.join(c.root_b, c.name) if direct else c.gsi(c.b, c.root_b, c.name)
        return ["globus-url-copy", *tree, *flags, c.gsi(c.a, c.root_a, c.name), dest]
    return cmd


def _https_copy(*flags: str) -> Callable[[Ctx], list[str]]:
    """drsftp copy https://A https://B: a COPY to B with Source: A (a pull)."""
    def cmd(c: Ctx) -> list[str]:
        tree = ["-r"] if c.tree else []
        return [*DRSFTP, "copy", "-q", "--progress", "never", "--json", c.json_out, "--ca-file", str(c.certs().ca),
                *tree, *flags, c.https(c.a, c.name), c.https(c.b, c.name)]
    return cmd


def _gfal(server: str, *flags: str) -> Callable[[Ctx], list[str]]:
    """gfal-copy --copy-mode pull A B, gfal2 trusting the run's CA
    (X509_CERT_DIR) and fetching each end's macaroon; ``-n N`` is
    X-Number-Of-Streams: N (davix).  drsftp serve logs the POSTs in by
    Basic; XRootD admits any user."""
    def cmd(c: Ctx) -> list[str]:
        port = XRD_HTTPS_PORT if server == "xrootd" else HTTPS_PORT
        login = [] if server == "xrootd" else ["-D", f"HTTP PLUGIN:HEADERS={BASIC}"]
        return ["env", f"X509_CERT_DIR={c.certs().ca_dir}", f"GFAL_PYTHONBIN={GFAL_PYTHON}", "gfal-copy", "-f",
                "--copy-mode", "pull", *flags, *login, "-D", "HTTP PLUGIN:RETRIEVE_BEARER_TOKEN=true",
                c.https(c.a, c.name, scheme="davs", login=False, port=port),
                c.https(c.b, c.name, scheme="davs", login=False, port=port)]
    return cmd


GUC_FAST = ("-fast", "-pp", "-cc", "8", "-tcp-bs", "16M")
# COPYs at once of the https-copy-r-cN entries, both servers taking PER_IP connections from one address (B: the
# COPYs and the walk's; A: B's links, one a COPY)
TREE_COPIES = (12, 16, 20, 24, 48, 60)
PER_IP = 72
XRD_STREAMS = (1, 2, 4, 8)  # X-Number-Of-Streams tried on XRootD: 8 the best (docs/BENCHMARKS.md#third-party-https)
ENTRIES: dict[str, ThirdEntry] = {e.name: e for e in [
    ThirdEntry("copy-Pauto", "drsftp", "client", False, _copy("-P", "auto"),
               "drsftp copy -P auto A->B (streams from the data path's reports)"),
    ThirdEntry("copy-P4", "drsftp", "client", False, _copy("-P", "4"), "drsftp copy -P 4 A->B"),
    ThirdEntry("get-Pauto-on-b", "drsftp", "b", False, _get("-P", "auto"),
               "drsftp get -P auto run on B from A's drsftp serve (direct, the same A-B link)"),
    ThirdEntry("gridftp-p4-16M", "gridftp", "client", False, _guc("-p", "4", "-tcp-bs", "16M"),
               "globus-url-copy -p 4 -tcp-bs 16M A->B, third-party"),
    ThirdEntry("gridftp-p8-16M", "gridftp", "client", False, _guc("-p", "8", "-tcp-bs", "16M"),
               "globus-url-copy -p 8 -tcp-bs 16M A->B, third-party"),
    ThirdEntry("gridftp-p4-16M-on-b", "gridftp", "b", False, _guc("-p", "4", "-tcp-bs", "16M", direct=True),
               "globus-url-copy -p 4 -tcp-bs 16M run on B from A (direct)"),
    ThirdEntry("https-copy-Pauto", "drsftp-https", "client", False, _https_copy("-P", "auto"),
               "drsftp copy -P auto https://A https://B (B pulls; the server picks the streams)"),
    ThirdEntry("https-copy-P4", "drsftp-https", "client", False, _https_copy("-P", "4"),
               "drsftp copy -P 4 https://A https://B (X-Number-Of-Streams: 4)"),
    ThirdEntry("gfal-pull", "drsftp-https", "client", False, _gfal("drsftp"),
               "gfal-copy --copy-mode pull between two drsftp serve, its defaults (one stream)"),
    *[ThirdEntry(f"gfal-pull-n{n}", "drsftp-https", "client", False, _gfal("drsftp", "-n", str(n)),
                 f"gfal-copy --copy-mode pull -n {n} between two drsftp serve") for n in (4, 8)],
    ThirdEntry("gfal-pull-xrootd", "xrootd", "client", False, _gfal("xrootd"),
               "gfal-copy --copy-mode pull between two XRootD servers (XrdHttpTPC), its defaults"),
    *[ThirdEntry(f"gfal-pull-xrootd-{n}", "xrootd", "client", False, _gfal("xrootd", "-n", str(n)),
                 f"gfal-copy --copy-mode pull -n {n} between two XRootD servers") for n in XRD_STREAMS],
    ThirdEntry("copy-r", "drsftp", "client", True, _copy(), "drsftp copy -r A->B, its defaults (-c auto)"),
    ThirdEntry("get-r-on-b", "drsftp", "b", True, _get(), "drsftp get -r run on B from A (direct, -c auto)"),
    ThirdEntry("gridftp-fast", "gridftp", "client", True, _guc(*GUC_FAST),
               "globus-url-copy -r -fast -pp -cc 8 -tcp-bs 16M A->B, third-party"),
    ThirdEntry("gridftp-fast-on-b", "gridftp", "b", True, _guc(*GUC_FAST, direct=True),
               "globus-url-copy -r -fast -pp -cc 8 -tcp-bs 16M run on B from A (direct)"),
    ThirdEntry("https-copy-r", "drsftp-https", "client", True, _https_copy(),
               "drsftp copy -r https://A/ https://B/, its defaults (-c auto: a COPY per file)"),
    *[ThirdEntry(f"https-copy-r-c{n}", "drsftp-https", "client", True, _https_copy("-c", str(n)),
                 f"drsftp copy -r -c {n} https://A/ https://B/, both servers --max-connections-per-ip {PER_IP}",
                 serve=("--max-connections-per-ip", str(PER_IP))) for n in TREE_COPIES],
    ThirdEntry("https-copy-r-kernel", "drsftp-https", "client", True, _https_copy(),
               "drsftp copy -r https://A/ https://B/, both servers --tuning kernel (B's links autotuned by the kernel)",
               serve=("--tuning", "kernel")),
]}
DEFAULT_ENTRIES = ("copy-Pauto", "copy-P4", "get-Pauto-on-b", "gridftp-p4-16M", "gridftp-p8-16M", "https-copy-Pauto",
                   "https-copy-P4", "gfal-pull", "gfal-pull-n4", "gfal-pull-xrootd", "gfal-pull-xrootd-8", "copy-r",
                   "gridftp-fast", "https-copy-r")


def entry_names(spec: str) -> list[str]:
    """The entries of a comma-separated list ("default": DEFAULT_ENTRIES, "all": every one)."""
    names: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        names += {"default": list(DEFAULT_ENTRIES), "all": list(ENTRIES)}.get(item, [item] if item else [])
    unknown = [n for n in names if n not in ENTRIES]
    if unknown:
        raise ValueError(f"unknown third-party entry {unknown[0]!r}; known: {', '.join(ENTRIES)}")
    if not names:
        raise ValueError("the third-party bench needs at least one entry")
    return list(dict.fromkeys(names))
