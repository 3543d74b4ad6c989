"""`drsftp serve --metrics ADDR:PORT`: Prometheus metrics, the running
transfers as JSON, and a live status page (docs/DEPLOY.md, "Metrics").

- ``/metrics``: Prometheus text format (prometheus_client).  The counters
  and histograms are fed by the transfer log's records as a session emits
  them (translog.TransferLogMixin._emit), so the log and the metrics agree;
  the gauges come from the snapshot below.  No label names a transfer,
  user or path (Prometheus' advice on cardinality).
- ``/api/transfers``: the transfers running now (``?history=1``: with each
  one's rate, RTT and window over the last HISTORY_SECONDS).
- ``/``: statuspage.html, a page with no data of its own that draws
  ``/api/transfers``.

The FTP server's ioloop never waits on HTTP: every PUBLISH_INTERVAL it
reads the running transfers' tuners and publishes a snapshot, a value the
HTTP threads only read and the ioloop replaces whole.  Access
(docs/SECURITY.md): with a token, ``/metrics`` and ``/api/*`` want
``Authorization: Bearer TOKEN`` (RFC 6750); without one (loopback only),
a request must name the host by an address or ``localhost``, so a web page
cannot reach the endpoint through DNS rebinding.  Nothing served holds a
file's contents or a password.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.exposition import choose_encoder

from ...ftp.partname import final_name
from ...io import sockopt
from ...tuning import Role
from ...tuning.budget import BufferBudget
from ..ftp import compat

log = logging.getLogger("drsftp.server")

PUBLISH_INTERVAL = 1.0  # seconds between snapshots of the running transfers
HISTORY_SECONDS = 300  # what the status page's charts show
MAX_CLIENTS = 16  # HTTP connections served at once; more are closed at once
DIRECTIONS = ("get", "put")
RESULTS = ("complete", "failed")
LOGIN_RESULTS = ("ok", "credentials", "tls_required")  # ok, or translog's reasons for a refusal
# Why the server refused something (drsftp_refusals_total's ``reason``):
# limit: --max-connections, --max-connections-per-ip, --max-streams(-total);
# bounce: a data connection to or from an address other than the client's
# that --third-party-peers does not list, or to a privileged port (RFC 2577
# sec. 3; ftp/thirdparty.py); tls: clear text under
# --require-tls, or a data connection's TLS failed (RFC 4217).
REFUSALS = ("limit", "bounce", "tls")
# Replies that refuse, as pyftpdlib and the MODE E path word them (a test
# provokes each: tests/test_metrics.py).
REFUSAL_REPLIES = (
    ("421 Too many connections", "limit"),
    ("501 Rejected data connection to foreign address", "bounce"),
    ("501 PORT against the privileged port", "bounce"),
    ("550 SSL/TLS required", "tls"),
    ("522 SSL handshake failed", "tls"),
    ("425 TLS negotiation failed", "tls"),
    ("534 MODE E data connections cannot be encrypted", "tls"),
)
RATE_BUCKETS = tuple(m * 10.0 ** e for e in range(5, 10) for m in (1, 2, 5)) + (1e10,)  # bytes/s
RTT_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # seconds


@dataclass(frozen=True)
class Snapshot:
    """The running transfers at one moment, as the ioloop published them."""

    time: float = 0.0
    transfers: tuple[dict[str, Any], ...] = ()
    history: dict[int, tuple[tuple[float, float, float | None, int | None], ...]] = field(default_factory=dict)

    def as_json(self, with_history: bool) -> dict[str, Any]:
        transfers = []
        for t in self.transfers:
            if with_history:
                samples = self.history.get(t["id"], ())
                t = {**t, "history": {name: [s[i] for s in samples]
                                      for i, name in enumerate(("t", "rate_bps", "rtt_ms", "window"))}}
            transfers.append(t)
        return {"time": round(self.time, 3), "transfers": transfers}


class Metrics:
    """One server's metrics: counters fed from the ioloop, the snapshot
    published by it, both read by the HTTP threads (prometheus_client's
    values lock themselves)."""

    def __init__(self, budget: BufferBudget | None) -> None:
        self.budget = budget
        disable_created_metrics()  # no *_created series: Prometheus' text format would take them as gauges
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes...
        r = self.registry
        self.transfers = Counter("drsftp_transfers", "Transfers ended (one per transfer log line).",
                                 ["direction", "result"], registry=r)
        self.bytes = Counter("drsftp_transfer_bytes", "Bytes of the transfers ended.", ["direction", "result"],
                             registry=r)
        self.logins = Counter("drsftp_logins", "Logins, by result: ok or why refused.", ["result"], registry=r)
        self.refusals = Counter("drsftp_refusals", "Connections and commands refused, by reason.", ["reason"],
                                registry=r)
        self.rate = Histogram("drsftp_transfer_rate_bytes_per_second", "Mean rate of the transfers completed.",
                              buckets=RATE_BUCKETS, registry=r)
        self.rtt = Histogram("drsftp_transfer_rtt_seconds", "Mean RTT of the transfers completed, as their"
                             " data connections measured it.", buckets=RTT_BUCKETS, registry=r)
        self.in_flight = Gauge("drsftp_transfers_in_flight", "Transfers running.", ["direction"], registry=r)
        self.sessions = Gauge("drsftp_sessions", "Control connections open.", registry=r)
        if budget is not None:
            self.budget_size = Gauge("drsftp_buffer_budget_bytes", "The --buffer-budget: socket buffer memory"
                                     " all transfers share.", registry=r)
            self.budget_used = Gauge("drsftp_buffer_budget_in_use_bytes", "Socket buffer memory the transfers"
                                     " hold of the budget.", registry=r)
            self.budget_size.set(budget.total)
        for d in DIRECTIONS:  # every series from the start: a rate() over a missing series is empty
            self.in_flight.labels(d)
            for res in RESULTS:
                self.transfers.labels(d, res)
                self.bytes.labels(d, res)
        for login in LOGIN_RESULTS:
            self.logins.labels(login)
        for reason in REFUSALS:
            self.refusals.labels(reason)
        self.snapshot = Snapshot()
        self._tracked: dict[int, tuple[object, int]] = {}  # id(transfer object) -> (it, its number)
        self._numbers = 0

    # -- fed by the ioloop ---------------------------------------------------
    def observe(self, rec: dict[str, Any], rtt: float | None = None) -> None:
        """A transfer log record as it is emitted (``rtt``: a transfer's
        mean RTT in seconds, which its line does not carry)."""
        if rec["event"] == "login":
            self.logins.labels("ok" if rec["ok"] else rec.get("reason", "credentials")).inc()
        elif rec["event"] == "transfer":
            result = "complete" if rec["complete"] else "failed"
            self.transfers.labels(rec["direction"], result).inc()
            self.bytes.labels(rec["direction"], result).inc(rec["bytes"])
            if rec["complete"] and rec["bytes"] and rec["seconds"]:
                self.rate.observe(rec["bytes"] / rec["seconds"])
            if rec["complete"] and rtt is not None:
                self.rtt.observe(rtt)

    def observe_reply(self, reply: str) -> None:
        for prefix, reason in REFUSAL_REPLIES:
            if reply.startswith(prefix):
                self.refused(reason)
                return

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    def start_publishing(self, ioloop, sessions: Callable[[], Iterable[Any]]) -> None:
        """Publish a snapshot now and every PUBLISH_INTERVAL on ``ioloop``."""

        def tick() -> None:
            try:
                self.publish(list(sessions()), time.time())
            except Exception:  # a fault here must not end the FTP server
                log.exception("metrics: the snapshot of the running transfers failed")
            ioloop.call_later(PUBLISH_INTERVAL, tick)

        tick()

    def publish(self, sessions: list[Any], now: float) -> None:
        running = list(running_transfers(sessions))
        tracked, transfers, history = {}, [], {}
        old = self.snapshot.history
        for obj, info in running:
            seen = self._tracked.get(id(obj))
            number = seen[1] if seen is not None and seen[0] is obj else 0
            if not number:
                self._numbers += 1
                number = self._numbers
            tracked[id(obj)] = (obj, number)
            info["id"] = number
            transfers.append(info)
            sample = (round(now, 1), info["rate_bps"], info["rtt_ms"], info["window"])
            history[number] = (old.get(number, ()) + (sample,))[-int(HISTORY_SECONDS / PUBLISH_INTERVAL):]
        self._tracked = tracked  # (the ended ones are let go)
        self.snapshot = Snapshot(now, tuple(transfers), history)
        for d in DIRECTIONS:
            self.in_flight.labels(d).set(sum(1 for t in transfers if t["direction"] == d))
        self.sessions.set(len(sessions))
        if self.budget is not None:
            self.budget_used.set(self.budget.granted_total())


# -- the running transfers (read on the ioloop) --------------------------------------
def running_transfers(sessions: Iterable[Any]) -> Iterator[tuple[object, dict[str, Any]]]:
    """(the object that runs it, its description) for each file transfer
    running: a MODE E job (eblock.py) or a stream-mode data channel."""
    for h in sessions:
        if not getattr(h, "authenticated", False):
            continue
        eb = getattr(h, "eblock", None)
        job = eb.job if eb is not None else None
        if job is not None and job.path is not None:
            streams = [s for s in job.members if s.tuner is not None and not s.closed]
            direction = "get" if job.role is Role.SENDER else "put"
            yield job, _describe(h, "E", direction, job.path, job.moved, time.monotonic() - job.started,
                                 [s.tuner for s in streams], next((s.peer for s in streams if s.peer), None))
        dc = h.data_channel
        tuner = getattr(dc, "tuner", None)
        if tuner is not None and dc.file_obj is not None and compat.data_channel_open(dc):
            path = h._ftp_path(dc.file_obj.name)
            direction = "put" if dc.receive else "get"
            yield dc, _describe(h, "S", direction, final_name(path) if dc.cmd == "STOR" else path,
                                dc.get_transmitted_bytes(), dc.get_elapsed_time(), [tuner],
                                getattr(dc, "data_peer", None))


def _describe(h, mode: str, direction: str, path: str, moved: int, seconds: float, tuners: list,
              data_peer: str | None) -> dict[str, Any]:
    """``data_peer``: the data connections' peer (shown only when it is not
    the client: a third-party transfer)."""
    per_stream = [_stream(t) for t in tuners]
    rtts = [s["rtt_ms"] for s in per_stream if s["rtt_ms"] is not None]
    windows = [s["window"] for s in per_stream if s["window"] is not None]
    tuning = tuners[0].tuning if tuners else None
    return {
        "id": 0, "mode": mode, "user": h.username, "peer": h._peer(), "data_peer": h.third_party(data_peer),
        "path": path, "direction": direction,
        "streams": len(per_stream), "bytes": moved, "seconds": round(seconds, 3),
        "rate_bps": round(sum(s["rate_bps"] for s in per_stream)), "rtt_ms": min(rtts) if rtts else None,
        "window": sum(windows) if windows else None,
        "tuning": tuning.describe() if tuning is not None else None,
        "drs": tuning is not None and tuning.name.startswith("drs"), "drs_peer": h._drs_reports > 0,
        "tls": h._tls(), "per_stream": per_stream,
    }


def _stream(tuner) -> dict[str, Any]:
    """One data connection: its rate, RTT, window and buffers now."""
    rcvbuf, sndbuf = sockopt.read_buffers(tuner.sock) if tuner.sock is not None else (None, None)
    info = tuner.last_info or {}
    mss = info.get("snd_mss") or 0
    return {
        "rate_bps": round(tuner.rate * 8),
        "rtt_ms": round(tuner.last_rtt * 1000, 3) if tuner.last_rtt else None,
        "window": getattr(tuner.tuning, "window", None),  # DRS's last decision (receive window or send buffer)
        "rcvbuf": rcvbuf, "sndbuf": sndbuf,
        "cwnd": info.get("snd_cwnd", 0) * mss if mss and tuner.role is Role.SENDER else None,
    }


# -- HTTP (threads of its own) ---------------------------------------------------------
class Endpoint:
    """The HTTP server of ``--metrics``: bound at once, served in a thread."""

    def __init__(self, metrics: Metrics, host: str, port: int, token: str | None = None) -> None:
        from ..config import ConfigError

        self.metrics = metrics
        self.token = token
        self.page = resources.files(__package__).joinpath("statuspage.html").read_bytes()
        handler = type("MetricsRequestHandler", (_RequestHandler,), {"endpoint": self})
        try:
            self.httpd = _HTTPServer((host, port), handler)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} for --metrics: {exc.strerror or exc}") from exc
        bound_host, bound_port = str(self.httpd.server_address[0]), self.httpd.server_address[1]
        self.url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="drsftp-metrics", daemon=True)
        self.thread.start()

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        scheme, _, given = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # a flood of connections gets no thread each
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _RequestHandler(BaseHTTPRequestHandler):
    endpoint: Endpoint  # set per server by Endpoint
    server_version = "drsftp-metrics"
    timeout = 10  # seconds a connection may take to send its request
    PAGE_HEADERS: ClassVar[dict[str, str]] = {
        # the page loads nothing from elsewhere and runs only its own script
        "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline';"
                                   " connect-src 'self'; img-src data:; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        url = urlsplit(self.path)
        if self.endpoint.token is None and not _host_is_address(self.headers.get("Host", "")):
            return self._send(403, b"Forbidden: name this host by its address or localhost.\n", send_body)
        if url.path == "/":
            return self._send(200, self.endpoint.page, send_body, "text/html; charset=utf-8", self.PAGE_HEADERS)
        if url.path not in ("/metrics", "/api/transfers"):
            return self._send(404, b"Not found: /, /metrics, /api/transfers.\n", send_body)
        if not self.endpoint.authorized(self.headers.get("Authorization")):
            return self._send(401, b"Unauthorized: send Authorization: Bearer TOKEN (the metrics token).\n",
                              send_body, headers={"WWW-Authenticate": 'Bearer realm="drsftp"'})
        metrics = self.endpoint.metrics
        if url.path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            return self._send(200, encoder(metrics.registry), send_body, content_type)
        with_history = parse_qs(url.query).get("history", ["0"])[0] not in ("", "0")
        body = json.dumps(metrics.snapshot.as_json(with_history), separators=(",", ":")).encode()
        return self._send(200, body, send_body, "application/json")

    def _send(self, code: int, body: bytes, send_body: bool, content_type: str = "text/plain; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics: %s %s", self.address_string(), format % args)


def _host_is_address(host_header: str) -> bool:
    """The Host header names an IP address or localhost, not a DNS name an
    attacker's page could point at 127.0.0.1 (DNS rebinding)."""
    host = host_header.strip()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else ""
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if host.lower() == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
