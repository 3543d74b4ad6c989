"""The transfer log's lines (ops/translog.py makes the records): ``text``
lines ``TIME EVENT key=value ...`` (values with spaces or control
characters JSON-quoted, so a file name cannot forge a line) or ``json``
objects, written to ``--log-file`` (reopened when logrotate moves it) or
stderr.  A record goes straight to the handler configure() installed,
without a LogRecord (docs/decisions/0044: that was most of a small file's
line); anything else added to the logger takes the ordinary way.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import time
from typing import Any

LOGGER = "drsftp.transfer"
log = logging.getLogger(LOGGER)
_SAFE = re.compile(r"^[\x21-\x7e]+$")


_second: list[Any] = [None, ""]  # (whole second, its text): the lines of one second share it


def _iso(now: float) -> str:
    sec = int(now // 1)
    if _second[0] != sec:
        _second[:] = [sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))]
    return f"{_second[1]}.{int(now % 1 * 1000):03d}Z"


def format_json(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"))


_TRANSFER_KEYS = ("time", "event", "peer", "user", "direction", "path", "bytes", "seconds", "rate_bps", "streams",
                  "drs_peer", "complete", "tls")
_YES_NO = {True: "yes", False: "no"}


def _rate(bps: float | None) -> str:
    return f"rate={bps / 1e6:.1f}Mbit/s" if bps is not None else "rate=-"


def format_text(rec: dict[str, Any]) -> str:
    if len(rec) == 13 and tuple(rec) == _TRANSFER_KEYS:  # a transfer line (most lines): _format_fields' text, at once
        return (f"{rec['time']} transfer peer={_text_value(rec['peer'])} user={_text_value(rec['user'])}"
                f" direction={rec['direction']} path={_text_value(rec['path'])} bytes={rec['bytes']}"
                f" seconds={rec['seconds']} {_rate(rec['rate_bps'])}"
                f" streams={rec['streams']} drs_peer={_YES_NO[rec['drs_peer']]}"
                f" complete={_YES_NO[rec['complete']]} tls={_YES_NO[rec['tls']]}")
    return _format_fields(rec)


def _format_fields(rec: dict[str, Any]) -> str:
    fields = [rec["time"], rec["event"]]
    add = fields.append
    for key, value in rec.items():
        if key == "time" or key == "event":
            continue
        if key == "rate_bps":
            add(_rate(value))
        else:
            add(f"{key}={_text_value(value)}")
    return " ".join(fields)


def _text_value(value: Any) -> str:
    kind = type(value)
    if kind is str:  # (the common case first: a line is mostly names and numbers)
        return value if _SAFE.match(value) and '"' not in value else json.dumps(value)
    if kind is int or kind is float:  # (no quoting to decide: a number's text is safe)
        return str(value)
    if kind is bool:
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


class _LineHandler:
    """The handler configure() installs writes a record's line itself, in
    emit() below (a LogRecord, its frame and the logging layers it passes
    were most of a small file's line: docs/decisions/0044)."""

    as_json = False  # (set by configure, as its formatter's)
    lock: Any
    stream: Any
    terminator: str

    def write_record(self, rec: dict[str, Any]) -> bool:
        """``rec``'s line written and flushed; False on an error (emit()
        then hands it to logging, whose handleError reports it)."""
        line = format_json(rec) if self.as_json else format_text(rec)
        self.lock.acquire()  # (the HTTP front emits from its own thread)
        try:
            self.before_write()
            self.stream.write(line + self.terminator)
            self.stream.flush()
        except Exception:
            return False
        finally:
            self.lock.release()
        return True

    def before_write(self) -> None:
        pass


class _StreamLines(_LineHandler, logging.StreamHandler):
    pass


class _FileLines(_LineHandler, logging.handlers.WatchedFileHandler):
    def before_write(self) -> None:
        self.reopenIfNeeded()  # (logrotate moved it: WatchedFileHandler.emit's check, each line as before)


_direct: list[_StreamLines | _FileLines] = []  # the handler configure() installed, while it is the log's only one


def configure(log_file: str | None, fmt: str = "text") -> None:
    """Send the transfer log to ``log_file`` (or stderr) as ``fmt`` lines;
    with a file, the server's warnings are written there too."""
    handler: _StreamLines | _FileLines
    if log_file:
        handler = _FileLines(log_file)
    else:
        handler = _StreamLines(sys.stderr)
    handler.setFormatter(LineFormatter(fmt))
    handler.as_json = fmt == "json"
    log.handlers[:] = [handler]
    _direct[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    if log_file:
        logging.getLogger().addHandler(handler)  # warnings, as the root logger's level lets through


def emit(rec: dict[str, Any]) -> None:
    """The record to the log's handlers: straight to the line handler
    configure() installed while it is the only one (no filters, nothing
    added since), else as a LogRecord (makeRecord and handle: Logger.info
    also looked up its caller's frame, for a line that never shows it)."""
    if not log.isEnabledFor(logging.INFO):
        return
    handlers = log.handlers
    if _direct and len(handlers) == 1 and handlers[0] is _direct[0] and not log.filters:
        h = _direct[0]
        if not h.filters and h.level <= logging.INFO and h.write_record(rec):
            return
    log.handle(log.makeRecord(LOGGER, logging.INFO, __file__, 0, "%s", (rec["event"],), None,
                              extra={"drsftp_record": rec}))


