"""The server's transfer log: one line per login and per transfer.

A ``transfer`` line has the time, the client (peer), on a third-party
transfer the data connections' peer (data_peer), the user, the
direction (``get``: the client downloads, RETR; ``put``: it uploads), the
path, the bytes, seconds, rate, the data connections that carried it
(``streams``), whether the client exchanged DRS reports during it
(``drs_peer``), whether it completed, and whether the control connection
was in TLS.  Every transfer gets one line, whatever its outcome: a
stream-mode transfer when its data connection closes, a MODE E one
(ftp/eblock/job.py) when its last stream ends or it fails, and a download on byte
ranges (several REST + RETR of one file, from one or more sessions of one
client: ``drsftp get -P N`` against stream mode, ``lftp pget``) when the
last session that carried a part of it ends or turns to another file.  A
``login`` line says whether the login was accepted and, if not, why.
``text`` lines are ``TIME EVENT key=value ...`` (values with spaces or
control characters JSON-quoted, so a file name cannot forge a line);
``json`` lines are one object each (ops/loglines.py).  Lines go to ``--log-file`` (reopened
when logrotate moves it) or stderr; the server's warnings go there too,
in the same format.  docs/DEPLOY.md, "The transfer log", has the fields.
With ``--metrics`` the same records, as they are emitted, feed the
server's counters (ops/metrics.py), so the log and the metrics agree.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from pyftpdlib.utils import is_ssl_sock

from ...ftp.eblock import RangeSet
from ...ftp.partname import final_name
from ...ftp.safepath import client_path
from ..ftp import compat
from .loglines import LOGGER as LOGGER  # (the log's lines: ops/loglines.py)
from .loglines import LineFormatter as LineFormatter
from .loglines import _iso, emit
from .loglines import configure as configure
from .loglines import format_json as format_json
from .loglines import format_text as format_text
from .loglines import log as log

# Commands that start a data transfer (RFC 959 4.1.3): the DRS reports
# counted for a transfer are those sent after its command.
TRANSFER_COMMANDS = frozenset({"RETR", "STOR", "APPE", "STOU", "LIST", "NLST", "MLSD"})
# Why a login was refused (the ``reason`` of a ``login ok=no`` line).
BAD_CREDENTIALS = "credentials"  # the user name and password did not authenticate
TLS_REQUIRED = "tls_required"  # a clear-text login under --require-tls (RFC 4217; answered 550)


# -- records (sans-IO) ---------------------------------------------------------
def login_record(now: float, peer: str, user: str, ok: bool, tls: bool,
                 reason: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"time": _iso(now), "event": "login", "peer": peer, "user": user, "ok": ok, "tls": tls}
    if not ok:
        rec["reason"] = reason or BAD_CREDENTIALS
    return rec


def transfer_record(now: float, peer: str, user: str, direction: str, path: str, nbytes: int,
                    seconds: float, streams: int, drs_peer: bool, complete: bool, tls: bool,
                    data_peer: str | None = None) -> dict[str, Any]:
    """``data_peer``: the data connections' peer address when it is not the
    client's (a third-party transfer); the line has the key only then."""
    seconds = round(seconds, 3)  # the rate is the quotient of the figures on the line
    rec: dict[str, Any] = {"time": _iso(now), "event": "transfer", "peer": peer}
    if data_peer is not None:
        rec["data_peer"] = data_peer
    rec.update({
        "user": user, "direction": direction, "path": path, "bytes": nbytes, "seconds": seconds,
        "rate_bps": round(nbytes * 8 / seconds) if seconds > 0 else None,
        "streams": streams, "drs_peer": drs_peer, "complete": complete, "tls": tls,
    })
    return rec


def reload_record(now: float, what: str) -> dict[str, Any]:
    return {"time": _iso(now), "event": "reload", "what": what}


# -- downloads on byte ranges (sans-IO) -------------------------------------------
@dataclass
class RangeRetr:
    """One stream-mode RETR: from ``offset``, ``nbytes`` sent, of a file of
    ``size`` bytes, between ``began`` and ``ended`` (wall clock)."""

    session: Any  # the control connection that ran it
    peer: str
    offset: int
    nbytes: int
    size: int
    began: float
    ended: float
    drs_peer: bool
    tls: bool
    rtt: float | None = None  # mean RTT of its data connection, seconds (None: not measured)
    data_peer: str | None = None  # its data connection's peer, when not the client (third-party)

    @property
    def partial(self) -> bool:
        """Part of the file only: it began past the start (REST) or sent
        some bytes and stopped before the end (a range's end, an abort, a
        failure).  One that sent nothing from the start failed on its own."""
        return self.offset > 0 or 0 < self.nbytes < self.size


@dataclass
class _Download:
    attached: set = field(default_factory=set)  # sessions that RETR this file and have not left it
    running: set = field(default_factory=set)  # ... with a RETR of it not ended yet
    parts: list[RangeRetr] = field(default_factory=list)


Key = tuple[str, str, str]  # (client address, user, path)
MAX_PARTS = 4096  # parts one line gathers: a client's endless partial RETRs cannot grow the server's memory


class RangedDownloads:
    """Partial RETRs of one file by one client (address and user) are one
    download on byte ranges, from however many sessions; it ends when
    none of them runs and every session that carried a part has closed
    or started a RETR of another file.  A RETR of the whole file is a
    transfer of its own.  Methods return the downloads that ended (one
    with MAX_PARTS parts ends there; its next parts start another)."""

    def __init__(self) -> None:
        self._downloads: dict[Key, _Download] = {}
        # (download, session) that closed with its RETR running, oldest first;
        # at most MAX_PARTS: a RETR whose end never comes cannot grow it
        self._closed: dict[tuple[Key, Any], None] = {}

    def started(self, key: Key, session: Any) -> list[tuple[Key, list[RangeRetr]]]:
        ended = self.left(session, keep=key)
        d = self._downloads.setdefault(key, _Download())
        d.attached.add(session)
        d.running.add(session)
        return ended

    def ended(self, key: Key, part: RangeRetr) -> tuple[bool, list[tuple[Key, list[RangeRetr]]]]:
        """(whether ``part`` is a whole transfer of its own, the downloads that ended)."""
        d = self._downloads.setdefault(key, _Download())
        d.running.discard(part.session)
        if (key, part.session) in self._closed:
            # its session's close was handled first: attaching it again
            # held the download open for ever, and every later part with it
            del self._closed[(key, part.session)]
        else:
            d.attached.add(part.session)
        if not part.partial:
            return True, self._settle(key)
        d.parts.append(part)
        if len(d.parts) >= MAX_PARTS:
            full, d.parts = d.parts, []
            return False, [(key, full)]
        return False, self._settle(key)

    def left(self, session: Any, keep: Key | None = None) -> list[tuple[Key, list[RangeRetr]]]:
        """``session`` closed (``keep`` None) or turned to the file ``keep``.
        A session that closes with its RETR's end still to come (a TLS data
        connection's shutdown outlives the control connection; the driver
        ends a RETR that never got one) holds its download open until that
        end, which then joins the download without attaching the closed
        session again."""
        ended = []
        for key in [k for k, d in self._downloads.items() if k != keep and session in d.attached]:
            d = self._downloads[key]
            d.attached.discard(session)
            if keep is None and session in d.running:
                self._closed[(key, session)] = None
                if len(self._closed) > MAX_PARTS:  # an end that never came: let its download go
                    old_key, old = next(iter(self._closed))
                    del self._closed[(old_key, old)]
                    if old_key in self._downloads:
                        self._downloads[old_key].running.discard(old)
                        if old_key != key:
                            ended += self._settle(old_key)
            else:
                d.running.discard(session)
            ended += self._settle(key)
        return ended

    def _settle(self, key: Key) -> list[tuple[Key, list[RangeRetr]]]:
        d = self._downloads[key]
        carriers = {p.session for p in d.parts}
        if d.running or carriers & d.attached:
            return []
        del self._downloads[key]
        return [(key, d.parts)] if d.parts else []


def mean_rtt(rtts: list[float | None]) -> float | None:
    """The mean of the RTTs measured (None: none was)."""
    known = [r for r in rtts if r is not None]
    return sum(known) / len(known) if known else None


def ranged_record(now: float, key: Key, parts: list[RangeRetr]) -> dict[str, Any]:
    """One line for a download on byte ranges: ``bytes`` are the file's
    bytes its parts covered (a range's end sent past by the server, which
    the client does not read, overlaps the next range: counted once);
    ``streams`` the sessions that carried parts; complete when they cover
    the file from the first part's offset to its end; the peer is the
    first session's."""
    _, user, path = key
    first = min(parts, key=lambda p: p.began)
    size = max(p.size for p in parts)
    covered = RangeSet([(p.offset, min(p.offset + p.nbytes, size)) for p in parts])
    start = min(p.offset for p in parts)
    complete = not any(b > start for _, b in covered.missing(size))
    seconds = max(p.ended for p in parts) - first.began
    return transfer_record(now, first.peer, user, "get", path, covered.total, seconds,
                           len({p.session for p in parts}), any(p.drs_peer for p in parts), complete,
                           all(p.tls for p in parts), first.data_peer)


# -- pyftpdlib hooks -----------------------------------------------------------------
class TransferLogMixin:
    """Mixed into the control handler ahead of the others: pyftpdlib calls
    on_login/on_login_failed and, when a stream-mode data channel closes,
    log_transfer with the bytes and seconds; a MODE E transfer calls
    log_finished_transfer (ftp/eblock/session.py).  A transfer's ``drs_peer`` says
    whether this session sent a DRS report (``200 DRS``, docs/PROTOCOL.md)
    between its command and its end, as the client's ``drs_replies``
    counts them."""

    ranged_downloads = RangedDownloads()  # replaced per server by build_server
    metrics: Any = None  # the server's metrics.Metrics under --metrics (set by build_server)
    _drs_reports = 0  # 200 DRS replies since the running transfer's command
    _retr: tuple[Key, int, int] | None = None  # the stream-mode RETR running: (key, offset, file size)

    def respond(self, resp, *args, **kwargs):
        if resp.startswith("200 DRS"):
            self._drs_reports += 1
        if self.metrics is not None:
            self.metrics.observe_reply(resp)
        return super().respond(resp, *args, **kwargs)  # type: ignore[misc]

    def process_command(self, cmd, *args, **kwargs):
        if cmd in TRANSFER_COMMANDS:
            self._drs_reports = 0
        elif cmd == "USER" and self._clear_text_refused():
            self._emit(login_record(time.time(), self._peer(), args[0] if args else "", False, False, TLS_REQUIRED))
        return super().process_command(cmd, *args, **kwargs)  # type: ignore[misc]

    def _clear_text_refused(self) -> bool:
        """USER before AUTH TLS under --require-tls: pyftpdlib answers 550
        (RFC 4217: a server may refuse a login on a clear-text control
        connection)."""
        return bool(getattr(self, "tls_control_required", False)) and not compat.control_tls_established(self)

    def _peer(self) -> str:
        return f"{self.remote_ip}:{self.remote_port}"  # type: ignore[attr-defined]

    def _tls(self) -> bool:
        sock = self.socket  # type: ignore[attr-defined]
        return sock is not None and is_ssl_sock(sock)

    _home: str | None = None  # the logged-in user's home (the server path the client calls "/")

    def _ftp_path(self, filename: str) -> str:
        """``filename`` (a server path) as the client sees it, also once the
        session has closed (pyftpdlib drops its filesystem then, and a data
        connection can outlive its control connection): never the server's
        own path (docs/DEPLOY.md, "The transfer log")."""
        fs = getattr(self, "fs", None)
        if fs is not None:
            try:
                return fs.fs2ftp(filename)
            except ValueError:
                pass
        asked = client_path(self._home, filename) if self._home else None
        return asked or "/" + os.path.basename(filename)

    def log_exception(self, instance):
        """pyftpdlib logged an unhandled exception with ``repr(instance)``,
        which names a data connection's file by its server path: the
        client's path, the peer and the exception instead (an OSError by
        its strerror, which names no file)."""
        exc = sys.exc_info()[1]
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        file = getattr(getattr(instance, "file_obj", None), "name", None)
        on = ""
        if isinstance(file, str):
            path = self._ftp_path(file)
            on = " on " + (final_name(path) if getattr(instance, "receive", False) else path)
        logging.getLogger("pyftpdlib").error("%s-[%s] unhandled %s in the %s connection%s: %s", self._peer(),
                                             getattr(self, "username", ""), type(exc).__name__,
                                             "control" if instance is self else "data", on, what)

    def on_login(self, username):
        self._home = getattr(getattr(self, "fs", None), "root", None)
        self._emit(login_record(time.time(), self._peer(), username, True, self._tls()))
        return super().on_login(username)  # type: ignore[misc]

    def on_login_failed(self, username, password):
        self._emit(login_record(time.time(), self._peer(), username, False, self._tls(), BAD_CREDENTIALS))
        return super().on_login_failed(username, password)  # type: ignore[misc]

    def ftp_RETR(self, file):
        offset = compat.restart_position(self)
        started = super().ftp_RETR(file)  # type: ignore[misc]
        if started is not None:  # a stream-mode RETR under way (MODE E answers None: its jobs log themselves)
            try:
                size = os.path.getsize(file)
            except OSError:
                size = 0
            key = (self.remote_ip, self.username, self._ftp_path(file))  # type: ignore[attr-defined]
            self._retr = (key, offset, size)
            self._emit_ranged(self.ranged_downloads.started(key, self))
        return started

    def log_transfer(self, cmd, filename, receive, completed, elapsed, bytes):
        retr, self._retr = self._retr, None
        if cmd == "RETR" and retr is not None:
            key, offset, size = retr
            now = time.time()
            part = RangeRetr(self, self._peer(), offset, bytes, size, now - elapsed, now, self._drs_reports > 0,
                             self._tls(), self._data_rtt(), self._stream_data_peer())
            whole, ended = self.ranged_downloads.ended(key, part)
            self._emit_ranged(ended)
            if not whole:  # a part of a download on byte ranges: its line comes when that ends
                # (pyftpdlib's own line, -vv, by the client's path too)
                return super().log_transfer(cmd, key[2], receive, completed, elapsed, bytes)  # type: ignore[misc]
        path = self._ftp_path(filename)
        if cmd == "STOR":
            path = final_name(path)  # drsftp stores uploads under a temporary name until complete
        self.log_finished_transfer("put" if receive else "get", path, bytes, elapsed, 1, completed,
                                   rtt=self._data_rtt(), data_peer=self._stream_data_peer())
        return super().log_transfer(cmd, path, receive, completed, elapsed, bytes)  # type: ignore[misc]

    def log_finished_transfer(self, direction: str, path: str, nbytes: int, seconds: float, streams: int,
                              complete: bool, rtt: float | None = None, data_peer: str | None = None) -> None:
        """The line of a transfer that ended (``path`` as the client sees it;
        ``rtt``: the mean RTT of its data connections, for the metrics;
        ``data_peer``: their peer's address, if it is not the client's)."""
        self._emit(transfer_record(time.time(), self._peer(), self.username,  # type: ignore[attr-defined]
                                   direction, path, nbytes, seconds, streams, self._drs_reports > 0, complete,
                                   self._tls(), self.third_party(data_peer)), rtt)

    def third_party(self, data_peer: str | None) -> str | None:
        """``data_peer`` if it is not the client's address (a third-party
        transfer), else None."""
        if data_peer is None or data_peer.removeprefix("::ffff:") == self.remote_ip.removeprefix("::ffff:"):  # type: ignore[attr-defined]
            return None
        return data_peer.removeprefix("::ffff:")

    def _stream_data_peer(self) -> str | None:
        """The stream-mode data connection's peer, if not the client's."""
        return self.third_party(getattr(getattr(self, "data_channel", None), "data_peer", None))

    def _data_rtt(self) -> float | None:
        """The mean RTT of the stream-mode data connection that just ended
        (pyftpdlib logs its transfer while it is still the data channel)."""
        tuner = getattr(getattr(self, "data_channel", None), "tuner", None)
        return tuner.stats.rtt_avg if tuner is not None else None

    def _emit_ranged(self, ended: list[tuple[Key, list[RangeRetr]]]) -> None:
        for key, parts in ended:
            self._emit(ranged_record(time.time(), key, parts), mean_rtt([p.rtt for p in parts]))

    def _emit(self, rec: dict[str, Any], rtt: float | None = None) -> None:
        """The one place a session's records go out: the log, then the
        metrics (``rtt``: a transfer's, which the log line does not carry)."""
        emit(rec)
        if self.metrics is not None:
            self.metrics.observe(rec, rtt)

    def note_refusal(self, reason: str) -> None:
        """Something refused without a reply of its own (metrics.REFUSALS)."""
        if self.metrics is not None:
            self.metrics.refused(reason)

    def close(self):
        queued = None if compat.closed(self) else compat.queued_transfer(self)
        if queued is not None and queued[0] is not None:
            # a transfer answered 150 whose data connection never came: no
            # data channel will report its end, so it has its line here (the
            # rest of close drops its file)
            f, cmd, receiving = queued
            self.log_transfer(cmd, f.name, receiving, False, 0.0, 0)
        super().close()  # type: ignore[misc]
        self._emit_ranged(self.ranged_downloads.left(self))
