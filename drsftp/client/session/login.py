"""A logged-in control session for a transfer (docs/DESIGN.md, "Pipelined
session setup"; FTPS: docs/DESIGN.md#client-tls)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

from ...ftp.replies import ProtocolError, Reply, parse_feat, parse_pasv
from ...ftp.url import FTPLocation
from ..transfer.options import TransferOptions
from .control import Check, ControlConnection, Pending, expect
from .tls import client_tls

log = logging.getLogger("drsftp.client")


async def open_session(loc: FTPLocation, opts: TransferOptions, queries: Sequence[str] = (),
                       then: Callable[[ControlConnection], None] | None = None,
                       ) -> tuple[ControlConnection, list[Reply]]:
    """A logged-in session in binary mode, and the replies to ``queries``
    (SIZE, MDTM: read-only commands whose replies the caller judges).
    ``then(ctl)`` sends more right behind the batch, its replies the
    caller's (a listing asked for with the log-in: remote.py).
    Round trips: the connection; (the greeting, AUTH TLS and the handshake:
    RFC 4217 sec. 4, nothing else may be sent before); then FEAT, USER,
    PASS, (PBSZ 0, PROT P,) TYPE I and the queries in one batch, their
    replies checked in order (docs/DESIGN.md "Pipelined session setup").
    Without explicit TLS the batch goes out before the greeting arrives:
    the server reads it once it has greeted, and the greeting is checked
    first (a 421 fails the session before any other reply is trusted)."""
    tls = None
    if opts.tls or loc.implicit_tls:
        tls = client_tls(opts.ca_file, opts.insecure, implicit=loc.implicit_tls)
        if opts.insecure:
            _say_insecure()
    explicit = tls is not None and not tls.implicit
    ctl = await ControlConnection.open(loc.host, loc.port, opts.connect_timeout, tls, greeting=explicit)
    ctl.pasv_address = opts.pasv_address
    try:
        if tls is not None and explicit:
            await ctl.secure(tls, opts.connect_timeout)
        feat = ctl.start("FEAT")
        login = ctl.start_login(loc.user, loc.password)
        batch: list[tuple[Pending, Check | None]] = []
        if tls is not None:  # RFC 4217 sec. 8-9, after the login: data connections in TLS too
            prot = ("PROT C", "PROT C (clear-text data connections)") if opts.clear_data else (
                "PROT P", "PROT P (encrypted data connections)")
            batch += [(ctl.start("PBSZ 0"), expect(200, what="PBSZ 0 (FTPS)")),
                      (ctl.start(prot[0]), expect(200, what=prot[1]))]
        batch.append((ctl.start("TYPE I"), expect(200, what="binary mode (TYPE I)")))
        learn = len(batch)
        if opts.pasv_address:  # the server's data interface, whence its active connections come too
            batch.append((ctl.start("PASV"), None))
        batch += [(ctl.start(q), None) for q in queries]
        if then is not None:
            then(ctl)
        if not explicit:
            await ctl.greeted(opts.connect_timeout)
        ctl.features = parse_feat((await ctl.settle([(feat, None)]))[0])
        await ctl.login_done(loc.user, login)
        replies = await ctl.settle(batch)
        if opts.pasv_address:
            learn_data_host(ctl, replies[learn])
    except BaseException:
        await ctl.close()
        raise
    return ctl, replies[len(batch) - len(queries):]


def learn_data_host(ctl: ControlConnection, reply: Reply) -> None:
    """Under --pasv-address, the host a PASV reply names is one the
    server's data connections may come from (its --data-interface)."""
    try:
        host = parse_pasv(reply)[0] if reply.code == 227 else None
    except ProtocolError:
        host = None
    if host and host != "0.0.0.0":
        ctl.data_hosts.add(host)


@functools.cache
def _say_insecure() -> None:
    """Once per process, however many sessions (-P, -c) a call opens."""
    log.warning("--insecure: the server's TLS certificate is not checked")


async def open_logged_in(loc: FTPLocation, opts: TransferOptions) -> ControlConnection:
    """:func:`open_session` without queries."""
    return (await open_session(loc, opts))[0]


def warn_without_drs(ctl: ControlConnection, opts: TransferOptions) -> None:
    """Said once a session is open: DRS was asked for, the peer has none."""
    if opts.use_drs_command and "DRS" not in ctl.features and opts.tuning.startswith("drs"):
        log.warning("server does not offer DRS; right-sizing this end alone")
