"""Reading a COPY's ``text/perf-marker-stream`` as it arrives, line by line
(drsftp/http/perfmarker.py holds the format and its parser; docs/HTTP.md,
"Third-party copy"), and what the client shows of it: the bytes summed
over the stripes, the rate, the stripe count, the remote connections.
No I/O here: the caller feeds the lines it read."""

from __future__ import annotations

from dataclasses import dataclass, field

from ....http import perfmarker

MAX_MARKER_LINES = 32  # lines of one marker at most (it has six)


@dataclass
class MarkerReader:
    """``feed(line)`` each line of the body; ``outcome`` holds each stripe's
    latest marker and, once the stream ended, its last line."""

    outcome: perfmarker.Outcome = field(default_factory=lambda: perfmarker.Outcome({}))
    markers: int = 0  # markers read
    remote: list[str] = field(default_factory=list)  # every RemoteConnections entry seen, in order
    _block: list[str] = field(default_factory=list)

    @property
    def transferred(self) -> int:
        return self.outcome.transferred

    @property
    def stripes(self) -> int:
        """Total Stripe Count of the latest markers (0 before the first)."""
        return max((m.count for m in self.outcome.stripes.values()), default=0)

    @property
    def done(self) -> bool:
        return self.outcome.result is not None

    def feed(self, line: str) -> bool:
        """One line; True when it completed a marker or ended the stream.
        A line outside the format raises ValueError (a blank one is skipped:
        davix refuses it, but nothing is lost by reading past it)."""
        text = line.strip()
        if not text:
            return False
        if self.done:
            raise ValueError(f"a line after the result: {text[:60]!r}")
        if not self._block and text != "Perf Marker":
            self.outcome.result = perfmarker.parse_stream(text).result  # (anything else raises)
            return True
        self._block.append(text)
        if len(self._block) > MAX_MARKER_LINES:
            raise ValueError("a perf marker without its End line")
        if text != "End":
            return False
        got = perfmarker.parse_stream("\n".join(self._block))
        self._block.clear()
        for m in got.stripes.values():
            self.outcome.stripes[m.index] = m
            self.markers += 1
            for r in m.remote:
                if r not in self.remote:
                    self.remote.append(r)
        return True

    def failure(self) -> str | None:
        """The reason of a ``failure: ...`` last line (None: not failed)."""
        result = self.outcome.result
        if result is None or self.outcome.ok:
            return None
        head, _, reason = result.partition(":")
        return reason.strip() or head.strip()


class Rate:
    """Bits per second over the last ``span`` seconds of samples (the
    markers come every few seconds, all stripes at once)."""

    def __init__(self, span: float = 10.0) -> None:
        self.span = span
        self.samples: list[tuple[float, int]] = []

    def add(self, when: float, total: int) -> float:
        self.samples.append((when, total))
        while len(self.samples) > 2 and when - self.samples[1][0] >= self.span:
            self.samples.pop(0)
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) * 8 / (t1 - t0) if t1 > t0 else 0.0
