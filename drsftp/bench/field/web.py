"""The field bench's HTTPS columns (docs/BENCHMARKS.md, "HTTPS"): drsftp's
client against `drsftp serve --http-port`, and davix-get, the HTTP client
of gfal2 and FTS3, against it and against XRootD's XrdHttp serving the
same root.  Every server serves the run's certificate (certs.py); every
client checks it against the run's CA."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Protocol

from ..common.peers import DRSFTP, HTTPS_PORT, PASSWORD, USER, XRD_HTTPS_PORT
from ..common.xrootd import TLSFiles


class Ctx(Protocol):
    """What a column's command is made from (run.Ctx)."""

    host: str
    src: str
    dest: str
    json_out: str
    tls: TLSFiles | None

# davix 0.8 does not answer a 401 Basic challenge (it gives up on the 401):
# it sends the credentials up front, in the header (RFC 7617)
BASIC = "Authorization: Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _tls(ctx: Ctx) -> TLSFiles:
    if ctx.tls is None:
        raise ValueError("an HTTPS column needs the run's certificates")
    return ctx.tls


def https_url(ctx: Ctx, tail: str = "", *, login: bool = True, port: int = HTTPS_PORT) -> str:
    rel = os.path.basename(ctx.src.rstrip("/"))
    who = f"{USER}:{PASSWORD}@" if login else ""
    return f"https://{who}{ctx.host}:{port}/{rel}{tail}"


def https_get(streams: str) -> Callable[[Ctx], list[str]]:
    """drsftp get -P STREAMS https://... (one file)."""
    def cmd(ctx: Ctx) -> list[str]:
        return [*DRSFTP, "get", "-q", "--progress", "never", "--json", ctx.json_out, "--ca-file", str(_tls(ctx).ca),
                "-P", streams, https_url(ctx), ctx.dest]
    return cmd


def https_tree(sessions: str) -> Callable[[Ctx], list[str]]:
    """drsftp get -r -c SESSIONS https://.../dir/ DEST/ (a tree over PROPFIND)."""
    def cmd(ctx: Ctx) -> list[str]:
        return [*DRSFTP, "get", "-q", "--progress", "never", "--json", ctx.json_out, "--ca-file", str(_tls(ctx).ca),
                "-r", "-c", sessions, https_url(ctx, "/"), ctx.dest + "/"]
    return cmd


def davix_get(server: str) -> Callable[[Ctx], list[str]]:
    """davix-get of one file from ``server`` ("drsftp-https": with the bench
    user's Basic credentials; "xrootd": no authentication)."""
    def cmd(ctx: Ctx) -> list[str]:
        ca = ["--capath", str(_tls(ctx).ca_dir)]
        if server == "xrootd":
            return ["davix-get", *ca, https_url(ctx, login=False, port=XRD_HTTPS_PORT), ctx.dest]
        return ["davix-get", *ca, "-H", BASIC, https_url(ctx, login=False), ctx.dest]
    return cmd
