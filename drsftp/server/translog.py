"""The server's transfer log: one line per login and per transfer.

A transfer line has the time, the client (peer), the user, the direction
(``get``: the client downloads, RETR; ``put``: it uploads), the path, the
bytes, seconds, rate, whether the client spoke DRS (had sent a DRS
command by the end of the transfer), whether the transfer completed, and
whether the control connection was in TLS.  ``text`` lines are
``TIME EVENT key=value ...`` (values with spaces or control characters
JSON-quoted, so a file name cannot forge a line); ``json`` lines are one
object each.  Lines go to ``--log-file`` (reopened when logrotate moves
it) or stderr; the server's warnings go there too, in the same format.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import time
from typing import Any

from pyftpdlib.utils import is_ssl_sock

from ..ftp.session import final_name

LOGGER = "drsftp.transfer"
log = logging.getLogger(LOGGER)
_SAFE = re.compile(r"^[\x21-\x7e]+$")


# -- records (sans-IO) ---------------------------------------------------------
def login_record(now: float, peer: str, user: str, ok: bool, tls: bool) -> dict[str, Any]:
    return {"time": _iso(now), "event": "login", "peer": peer, "user": user, "ok": ok, "tls": tls}


def transfer_record(now: float, peer: str, user: str, direction: str, path: str, nbytes: int,
                    seconds: float, drs_peer: bool, complete: bool, tls: bool) -> dict[str, Any]:
    return {
        "time": _iso(now), "event": "transfer", "peer": peer, "user": user, "direction": direction,
        "path": path, "bytes": nbytes, "seconds": round(seconds, 3),
        "rate_bps": round(nbytes * 8 / seconds) if seconds > 0 else None,
        "drs_peer": drs_peer, "complete": complete, "tls": tls,
    }


def reload_record(now: float, what: str) -> dict[str, Any]:
    return {"time": _iso(now), "event": "reload", "what": what}


def _iso(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def format_json(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"))


def format_text(rec: dict[str, Any]) -> str:
    fields = [rec["time"], rec["event"]]
    for key, value in rec.items():
        if key in ("time", "event"):
            continue
        if key == "rate_bps":
            key, value = "rate", f"{value / 1e6:.1f}Mbit/s" if value is not None else "-"
        fields.append(f"{key}={_text_value(value)}")
    return " ".join(fields)


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    text = str(value)
    return text if _SAFE.match(text) and '"' not in text else json.dumps(text)


# -- logging ---------------------------------------------------------------------
class LineFormatter(logging.Formatter):
    """Transfer records as text or JSON lines; other messages (warnings)
    as lines of the same kind."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.as_json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        rec = getattr(record, "drsftp_record", None)
        if rec is None:
            rec = {"time": _iso(record.created), "event": "message", "level": record.levelname.lower(),
                   "message": record.getMessage()}
        return format_json(rec) if self.as_json else format_text(rec)


def configure(log_file: str | None, fmt: str = "text") -> None:
    """Send the transfer log to ``log_file`` (or stderr) as ``fmt`` lines;
    with a file, the server's warnings are written there too."""
    handler: logging.Handler
    if log_file:
        handler = logging.handlers.WatchedFileHandler(log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(fmt))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    if log_file:
        logging.getLogger().addHandler(handler)  # warnings, as the root logger's level lets through


def emit(rec: dict[str, Any]) -> None:
    log.info("%s", rec["event"], extra={"drsftp_record": rec})


# -- pyftpdlib hooks -----------------------------------------------------------------
class TransferLogMixin:
    """Mixed into the control handler ahead of the DRS mixin: pyftpdlib
    calls on_login/on_login_failed and, when a data channel closes,
    log_transfer with the bytes and seconds."""

    _drs_peer = False

    def ftp_DRS(self, line):
        self._drs_peer = True
        return super().ftp_DRS(line)  # type: ignore[misc]

    def _peer(self) -> str:
        return f"{self.remote_ip}:{self.remote_port}"  # type: ignore[attr-defined]

    def _tls(self) -> bool:
        return is_ssl_sock(self.socket)  # type: ignore[attr-defined]

    def on_login(self, username):
        emit(login_record(time.time(), self._peer(), username, True, self._tls()))
        return super().on_login(username)  # type: ignore[misc]

    def on_login_failed(self, username, password):
        emit(login_record(time.time(), self._peer(), username, False, self._tls()))
        return super().on_login_failed(username, password)  # type: ignore[misc]

    def log_transfer(self, cmd, filename, receive, completed, elapsed, bytes):
        try:
            path = self.fs.fs2ftp(filename)  # type: ignore[attr-defined]
        except (AttributeError, ValueError):  # no fs (closed): the file system path will do
            path = filename
        if cmd == "STOR":
            path = final_name(path)  # drsftp stores uploads under a temporary name until complete
        emit(transfer_record(time.time(), self._peer(), self.username,  # type: ignore[attr-defined]
                             "put" if receive else "get", path, bytes, elapsed, self._drs_peer, completed,
                             self._tls()))
        return super().log_transfer(cmd, filename, receive, completed, elapsed, bytes)  # type: ignore[misc]
