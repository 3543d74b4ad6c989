"""Mutation testing of the sans-IO cores, outside the suite (docs/MUTATION.md).

Applies one small change at a time to drsftp/tuning/*.py and drsftp/ftp/*.py
(a comparison, an arithmetic, bit or boolean operator, a numeric constant,
min/max, a ``not``) in a temporary copy of the tree, runs the fast unit tests that
import the mutated module (directly or through other drsftp modules) against
the copy, and reports the mutants no test kills ("survivors") and a kill
table per module.  The working tree is never touched.

    python tools/mutation.py --jobs 2        # every file, every site
    python tools/mutation.py --files drsftp/tuning/drs.py --max-seconds 600
    python tools/mutation.py --list          # the sites and the tests each module runs
    python tools/mutation.py --known         # KNOWN as docs/MUTATION.md's table

Exit status 0 when every mutant ran, each one is killed or listed in KNOWN
(explained as harmless in docs/MUTATION.md) and every module has 90% of its
mutants killed; 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import glob
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ("drsftp/ftp/*.py", "drsftp/tuning/*.py", "drsftp/tuning/count/*.py")
# The fast sans-IO unit tests (no root, namespaces, servers or sockets), in the
# order a mutant runs them: quick files first, so most mutants die early (-x).
# (Not tests/test_mutation_tool.py: it checks this file's KNOWN against the
# sources, which a mutant's rewritten file would fail.)
UNIT_TESTS = ("tests/test_climb.py", "tests/test_wirekeys.py", "tests/test_drscmd.py", "tests/test_replies.py",
              "tests/test_credentials.py", "tests/test_tuning_base.py", "tests/test_drs.py",
              "tests/test_safepath.py", "tests/test_blockplan.py", "tests/test_flow.py", "tests/test_listing.py",
              "tests/test_partname.py", "tests/test_thirdparty.py", "tests/test_relay.py", "tests/test_streams.py",
              "tests/test_fleet.py", "tests/test_pathstreams.py", "tests/test_sharing.py",
              "tests/test_streamwindow.py",
              "tests/test_socket_controller.py", "tests/test_parallel_units.py",
              "tests/test_eblock_codec.py", "tests/test_budget.py", "tests/test_tuning_pinned.py",
              "tests/test_ftp_proto.py", "tests/test_tuning.py", "tests/test_dataset_units.py",
              "tests/test_transfer_core.py", "tests/test_client_core.py", "tests/test_copy_pipe_units.py",
              "tests/test_tuning_lead.py", "tests/test_tuning_slowfloor.py", "tests/test_streams_sharing.py",
              "tests/test_copy_units.py")
# Loaded into each test run (-p): property tests derandomized and without an
# example database, so a run's survivors do not depend on the runs before it,
# and without Hypothesis' per-example deadline (a loaded machine is no failure).
PLUGIN = '''from hypothesis import settings
settings.register_profile("mutation", derandomize=True, database=None, deadline=None)
settings.load_profile("mutation")
'''

COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
           ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
         ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
         ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
BOOLOP = {ast.And: ast.Or, ast.Or: ast.And}
MINMAX = {"min": "max", "max": "min"}

# Mutants explained as harmless in docs/MUTATION.md ("Survivors"): equivalent
# (no input tells them apart), a boundary at float precision that measured
# times and rates do not sit on, or the wording of a message.  Keyed
# "path scope: `source` mutation" (see Site.key), which does not move when
# lines are added elsewhere; a key matching no site is reported as stale.
KNOWN: dict[str, str] = {
    # drsftp/ftp
    'drsftp/ftp/copypipe.py PipeFile: `eq=False` False -> True':
        'files are told apart by identity; with field equality the unique seq still tells them apart',
    'drsftp/ftp/copypipe.py Send: `eq=False` False -> True':
        'two equal commands are never outstanding at once (one ABOR a side per break, one setup per open)',
    'drsftp/ftp/copypipe.py PipeFlow: `_used: bool = False` False -> True':
        'set by every open (and on open streams) before a STOR reads it',
    'drsftp/ftp/copypipe.py PipeFlow._break: `at >= self.broke_at` GtE -> Gt':
        'an equal mark is a break with no file left, which sends nothing back either way',
    'drsftp/ftp/drscmd.py parse_args: `tok[:40]` 40 -> 41':
        'how much of a bad token the 501 reply quotes',
    'drsftp/ftp/drscmd.py parse_args: `(None, 1, EXTRA_BOUNDS.get(key, 1 << 62))` 1 -> 2':
        "the scale in an unknown key's bound: only the bound is read",
    'drsftp/ftp/drscmd.py to_report: `scale != 1` 1 -> 2':
        'a shortcut: multiplying by a scale of 1 changes nothing',
    'drsftp/ftp/eblock.py Desc: `RESTART = 0x10` 16 -> 17':
        'adds bit 0, which no header reaching the flag test carries (bits 0-1 are refused first):'
        ' 0x10 is refused as before',
    'drsftp/ftp/eblock.py Desc: `ERRORS = 0x20` 32 -> 33':
        'nothing sends or reads this flag (a header with bit 0 is refused before its flags are read)',
    'drsftp/ftp/eblock.py Desc: `EOR = 0x80` 128 -> 129':
        'adds bit 0, which no header reaching the flag test carries (bits 0-1 are refused first):'
        ' 0x80 is refused as before',
    'drsftp/ftp/eblock.py Data: `slots=True` True -> False':
        'memory layout only: the event is frozen either way',
    'drsftp/ftp/eblock.py EndOfFile: `slots=True` True -> False':
        'memory layout only: the event is frozen either way',
    'drsftp/ftp/eblock.py EndOfData: `slots=True` True -> False':
        'memory layout only: the event is frozen either way',
    'drsftp/ftp/eblock.py BlockDecoder.__init__: `self._offset = 0` 0 -> 1':
        "every block's header sets the offset before any payload is read",
    'drsftp/ftp/eblock.py BlockDecoder.feed_some: `len(take) < need` Lt -> LtE':
        'a whole header taken through the split-header buffer is the same 17 bytes',
    'drsftp/ftp/eblock.py RangeSet.missing: `a > at` Gt -> GtE':
        'adds a zero-width gap, which the last line drops',
    'drsftp/ftp/eblock.py RangeSet.missing: `at >= size` GtE -> Gt':
        'a further pass over ranges at or past the end adds only zero-width gaps, dropped',
    'drsftp/ftp/eblock.py RangeSet.missing: `at < size` Lt -> LtE':
        'adds the zero-width gap (size, size), dropped',
    'drsftp/ftp/flow.py TransferFlow.send: `verb = line.split(" ", 1)[0].upper()` 1 -> 2':
        'the verb is the first word whatever the split count',
    'drsftp/ftp/listing.py parse_time_val: `1 <= mo <= 12` 12 -> 13':
        'calendar.timegm refuses month 13 (ValueError) before the range check sees it',
    'drsftp/ftp/listing.py parse_mlst_reply: `len(lines) > 2` 2 -> 3':
        "a 250 reply's opening and closing lines are text, not `fact=value;` facts: searched, they give no entry",
    'drsftp/ftp/relay.py <module>: `SERIES_LIMIT = 20_000` 20000 -> 20001':
        "how many replies the --json record keeps a server: a bound on memory, one more as bounded",
    'drsftp/ftp/relay.py Relay.on_reply: `len(self.series[side]) < SERIES_LIMIT` Lt -> LtE':
        "how many replies the --json record keeps a server: a bound on memory, one more as bounded",
    'drsftp/ftp/relay.py Relay.on_reply: `"t": round(t, 4)` 4 -> 5':
        "how finely the --json record writes a reply's time (a tenth of a millisecond)",
    'drsftp/ftp/replies.py ReplyParser._line: `raw[:80]` 80 -> 81':
        'how much of a bad line the ProtocolError message quotes',
    'drsftp/ftp/safepath.py check_name: `name[:40]` 40 -> 41':
        'how much of an overlong name the UnsafePath message quotes',
    'drsftp/ftp/thirdparty.py Command: `frozen=True` True -> False':
        'nothing assigns to a command or hashes it: a mutable one behaves the same',
    'drsftp/ftp/thirdparty.py CopySpec: `frozen=True` True -> False':
        'nothing assigns to a spec or hashes it: a mutable one behaves the same',
    'drsftp/ftp/thirdparty.py Done: `frozen=True` True -> False':
        'nothing assigns to an outcome or hashes it: a mutable one behaves the same',
    'drsftp/ftp/thirdparty.py Failed: `frozen=True` True -> False':
        'nothing assigns to an outcome or hashes it: a mutable one behaves the same',
    # drsftp/tuning
    'drsftp/tuning/actuation.py rtt_from_info: `info.get("bytes_acked", 0)` 0 -> 1':
        'a missing bytes_acked read as 0 or 1: neither is past the SYN (> 1)',
    'drsftp/tuning/budget.py BufferBudget.limit: `flow.need > allowed` Gt -> GtE':
        'at need == allowed the scale is 1.0 and the floors leave the sizes as asked',
    'drsftp/tuning/budget.py BufferBudget.limit: `scale = max(allowed, 0) / flow.need` 0 -> 1':
        'allowed <= 0 scales to 0 or 1 byte, which the floor replaces'
        ' (the floor is 0 only for a budget under one byte per flow)',
    'drsftp/tuning/budget.py BufferBudget.share: `wanted <= pool` LtE -> Lt':
        "at wanted == pool the proportional share is exactly the flow's need: no grant changes",
    'drsftp/tuning/budget.py BufferBudget.share: `max(pool, 0)` 0 -> 1':
        'a negative pool needs claims past the total, which claim() and reserve() (half of what is free) prevent',
    'drsftp/tuning/budget.py BufferBudget.can_claim: `self._free() // 2` FloorDiv -> Div':
        'for an integer amount, amount <= free // 2 and amount <= free / 2 agree',
    'drsftp/tuning/budget.py BufferBudget._floor: `max(len(self._flows), 1)` 1 -> 2':
        '_floor() runs with the flow registered (n >= 1); n = 1 differs only for a lone flow'
        ' over a budget under 128 KiB in both directions',
    'drsftp/tuning/controller.py SocketController.__init__: `self.started = 0.0` 0.0 -> 1.0':
        'attach() sets started before anything reads it',
    'drsftp/tuning/controller.py SocketController.__init__: `self._moved = 0` 0 -> 1':
        'every tick sets the moved count before the driver records a timeline row',
    'drsftp/tuning/controller.py SocketController._leave_to_kernel: `cap < cfg.cap` Lt -> LtE':
        "a cap equal to the config's replaces it with itself (the floor is already at most the cap)",
    'drsftp/tuning/controller.py SocketController._autotuning_max: `lim[2] if lim else 0` 0 -> 1':
        'without tcp_rmem/tcp_wmem autotuning never reaches further, so the claim is never asked',
    'drsftp/tuning/controller.py SocketController.before_handshake:'
    ' `self.tuning.config.floor if isinstance(self.tuning, DRSTu...` 0 -> 1':
        'a strategy without a floor: max(0, 1) and max(1, 1) are both 1',
    'drsftp/tuning/controller.py SocketController.record: `"rtt_ms": round(self.last_rtt * 1000, 3)` 3 -> 4':
        'TCP_INFO RTTs are whole microseconds: milliseconds have 3 decimals at most',
    'drsftp/tuning/receiver.py DRSReceiver.__init__: `self._changed_at = 0.0` 0.0 -> 1.0':
        "the driver's clock (time.monotonic) is far past 1 s: before the first change either gives a whole RTT's step",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `cfg.shrink_step ** frac` Pow -> Mult':
        "the shrink's test holds only where the steady gain's does (0.75^f > 15/16 needs f < 0.22 RTT,"
        " 1.25^f < 17/16 f < 0.27); in slow start a growing window changes every tick, so the step"
        " from the last change is the tick's",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `1 - cfg.change_threshold` 1 -> 2':
        "the shrink's test holds only where the steady gain's does (0.75^f > 15/16 needs f < 0.22 RTT,"
        " 1.25^f < 17/16 f < 0.27); in slow start a growing window changes every tick, so the step"
        " from the last change is the tick's",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `1 - cfg.change_threshold` Sub -> Add':
        "the shrink's test holds only where the steady gain's does (0.75^f > 15/16 needs f < 0.22 RTT,"
        " 1.25^f < 17/16 f < 0.27); in slow start a growing window changes every tick, so the step"
        " from the last change is the tick's",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `cfg.shrink_step ** frac > 1 - cfg.change_threshold` Gt -> GtE':
        "the shrink's test holds only where the steady gain's does (0.75^f > 15/16 needs f < 0.22 RTT,"
        " 1.25^f < 17/16 f < 0.27); in slow start a growing window changes every tick, so the step"
        " from the last change is the tick's",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `gain ** frac < 1 + cfg.change_threshold` Lt -> LtE':
        "a tick's growth exactly 1/16 (float powers of the tick's share of an RTT): boundary",
    'drsftp/tuning/receiver.py DRSReceiver._decide: `now - self._hole_at < self._hold_span(srtt)` Lt -> LtE':
        'a hole exactly one hold span old (float times): boundary',
    'drsftp/tuning/receiver.py DRSReceiver._lead: `return 0.0` 0.0 -> 1.0':
        'no arrival rate yet: a lead of 1 byte or 0 is under the floor (eight segments at least) either way',
    'drsftp/tuning/receiver.py DRSReceiver._decide: `rate >= cfg.growth_seen * prev` GtE -> Gt':
        'a rate exactly 1.5x the last at float precision: a boundary measured rates do not sit on',
    'drsftp/tuning/receiver.py DRSReceiver._decide: `recent[0][0] < now - self._hold_span(srtt)` Lt -> LtE':
        'a measurement exactly one hold span old (float times): boundary',
    'drsftp/tuning/receiver.py DRSReceiver._cpu_floor:'
    ' `self.config.cpu_floor if min_rtt is not None and min_rtt ...` 0 -> 1':
        'no CPU floor on long paths: max(target, 1) is the target (the window floor is 256 KiB)',
    'drsftp/tuning/receiver.py DRSReceiver._recovering: `now < self._recovery_until` Lt -> LtE':
        'a tick exactly at the end of the recovery period (float times): boundary',
    'drsftp/tuning/sender.py DRSSender._decide: `recent[0][0] < now - 2 * srtt` Lt -> LtE':
        "a sender's rate exactly two RTTs old (float times): boundary",
    'drsftp/tuning/sender.py DRSSender._decide: `rate >= cfg.growth_seen * prev` GtE -> Gt':
        "the sender's rate exactly 1.5x the last: boundary, as the receiver's",
    'drsftp/tuning/sender.py DRSSender._decide: `peer_window = max(peer_window or 0, sample.peer_window)` 0 -> 1':
        "without a reported window, max(1, the kernel's window) is the kernel's window (guarded non-zero)",
    'drsftp/tuning/sender.py DRSSender._decide: `need <= 0` 0 -> 1':
        'need is the smaller of positive byte counts; a cwnd or window of 1 byte does not occur'
        ' (TCP: one MSS at least)',
    'drsftp/tuning/drs.py DRSTuning._rate: `len(hist) > 2` 2 -> 3':
        'keeps one sample more; _rate_since finds the same one at the span\'s start',
    'drsftp/tuning/drs.py DRSTuning._rate: `len(hist) > 2` Gt -> GtE':
        'with two entries the second is the newest (now), never a span old: the loop stops there either way',
    'drsftp/tuning/drs.py DRSTuning._rate: `hist[1][0] <= now - span` LtE -> Lt':
        "a sample exactly a span old stays second: _rate_since starts at the newest at or before the"
        " span's start, the same sample",
    'drsftp/tuning/drs.py DRSTuning._rate: `hist[1]` 1 -> 2':
        'drops hist[0] only when hist[1] is a span old too: the sample at the span\'s start stays',
    'drsftp/tuning/drs.py _rate_since: `1e-9 * (now - start)` 1e-09 -> 5e-10':
        'float tolerance of the one-span test',
    'drsftp/tuning/drs.py _rate_since: `now - start` Sub -> Add':
        'float tolerance of the one-span test',
    'drsftp/tuning/drs.py _rate_since: `t <= start + 1e-9 * (now - start)` LtE -> Lt':
        'a sample exactly at the start: interpolating to it from the one before gives its count',
    'drsftp/tuning/drs.py _rate_since: `k + 1` 1 -> 2':
        'skips interpolating toward the newest sample, which keeps the same slope: the same rate',
    'drsftp/tuning/drs.py _rate_since: `k + 1` Add -> Sub':
        'the sample at the start is never the newest (now > start): the next one always exists',
    'drsftp/tuning/drs.py _rate_since: `k + 1 < len(hist)` Lt -> LtE':
        'the sample at the start is never the newest (now > start): the next one always exists',
    'drsftp/tuning/drs.py _rate_since: `hist[k + 1][0] > t0` Gt -> GtE':
        'guards a division by zero for two samples at one instant: samples come at rising times',
    'drsftp/tuning/drs.py _rate_since: `k + 1 < len(hist) and hist[k + 1][0] > t0` And -> Or':
        'the sample at the start is never the newest (now > start): the next one always exists',
    'drsftp/tuning/drs.py DRSTuning._step: `target < self.window` Lt -> LtE':
        'a target equal to the window: max(target, window x shrink) is the target',
    'drsftp/tuning/drs.py DRSTuning._fresh: `now - self._peer_time <= max(self.config.peer_report_ttl ...` LtE -> Lt':
        'a peer report exactly at its freshness limit: boundary',
    'drsftp/tuning/count/fleet.py FleetController.__init__: `self._needed = 0.0` 0.0 -> 1.0':
        "a probe's start sets it before its judgment reads it",
    'drsftp/tuning/count/fleet.py FleetController.__init__: `self._rtt = 0.1` 0.1 -> 0.05':
        'the RTT assumed until one is measured: the job passes its first session\'s RTT (note_rtt)'
        ' before every update, so it stands only where no RTT was ever measured',
    'drsftp/tuning/count/pathstreams.py PathStreams.update: `goodput > 0` 0 -> 1':
        'a goodput of at most 1 byte/s: the rest outlasts the judgment either way unless under'
        ' 6 intervals x 1 byte is left',
    'drsftp/tuning/count/pathstreams.py PathStreams.refused: `self.controller.streams > self.streams` Gt -> GtE':
        'the test before it leaves the two counts unequal: > and >= agree',
    'drsftp/tuning/count/sharing.py PathSample: `frozen=True` True -> False':
        'nothing assigns to a sample or hashes it: a mutable one behaves the same',
    'drsftp/tuning/slowfloor.py SlowFloor.update: `held <= 0` LtE -> Lt':
        'a held rate of 0: short of a best above 0 either way; with no best yet its zero ticks'
        ' leave the floor where it is either way',
    'drsftp/tuning/slowfloor.py SlowFloor.update: `held <= 0` 0 -> 1':
        'a held rate of 1 byte/s or less: a stalled sender (56 kbit/s is 7,000 bytes/s), no path'
        ' a floor is sized for',
    'drsftp/tuning/slowfloor.py SlowFloor.update: `min(rates) <= 0` 0 -> 1':
        'a tick of 1 byte/s or less: a stalled sender (56 kbit/s is 7,000 bytes/s), no path'
        ' a floor is sized for',
    'drsftp/tuning/count/window.py WindowedStreams.__init__: `self._baseline = 0.0` 0.0 -> 1.0':
        "a probe's start sets it before its judgment reads it",
    'drsftp/tuning/count/window.py WindowedStreams.__init__: `self._expected = 0.0` 0.0 -> 1.0':
        "a probe's start sets it before its judgment reads it",
    'drsftp/tuning/count/window.py WindowedStreams.__init__: `self._recent: deque[float] = deque(maxlen=8)` 8 -> 9':
        "only its last 4 intervals (a probe's judgment) and 3 (the ramp) are read",
    'drsftp/tuning/count/window.py WindowedStreams.__init__: `self._streak = 0` 0 -> 1':
        'the window is first set by a cut, which resets the streak before any step reads it',
    'drsftp/tuning/count/window.py WindowedStreams.stream_window: `self.window >= self.streams * self.cap` GtE -> Gt':
        "a window of exactly the streams' caps: each stream's share is its cap, what None stands for",
    'drsftp/tuning/count/window.py WindowedStreams.stream_window: `max(1, self.window // self.streams)` 1 -> 2':
        "the window is one stream's cap at least: a share is never under 2 bytes",
    'drsftp/tuning/count/window.py WindowedStreams.update: `self._expected > 0` 0 -> 1':
        'a probe expects 0 (nothing moved before it) or its step over the base RTT, never 1 byte/s or less'
        ' but at a goodput of a few bytes/s',
    'drsftp/tuning/count/window.py WindowedStreams._grow: `step <= 0` 0 -> 1':
        "a room of one byte under the streams' caps: a probe of one byte or none, the window at its top either way",
    'drsftp/tuning/count/window.py WindowedStreams._cut: `taken=True` True -> False':
        "every call that reaches the taken test passes taken (a queue's cut never does)",
    'drsftp/tuning/count/window.py WindowedStreams._trim: `least or 0` 0 -> 1':
        "without a least the window is one stream's cap at least, far above 1 byte",
    'drsftp/tuning/count/window.py _median: `statistics.median(xs) if xs else 0.0` 0.0 -> 1.0':
        'a median is taken only with the current interval in the history: never of nothing',
    'drsftp/tuning/count/streams.py StreamController._give_back: `self.streams <= c.min_streams` LtE -> Lt':
        'a probe added a stream, so the count is above the minimum whenever one is given back',
}


@dataclass(frozen=True)
class Site:
    path: str
    index: int
    line: int
    col: int
    scope: str
    source: str
    what: str
    nth: int

    def key(self) -> str:
        """'path scope: `source` what', with '#n' for the n-th alike site in a scope."""
        tail = f" #{self.nth}" if self.nth > 1 else ""
        return f"{self.path} {self.scope}: `{self.source}` {self.what}{tail}"

    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


def _skip(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Annotations carry no behaviour."""
    while node in parents:
        parent = parents[node]
        if isinstance(parent, (ast.AnnAssign, ast.arg)) and node is parent.annotation:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is parent.returns:
            return True
        node = parent
    return False


class Mutator(ast.NodeTransformer):
    """Counts mutation sites in a fixed walk order; mutates site ``target``
    (None: only collect them)."""

    def __init__(self, path: str, text: str, tree: ast.AST, target: int | None = None) -> None:
        self.path, self.text, self.target = path, text, target
        self.sites: list[Site] = []
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self.parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

    def _scope(self, node: ast.AST) -> str:
        names = []
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
        return ".".join(reversed(names)) or "<module>"

    def _source(self, node: ast.AST) -> str:
        """The node's source; a constant's with the expression around it."""
        shown = node
        parent = self.parents.get(node)
        if isinstance(node, ast.Constant) and isinstance(parent, (ast.expr, ast.keyword, ast.Assign, ast.AnnAssign,
                                                                  ast.AugAssign, ast.Return)):
            shown = parent
        if isinstance(shown, ast.Slice):
            shown = self.parents[shown]
        text = " ".join((ast.get_source_segment(self.text, shown) or "").split())
        if isinstance(parent, ast.arguments):  # a default: name it
            named = parent.args[len(parent.args) - len(parent.defaults):] + parent.kwonlyargs
            values = parent.defaults + parent.kw_defaults
            text = next((f"{a.arg}={text}" for a, v in zip(named, values, strict=True) if v is node), text)
        return self._context(shown, text)

    def _context(self, shown: ast.AST, text: str) -> str:
        """``text`` named by where it stands: a table row's key, or the short
        assignment it is the value of."""
        row = shown
        while isinstance(self.parents.get(row), ast.expr) and not isinstance(self.parents[row], ast.Dict):
            row = self.parents[row]
        holder = self.parents.get(row)
        if isinstance(holder, ast.Dict) and row in holder.values:
            key = holder.keys[holder.values.index(row)]
            text = f"{ast.get_source_segment(self.text, key) if key else '**'}: {text}"
        elif isinstance(holder, (ast.Assign, ast.AnnAssign)) and row is holder.value and shown is not row:
            whole = " ".join((ast.get_source_segment(self.text, holder) or "").split())
            text = whole if len(whole) <= 60 else text
        return text if len(text) <= 60 else text[:57] + "..."

    def _site(self, node: ast.AST, what: str) -> bool:
        if _skip(node, self.parents):
            return False
        scope, source = self._scope(node), self._source(node)
        self.seen[scope, source, what] += 1
        i = len(self.sites)
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        self.sites.append(Site(self.path, i, line, col, scope, source, what, self.seen[scope, source, what]))
        return i == self.target

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for k, op in enumerate(node.ops):
            new = COMPARE.get(type(op))
            if new and self._site(node, f"{type(op).__name__} -> {new.__name__}"):
                node.ops[k] = new()
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        new = BINOP.get(type(node.op))
        if new and self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        new = BINOP.get(type(node.op))
        if new and self._site(node, f"{type(node.op).__name__}= -> {new.__name__}="):
            node.op = new()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        new = BOOLOP[type(node.op)]
        if self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._site(node, "not x -> x"):
            return node.operand
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in MINMAX:
            new = MINMAX[node.func.id]
            if self._site(node, f"{node.func.id}() -> {new}()"):
                node.func = ast.Name(new, ast.Load())
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        v = node.value
        if isinstance(v, bool):
            if self._site(node, f"{v} -> {not v}"):
                return ast.Constant(not v)
        elif isinstance(v, int):
            if self._site(node, f"{v} -> {v + 1}"):
                return ast.Constant(v + 1)
        elif isinstance(v, float):
            new = v / 2 if v else 1.0  # half, or 1.0 for 0.0
            if self._site(node, f"{v!r} -> {new!r}"):
                return ast.Constant(new)
        return node


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _mutator(path: str, text: str, target: int | None = None) -> tuple[Mutator, ast.AST]:
    tree = ast.parse(text)
    m = Mutator(path, text, tree, target)
    return m, m.visit(tree)


def sites(path: str, text: str | None = None) -> list[Site]:
    return _mutator(path, _read(os.path.join(ROOT, path)) if text is None else text)[0].sites


def mutate(path: str, text: str, index: int) -> str:
    """``text`` (the file as it was when the sites were counted) with site ``index`` changed."""
    return ast.unparse(ast.fix_missing_locations(_mutator(path, text, index)[1]))


# -- which unit tests exercise a module: the static import graph ------------------

def _module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name.removesuffix(".__init__")


def _drsftp_modules() -> dict[str, str]:
    paths = glob.glob("drsftp/**/*.py", root_dir=ROOT, recursive=True)
    return {_module_name(p): p for p in paths}


def _imports(path: str, modules: dict[str, str]) -> set[str]:
    """The drsftp modules a file imports (an import of a.b.c also runs a and a.b)."""
    here = _module_name(path)
    package = here if path.endswith("__init__.py") else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(_read(os.path.join(ROOT, path)))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {".".join(n.split(".")[:k]) for n in found for k in range(1, n.count(".") + 2)} & modules.keys()


def _reach(path: str, modules: dict[str, str]) -> set[str]:
    """Every drsftp module importing ``path`` runs, transitively."""
    seen: set[str] = set()
    todo = list(_imports(path, modules))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports(modules[name], modules))
    return seen


def unit_tests() -> list[str]:
    out: list[str] = []
    for pattern in UNIT_TESTS:
        out += [p for p in sorted(glob.glob(pattern, root_dir=ROOT)) if p not in out]
    return out


def tests_for(files: Iterable[str]) -> dict[str, list[str]]:
    """Per mutated file, the unit tests that import it: those naming it first."""
    modules, tests = _drsftp_modules(), unit_tests()
    direct = {t: _imports(t, modules) for t in tests}
    reach = {t: _reach(t, modules) for t in tests}
    out = {}
    for f in files:
        name = _module_name(f)
        out[f] = ([t for t in tests if name in direct[t]]
                  + [t for t in tests if name in reach[t] and name not in direct[t]])
    return out


# -- running ----------------------------------------------------------------------

def run_tests(tree_dir: str, tests: list[str], timeout: float, running: set[int] | None = None) -> str:
    """'killed', 'survived' or 'timeout' (a hang: its process group is killed,
    and the mutant counts as killed)."""
    env = dict(os.environ, PYTHONPATH=tree_dir, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "_mutation_plugin",
           "-o", "addopts=", *tests]
    proc = subprocess.Popen(cmd, cwd=tree_dir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    if running is not None:
        running.add(proc.pid)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout"
    finally:
        if running is not None:
            running.discard(proc.pid)
    return "survived" if code == 0 else "killed"


def make_tree(texts: dict[str, str]) -> str:
    """A copy of the tree to mutate in; the mutated files as ``texts`` (read
    when their sites were counted: an edit of the working tree meanwhile
    does not shift the sites)."""
    tmp = tempfile.mkdtemp(prefix="drsmut")
    shutil.copytree(os.path.join(ROOT, "drsftp"), os.path.join(tmp, "drsftp"))
    for path, text in texts.items():
        with open(os.path.join(tmp, path), "w") as f:
            f.write(text)
    shutil.copytree(os.path.join(ROOT, "tests"), os.path.join(tmp, "tests"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp)
    with open(os.path.join(tmp, "_mutation_plugin.py"), "w") as f:
        f.write(PLUGIN)
    return tmp


class Runner:
    """Runs mutants on ``jobs`` copies of the tree, one mutant per copy at a time."""

    def __init__(self, jobs: int, texts: dict[str, str], tests: dict[str, list[str]], timeout: float,
                 deadline: float) -> None:
        self.trees: queue.Queue[str] = queue.Queue()
        self.all_trees = [make_tree(texts) for _ in range(jobs)]
        for t in self.all_trees:
            self.trees.put(t)
        self.tests, self.timeout, self.deadline = tests, timeout, deadline
        self.lock = threading.Lock()
        self.results: dict[Site, str] = {}
        self.running: set[int] = set()

    def stop(self) -> None:
        """No more mutants; the running ones' process groups are killed (their
        results are dropped)."""
        self.deadline = 0.0
        for pid in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def close(self) -> None:
        for t in self.all_trees:
            shutil.rmtree(t, ignore_errors=True)

    def run(self, s: Site) -> None:
        if time.monotonic() > self.deadline:
            return
        tree = self.trees.get()
        try:
            target = os.path.join(tree, s.path)
            original = _read(target)  # the copy's, made when the sites were counted
            with open(target, "w") as f:
                f.write(mutate(s.path, original, s.index))
            try:
                result = run_tests(tree, self.tests[s.path], self.timeout, self.running)
            finally:
                with open(target, "w") as f:
                    f.write(original)
        finally:
            self.trees.put(tree)
        if self.deadline == 0.0:
            return
        with self.lock:
            self.results[s] = result
            if len(self.results) % 100 == 0:
                print(f"# {len(self.results)} mutants run", flush=True)
            if result == "survived":
                mark = "known" if s.key() in KNOWN else "SURVIVED"
                print(f"{mark} {s.location()} | {s.key()}", flush=True)
            elif result == "timeout":
                print(f"timeout {s.location()} | {s.key()}", flush=True)


def kill_table(all_sites: list[Site], results: dict[Site, str]) -> tuple[list[str], bool]:
    """The per-module table and whether every module reaches 90% killed."""
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for s in all_sites:
        r = results.get(s, "not run")
        per[s.path][r if r != "survived" else ("known" if s.key() in KNOWN else "unexplained")] += 1
    rows = [f"{'module':28} {'sites':>6} {'killed':>7} {'known':>6} {'unexpl.':>8} {'not run':>8} {'killed %':>9}"]
    ok = True
    for path in sorted(per):
        c = per[path]
        n, killed = sum(c.values()), c["killed"] + c["timeout"]
        ok &= killed >= 0.9 * n
        rows.append(f"{path:28} {n:6} {killed:7} {c['known']:6} {c['unexplained']:8} {c['not run']:8} "
                    f"{100 * killed / n:8.1f}%")
    return rows, ok


def _cell(text: str) -> str:
    """Text in a Markdown table cell: a pipe escaped (GFM, also in code spans)."""
    return text.replace("|", "\\|")


def _named(path: str) -> set[str]:
    """Keys from a previous run's output ('SURVIVED loc | key') or one key a line."""
    return {line.split(" | ", 1)[-1].strip() for line in _read(path).splitlines() if line.strip()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--files", nargs="*", help=f"files to mutate (default: {', '.join(TARGETS)})")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (each on its own copy of the tree)")
    ap.add_argument("--max-seconds", type=float, default=3600, help="stop starting mutants after this")
    ap.add_argument("--timeout", type=float, default=30, help="per-mutant test timeout (a hang counts as killed)")
    ap.add_argument("--lines", help="only the sites on these lines (comma-separated; with one file)")
    ap.add_argument("--only", metavar="FILE",
                    help="only the mutants named in FILE: a previous run's output, or one key a line")
    ap.add_argument("--list", action="store_true", help="list the sites and each module's tests, and exit")
    ap.add_argument("--known", action="store_true",
                    help="print KNOWN as the Markdown table docs/MUTATION.md carries, and exit")
    args = ap.parse_args(argv)
    if args.known:
        print("| mutant | why it is harmless |\n|---|---|")
        for key, why in KNOWN.items():
            print(f"| {_cell(key)} | {_cell(why)} |")
        return 0
    files = args.files or sorted(p for g in TARGETS for p in glob.glob(g, root_dir=ROOT))
    texts = {f: _read(os.path.join(ROOT, f)) for f in files}
    every_site = [s for f in files for s in sites(f, texts[f])]
    all_sites = every_site
    if args.lines:
        wanted = {int(n) for n in args.lines.split(",")}
        all_sites = [s for s in all_sites if s.line in wanted]
    if args.only:
        named = _named(args.only)
        all_sites = [s for s in all_sites if s.key() in named]
    tests = tests_for(files)
    if args.list:
        for s in all_sites:
            print(f"{s.location()} | {s.key()}")
        for f in files:
            print(f"{f}: {' '.join(os.path.basename(t) for t in tests[f]) or 'NO TESTS'}")
        print(f"{len(all_sites)} sites")
        return 0
    stale = sorted(set(KNOWN) - {s.key() for s in every_site}) if not args.files else []
    for key in stale:
        print(f"stale KNOWN key (no such site): {key}")
    untested = [f for f in files if not tests[f]]
    if untested:
        print(f"no unit test imports {', '.join(untested)}", file=sys.stderr)
        return 1
    start = time.monotonic()
    runner = Runner(max(1, args.jobs), texts, tests, args.timeout, start + args.max_seconds)
    try:
        union = sorted({t for f in files for t in tests[f]}, key=unit_tests().index)
        if run_tests(runner.all_trees[0], union, args.timeout * 4) != "survived":
            print("the unmutated tree fails its tests", file=sys.stderr)
            return 1
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            try:
                list(pool.map(runner.run, all_sites))
            except KeyboardInterrupt:
                runner.stop()
                print("interrupted", file=sys.stderr)
    finally:
        runner.close()
    results = runner.results
    survived = [s for s, r in results.items() if r == "survived"]
    unknown = [s for s in survived if s.key() not in KNOWN]
    rows, ok = kill_table(all_sites, results)
    print("\n".join(rows))
    print(f"{len(results)}/{len(all_sites)} mutants run in {time.monotonic() - start:.0f} s "
          f"(--jobs {args.jobs}): {len(results) - len(survived)} killed, {len(survived)} survived "
          f"({len(unknown)} not explained)")
    complete = len(results) == len(all_sites)
    return 0 if complete and not unknown and not stale and (ok or args.only or args.lines) else 1


if __name__ == "__main__":
    sys.exit(main())
