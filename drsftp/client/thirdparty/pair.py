"""The two logged-in sessions of a third-party copy: the source A and the
destination B (docs/THIRDPARTY.md).  Both log in at once, each with its
pipelined batch (docs/DESIGN.md, "Pipelined session setup"), and over TLS
each control connection is encrypted (AUTH TLS).  The data connection
between them is protected only if one server is its TLS client: ``SSCN ON``
to the active side A (the convention of lftp and Serv-U); where A refuses
it, the copy stops with one sentence, unless ``--tls-data clear`` asked
for PROT C on both (the control connections stay encrypted)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ...ftp.replies import Reply
from ...ftp.thirdparty import Side
from ...ftp.url import FTPLocation
from ..session.control import ControlConnection, FTPError
from ..session.login import open_session
from ..transfer.options import TransferOptions

log = logging.getLogger("drsftp.client")


def shown(loc: FTPLocation) -> str:
    """host:port, for messages (never the password)."""
    host = f"[{loc.host}]" if ":" in loc.host else loc.host
    return f"{host}:{loc.port}"


def url_of(loc: FTPLocation) -> str:
    """The location as a URL without its password (--json)."""
    scheme = "ftps" if loc.implicit_tls else "ftp"
    return f"{scheme}://{loc.user}@{shown(loc)}{loc.path}"


@dataclass
class ServerPair:
    source: ControlConnection
    dest: ControlConnection
    locs: dict[Side, FTPLocation]
    opts: TransferOptions
    cached: bool = False  # MODE E streams from the last file still join A to B
    cached_streams: int = 0  # how many
    dest_bytes: int = 0  # B's byte count when its last file ended (the cached streams' base)

    def ctl(self, side: Side) -> ControlConnection:
        return self.source if side is Side.SOURCE else self.dest

    def label(self, side: Side) -> str:
        return f"the {side.value} {shown(self.locs[side])}"

    def extended_block(self) -> bool:
        """MODE E with parallel streams: both list PARALLEL (GFD.20)."""
        return "PARALLEL" in self.source.features and "PARALLEL" in self.dest.features

    def drs(self, side: Side) -> bool:
        """``side`` takes part in the relayed DRS: it lists DRS and DRS was not turned off."""
        return self.opts.use_drs_command and "DRS" in self.ctl(side).features

    @property
    def lost(self) -> bool:
        return self.source.lost or self.dest.lost

    async def close(self) -> None:
        await asyncio.gather(self.source.close(), self.dest.close(), return_exceptions=True)


async def open_pair(src: FTPLocation, dst: FTPLocation, opts: TransferOptions,
                    src_queries: Sequence[str] = (), dst_queries: Sequence[str] = (),
                    ) -> tuple[ServerPair, list[Reply], list[Reply]]:
    """Both sessions, logged in at once, and the replies to each one's
    queries (SIZE, MDTM: sent with the log-in).  A failure names the
    server it came from; the other session is closed."""
    tasks = [asyncio.ensure_future(open_session(loc, opts, q)) for loc, q in ((src, src_queries), (dst, dst_queries))]
    try:
        await asyncio.wait(tasks)
    except BaseException:  # (Ctrl-C, --max-time: neither log-in goes on alone)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    failure: tuple[Side, BaseException] | None = None
    for side, task in zip((Side.SOURCE, Side.DEST), tasks, strict=True):
        exc = task.exception()
        if exc is not None and failure is None:
            failure = (side, exc)
    if failure is not None:
        await asyncio.gather(*(t.result()[0].close() for t in tasks if t.exception() is None),
                             return_exceptions=True)
        side, exc = failure
        if isinstance(exc, FTPError):
            where = shown(src if side is Side.SOURCE else dst)
            who = f"the {side.value}" if where in str(exc) else f"the {side.value} {where}"
            raise FTPError(f"{who}: {exc}", exc.reply, transient=exc.transient) from exc
        raise exc
    (a, a_replies), (b, b_replies) = (t.result() for t in tasks)
    pair = ServerPair(a, b, {Side.SOURCE: src, Side.DEST: dst}, opts)
    try:
        await protect_between(pair)
    except BaseException:
        await pair.close()
        raise
    return pair, a_replies, b_replies


async def protect_between(pair: ServerPair) -> None:
    """Under PROT P the active side (A) must be the TLS client of the data
    connection between the servers: ``SSCN ON`` (lftp, Serv-U).  A server
    that refuses it cannot protect that connection: one sentence."""
    if pair.source.tls is None or pair.opts.clear_data:
        return
    await client_side_tls(pair.source, pair.label(Side.SOURCE))


async def client_side_tls(ctl: ControlConnection, label: str) -> None:
    """``SSCN ON`` to the source: it is the TLS client of the data
    connections it makes (a third-party copy under PROT P)."""
    reply = await ctl.command("SSCN ON")
    if reply.code != 200:
        raise FTPError(f"cannot protect the data connection between the servers: {label} does not take SSCN"
                       f" ({reply}); --tls-data clear sends it unencrypted (the control connections stay"
                       " encrypted)", reply, transient=False)


async def clear_between(pair: ServerPair) -> None:
    """``--tls-data clear`` on sessions that logged in with PROT P (a
    tree's, whose own listings stay encrypted): PROT C to both before
    their first copy (RFC 4217 sec. 9)."""
    await asyncio.gather(*(ctl.expect("PROT C", 200, what=f"PROT C on {pair.label(side)}")
                           for side, ctl in ((Side.SOURCE, pair.source), (Side.DEST, pair.dest))
                           if ctl.tls is not None))
