"""One controller for a dataset job's data connections: sessions x streams, sans-IO.

`-c auto` (sessions) and `-P auto` (a big file's streams) are one hill
climb on the whole job's goodput, the idea of Falcon (Arifuzzaman et al.,
IEEE TPDS 2023: concurrency and parallelism tuned together on measured
goodput).  One probe at a time; the controller chooses where the next data
connection goes (docs/DATASETS.md, "Sessions x streams"):

* a **stream** for the running big file with the most bytes left, while
  the big files hold at least as many bytes as the queued files: the job
  then ends with that file, and a stream costs no log-in;
* else **sessions**, x1.5, while more files wait than the sessions hold
  and the rest of the job outlasts ``grow_rtts`` round trips (a session's
  log-in, first byte and slow start, then its judgment);
* a probe settles (a stream ``settle`` intervals, sessions
  ``session_settle``: they log in first), then the mean goodput of the
  last ``judge`` intervals must beat the mean before it: by
  ``gain_needed(n)`` for a stream among n running connections (streams.py's
  rule), by ``session_gain`` for a step of sessions; else the probe is
  given back and the next one waits twice as long (up to ``max_backoff``
  intervals); a queue or new retransmits on any of the job's connections
  while it is judged give it back too;
* sharing (docs/decisions/0021-streams-that-share.md): a queue that stays
  while the senders report that no buffer cap holds them (``PathSample``,
  tuning/count/sharing.py) gives a connection back, a big file's stream first,
  else a step of sessions (x2/3): the connections are held by congestion,
  and one more only takes from other flows.

A cached session's own streams stay as ``-P`` sets them (one): a file
smaller than a stream's share of the path gains nothing from a second
stream that another session would not give it, and a session overlaps
its files' round trips as well.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from ..climb import Base, Climb, Verdict, rose
from .sharing import LimitMeter, PathSample
from .streams import StreamSample, queue_in


class Kind(enum.Enum):
    SESSION = "session"
    STREAM = "stream"


@dataclass(frozen=True)
class Change:
    kind: Kind
    delta: int  # > 0: added; < 0: given back
    file: Hashable | None = None  # a stream's big file


@dataclass(frozen=True)
class Work:
    """What the job has left, as the driver sees it at an update."""

    queued_files: int  # files waiting for a session
    queued_bytes: int
    big_left: dict[Hashable, int] = field(default_factory=dict)  # running big files: bytes left
    bytes_left: int = 0  # the whole job's


@dataclass(frozen=True)
class FleetConfig:
    start_sessions: int = 16  # twice GridFTP's -cc 8: a session costs a log-in, its files' round trips overlap
    min_sessions: int = 1
    max_sessions: int = 32
    file_streams: int = 4  # a big file's first streams where the path gives none (streams.first_streams)
    max_file_streams: int = 16
    session_gain: float = 0.10  # a step of sessions must add 10% (the step adds half as many again)
    min_gain: float = 0.05  # a stream must add at least 5% ...
    gain_share: float = 0.5  # ... or half of one connection's share of the sum before it
    queue_factor: float = 1.25
    queue_slack: float = 0.002  # seconds: scheduling noise on a short path
    settle: int = 4  # intervals before a new stream is judged (its slow start)
    session_settle: int = 5  # ... a new session (its log-in first)
    judge: int = 2  # intervals averaged on each side of a comparison
    max_backoff: int = 32
    grow_rtts: int = 30  # a session is worth adding only while the rest outlasts this
    limited_share: float = 0.1  # buffer-limited: a cap held the senders a tenth of their busy time or more

    def gain_needed(self, connections: int) -> float:
        return max(self.min_gain, self.gain_share / max(connections, 1))


class FleetController:
    """``sessions``: the job's session count (None: fixed by ``-c N``);
    ``streams``: each running big file's stream count."""

    def __init__(self, config: FleetConfig | None = None, fixed_sessions: int | None = None) -> None:
        self.config = c = config or FleetConfig()
        self.fixed = fixed_sessions is not None
        self.sessions = fixed_sessions or max(c.min_sessions, min(c.start_sessions, c.max_sessions))
        self.streams: dict[Hashable, int] = {}
        self._fixed_files: set[Hashable] = set()  # their streams cannot change (a server without DRS)
        self._probe: Change | None = None  # being judged
        self._needed = 0.0  # the gain the probe must show
        # the first judgment waits for the first sessions' slow start
        self.climb = Climb(settle=c.settle, judge=c.judge, max_backoff=c.max_backoff, wait=c.session_settle)
        self._retrans: int | None = None
        self._rtt = 0.1  # seconds (note_rtt)
        self._max_sessions = c.max_sessions
        self._meter = LimitMeter()
        self._limited: float | None = None  # the last interval's buffer-limited share (None: unknown)
        self._path_base = Base()

    @staticmethod
    def interval(rtt: float | None) -> float:
        """Seconds between updates: a few RTTs, at least a quarter second."""
        return max(0.25, 4 * (rtt or 0.0))

    @property
    def connections(self) -> int:
        return self.sessions + sum(self.streams.values())

    # -- big files -------------------------------------------------------------
    def start_file(self, file: Hashable, streams: int | None = None) -> int:
        """A big file starts on sessions of its own: its first streams
        (``streams``, else ``file_streams``)."""
        self.streams[file] = max(1, min(streams or self.config.file_streams, self.config.max_file_streams))
        return self.streams[file]

    def end_file(self, file: Hashable) -> None:
        self.streams.pop(file, None)
        self._fixed_files.discard(file)
        if self._probe is not None and self._probe.file == file:
            self._probe = None  # nothing left to judge
            self._reset()

    # -- the climb ---------------------------------------------------------------
    def update(self, goodput: float, samples: Sequence[StreamSample], work: Work,
               path: PathSample | None = None) -> Change | None:
        """One interval's figures in; the change to apply out (already
        counted in ``sessions``/``streams``), or None.  ``path``: the
        senders' figures summed over the job's connections, where known."""
        c, climb = self.config, self.climb
        total = sum(s.retransmits for s in samples)
        new_loss = rose(total, self._retrans)
        self._retrans = total
        queue = queue_in(samples, c.queue_factor, c.queue_slack)
        if path is not None and path.rtt:
            queue = self._path_base.queued(path.rtt, c.queue_factor, c.queue_slack) or queue
        climb.note(goodput, queue)
        self._limited = self._meter.update(path)
        congested = new_loss or queue
        if self._probe is not None:
            settle = c.session_settle if self._probe.kind is Kind.SESSION else c.settle
            verdict = climb.verdict(congested, settle, self._needed)
            if verdict is Verdict.BACK:
                return self._give_back()
            if verdict is Verdict.KEEP:
                self._probe = None  # the connection stays
                climb.kept()
            return None
        if climb.sharing(self._limited, c.limited_share):
            return self._share()
        if climb.waiting or congested:
            return None
        change = self._next(goodput, work)
        if change is None:
            return None
        self._needed = c.session_gain if change.kind is Kind.SESSION else c.gain_needed(len(samples))
        self._apply(change)
        self._probe = change
        climb.probed()
        return change

    def refused(self, change: Change) -> None:
        """The driver could not apply ``change`` (a server that cannot
        change a file's streams): undone; that file is left as it is."""
        self._apply(Change(change.kind, -change.delta, change.file))
        if change.kind is Kind.STREAM:
            self._fixed_files.add(change.file)
        self._probe = None
        self._reset()

    def _share(self) -> Change | None:
        """A connection given back to the flows beside the job: a queue
        stays and no buffer cap holds the senders (module docstring)."""
        c = self.config
        self.climb.failed()
        shrinkable = {f: n for f, n in self.streams.items() if n > 1 and f not in self._fixed_files}
        if shrinkable:
            back = Change(Kind.STREAM, -1, max(shrinkable, key=lambda f: shrinkable[f]))
        elif not self.fixed and self.sessions > c.min_sessions:
            back = Change(Kind.SESSION, max(c.min_sessions, self.sessions * 2 // 3) - self.sessions)
        else:
            self._reset()
            return None
        self._apply(back)
        self._reset()
        return back

    def _next(self, goodput: float, work: Work) -> Change | None:
        c = self.config
        growable = {f: left for f, left in work.big_left.items()
                    if f in self.streams and f not in self._fixed_files and self.streams[f] < c.max_file_streams}
        if growable and sum(work.big_left.values()) >= work.queued_bytes:
            return Change(Kind.STREAM, +1, max(growable, key=lambda f: growable[f]))
        rest = work.bytes_left / goodput if goodput > 0 else float("inf")
        if (not self.fixed and self.sessions < self._max_sessions and work.queued_files > self.sessions
                and rest > c.grow_rtts * self._rtt):
            step = min(self._max_sessions, max(self.sessions + 1, self.sessions * 3 // 2)) - self.sessions
            return Change(Kind.SESSION, step)
        return None

    def note_rtt(self, rtt: float | None) -> None:
        """The path's RTT (seconds): how long a session's join takes."""
        if rtt:
            self._rtt = rtt

    def limit_sessions(self, n: int) -> None:
        """The server takes no more than ``n`` sessions (a probe of sessions
        running then ends: there is nothing to give back)."""
        self._max_sessions = max(1, n)
        self.sessions = min(self.sessions, self._max_sessions)
        if self._probe is not None and self._probe.kind is Kind.SESSION:
            self._probe = None
            self._reset()

    def _give_back(self) -> Change | None:
        probe, self._probe = self._probe, None
        self.climb.failed()
        self._reset()
        if probe is None:
            return None
        if probe.kind is Kind.STREAM and probe.file not in self.streams:
            return None  # the file has ended
        back = Change(probe.kind, -probe.delta, probe.file)
        self._apply(back)
        return back

    def _apply(self, change: Change) -> None:
        if change.kind is Kind.SESSION:
            self.sessions = max(self.config.min_sessions, min(self.sessions + change.delta, self._max_sessions))
        elif change.file in self.streams:
            self.streams[change.file] += change.delta

    def _reset(self) -> None:
        self.climb.changed()
