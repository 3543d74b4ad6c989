"""drsftp/http/steal.py: a pull's shares and stolen tails (docs/decisions/
0043-tpc-pull-asks-shares-and-steals-tails.md), driven by hand: every byte
asked exactly once, a cut only ever moves a span's end down past what it
already got."""

from __future__ import annotations

import itertools
import random

from drsftp.http.steal import ALIGN, MIN_TAIL, SLIVER, Plan, Span

MiB = 1 << 20
CHUNK = 64 * MiB


def test_free_streams_ask_for_equal_shares_of_what_is_missing():
    plan = Plan(16 * MiB, 512 * MiB, CHUNK)
    first = plan.open(0, 16 * MiB)
    shares = [plan.next(8) for _ in range(7)]
    assert [s.end - s.start for s in shares if s] == [64 * MiB] * 7  # (512 / 8, the first's 16 MiB counted)
    last = plan.next(8)
    assert last is not None and (last.start, last.end) == (464 * MiB, 512 * MiB)  # what is left, less than a share
    assert plan.next(8) is None and plan.unasked == 0
    assert plan.missing == 512 * MiB and first in plan.running


def test_one_stream_asks_chunks_and_a_sliver_goes_with_the_share_before():
    plan = Plan(0, 2 * CHUNK + SLIVER - 1, CHUNK)
    sizes = [s.end - s.start for s in iter(lambda: plan.next(1), None)]
    assert sizes == [CHUNK, CHUNK + SLIVER - 1]


def test_a_steal_takes_the_longest_tail_and_leaves_the_victim_half_and_the_lead():
    plan = Plan(0, 100 * MiB, CHUNK)
    a, b = plan.next(2), plan.next(2)
    assert a is not None and b is not None and plan.next(2) is None
    a.at += 40 * MiB  # a got 40 of its 50, b 10
    b.at += 10 * MiB
    tail = plan.steal(lead=2 * MiB)
    assert tail is not None and tail.end == 100 * MiB
    kept = b.end - b.at
    assert b.end == tail.start and kept >= (40 * MiB + 2 * MiB) // 2 and kept % ALIGN == 0
    assert tail.end - tail.start == 40 * MiB - kept


def test_no_steal_of_a_tail_under_the_minimum():
    plan = Plan(0, 8 * MiB, CHUNK)
    s = plan.next(1)
    assert s is not None
    s.at = 8 * MiB - 2 * MIN_TAIL  # a tail of MIN_TAIL at most is left to take
    assert plan.steal(lead=MIN_TAIL) is None  # (the victim's lead leaves less)
    assert plan.steal(lead=0, min_tail=2 * MIN_TAIL) is None
    tail = plan.steal(lead=0)
    assert tail is not None and tail.end - tail.start == MIN_TAIL and s.end == tail.start


def test_cut_and_done_give_what_was_not_got_back_to_the_plan():
    plan = Plan(0, 10 * MiB, CHUNK)
    s = plan.next(1)
    assert s is not None and plan.unasked == 0
    s.at = 3 * MiB
    plan.cut(s, MiB)  # (-P auto ended the stream: a lead more, then the rest is free)
    assert s.end == 4 * MiB and plan.free == [(4 * MiB, 10 * MiB)]
    s.at = 3 * MiB + 5
    plan.done(s)  # (it stopped short: a failure's)
    assert plan.free == [(3 * MiB + 5, 10 * MiB)] and not plan.running
    again = plan.next(1)
    assert again is not None and (again.start, again.end) == (3 * MiB + 5, 10 * MiB)


def test_random_runs_deliver_every_byte_exactly_once():
    """Streams that get bytes at random speeds, take shares, steal tails
    and are cut: the bytes they get tile the file."""
    rng = random.Random(43)
    for _ in range(30):
        total = rng.randrange(1, 300) * MiB + rng.randrange(MiB)
        first = min(16 * MiB, total)
        plan = Plan(first, total, CHUNK)
        got: list[tuple[int, int]] = []
        spans: list[Span | None] = [plan.open(0, first)] + [None] * rng.randrange(0, 8)
        for _ in range(100_000):
            idle = [i for i, s in enumerate(spans) if s is None]
            for i in idle:
                spans[i] = plan.next(len(spans)) or plan.steal(rng.randrange(0, 4 * MiB))
            live = [i for i, s in enumerate(spans) if s is not None]
            if not live:
                break
            i = rng.choice(live)
            s = spans[i]
            assert s is not None
            n = min(rng.randrange(1, 3 * MiB), s.end - s.at)
            got.append((s.at, s.at + n))
            s.at += n
            if s.at >= s.end:
                plan.done(s)
                spans[i] = None
        got.sort()
        assert got[0][0] == 0 and got[-1][1] == total and plan.missing == 0
        assert all(a[1] == b[0] for a, b in itertools.pairwise(got))  # no gap, no byte twice
