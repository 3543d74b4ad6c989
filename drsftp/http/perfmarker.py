"""The perf-marker stream of an HTTP third-party copy, sans-IO (docs/HTTP.md,
"Third-party copy"): the ``text/perf-marker-stream`` body of a ``COPY``'s
``202 Accepted``, as XRootD's XrdHttpTPC and dCache write it and davix
(gfal2, FTS3) reads it: a marker per stripe every few seconds, then one
last line, ``success: Created`` or ``failure: <reason>``.

    Perf Marker
        Timestamp: 1537788010
        Stripe Index: 0
        Stripe Bytes Transferred: 238745
        Total Stripe Count: 1
        RemoteConnections: tcp:192.168.1.2:8443
    End

davix reads the stream line by line and takes any line it does not know
(a blank one too) for an error: the stream holds none.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTENT_TYPE = "text/perf-marker-stream"
SUCCESS = "success: Created"
MAX_REASON = 400  # characters of a failure's reason


@dataclass(frozen=True)
class Marker:
    timestamp: int
    index: int
    transferred: int
    count: int
    remote: tuple[str, ...] = ()  # ``tcp:ADDR:PORT`` of the stripe's connections


def format_marker(m: Marker) -> str:
    lines = ["Perf Marker", f"    Timestamp: {m.timestamp}", f"    Stripe Index: {m.index}",
             f"    Stripe Bytes Transferred: {m.transferred}", f"    Total Stripe Count: {m.count}"]
    if m.remote:
        lines.append(f"    RemoteConnections: {','.join(m.remote)}")
    lines.append("End")
    return "\n".join(lines) + "\n"


def remote_connection(host: str, port: int) -> str:
    """``tcp:ADDR:PORT`` (an IPv6 address in brackets)."""
    return f"tcp:[{host}]:{port}" if ":" in host else f"tcp:{host}:{port}"


def failure(reason: str) -> str:
    """The last line of a failed copy (one line, however the reason read)."""
    text = " ".join(reason.split())[:MAX_REASON] or "the copy failed"
    return f"failure: {text}\n"


@dataclass
class Outcome:
    """What a perf-marker stream said: the markers by stripe (the latest
    of each), and the last line (None while the stream has not ended)."""

    stripes: dict[int, Marker]
    result: str | None = None

    @property
    def transferred(self) -> int:
        return sum(m.transferred for m in self.stripes.values())

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.lower().startswith("success")


def parse_stream(text: str) -> Outcome:
    """A perf-marker stream read so far; a line outside the format raises
    ValueError (as davix takes it)."""
    out = Outcome({})
    fields: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if out.result is not None:
            raise ValueError(f"a line after the result: {line[:60]!r}")
        if line == "Perf Marker":
            fields = {}
        elif line == "End" and fields is not None:
            try:
                m = Marker(int(fields["timestamp"]), int(fields["stripe index"]),
                           int(fields["stripe bytes transferred"]), int(fields["total stripe count"]),
                           tuple(x for x in fields.get("remoteconnections", "").split(",") if x))
            except (KeyError, ValueError):
                raise ValueError(f"a perf marker without its numbers: {fields}") from None
            out.stripes[m.index] = m
            fields = None
        elif fields is not None and ":" in line:
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        elif line.lower().startswith(("success", "failure", "failed", "aborted")):
            out.result = line
        else:
            raise ValueError(f"not a perf-marker line: {line[:60]!r}")
    return out
