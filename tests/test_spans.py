"""drsftp/http/spans.py: the client's ranged requests and their answers,
and the fences they set in a download's range plan (streams/rangeplan.py)."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.client.streams.rangeplan import RangePlan, cut_point
from drsftp.http.spans import (
    MAX_REQUEST,
    MIN_REQUEST,
    STEAL_KEPT,
    STEAL_NEW,
    content_range,
    parse_content_range,
    range_header,
    request_end,
    spans,
    steal_least,
    unsatisfied_size,
)

MIB = 1 << 20


def test_headers_are_inclusive():
    assert range_header(0, 100) == "bytes=0-99"
    assert content_range(100, 200, 1000) == "bytes 100-199/1000"


def test_content_range_parsing():
    assert parse_content_range("bytes 0-99/1000") == (0, 100, 1000)
    assert parse_content_range("bytes 5-9/*") == (5, 10, None)
    for bad in (None, "", "bytes */1000", "bytes 9-5/1000", "bytes 0-1000/1000", "items 0-1/2", "bytes 0-x/2",
                "bytes 0-1", "bytes " + "9" * 30 + "-1/2"):
        assert parse_content_range(bad) is None, bad
    assert unsatisfied_size("bytes */1000") == 1000 and unsatisfied_size("bytes 0-1/2") is None


def test_spans_cut_gaps_at_the_limit():
    assert spans([(0, 10), (20, 25)], 4) == [(0, 4), (4, 8), (8, 10), (20, 24), (24, 25)]
    assert spans([(0, 3 * MAX_REQUEST + 1)]) == [(i * MAX_REQUEST, (i + 1) * MAX_REQUEST) for i in range(3)] + [
        (3 * MAX_REQUEST, 3 * MAX_REQUEST + 1)]
    assert spans([]) == []


def test_a_request_asks_for_the_whole_share_up_to_the_cap():
    assert request_end(0, 64 * MIB) == 64 * MIB  # (8 connections' shares of 512 MiB: one request each)
    assert request_end(0, 512 * MIB) == MAX_REQUEST
    assert request_end(0, MAX_REQUEST + MIB) == (MAX_REQUEST + MIB) // 2  # (no 1 MiB left behind the cap)
    assert request_end(5, 105) == 105


@given(st.integers(0, 1 << 40), st.integers(1, 1 << 31))
def test_requests_cover_a_share_within_the_cap_and_leave_no_sliver(pos, length):
    end, n = pos + length, 0
    while pos < end:
        nxt = request_end(pos, end)
        assert pos < nxt <= end and nxt - pos <= MAX_REQUEST
        assert nxt == end or end - nxt >= MIN_REQUEST
        pos, n = nxt, n + 1
    assert n <= -(-length // MAX_REQUEST) + 1


def test_a_thief_splits_only_past_the_request_a_worker_committed():
    mib = 1 << 20
    plan = RangePlan(16 * mib)
    plan.split(2)
    a, b = plan.take(0), plan.take(1)
    assert (a.start, a.end, b.start, b.end) == (0, 8 * mib, 8 * mib, 16 * mib)
    plan.commit(1, 15 * mib)  # worker 1 asked for 8-15 MiB in one request
    plan.advance(0, 8 * mib)
    plan.release(0)
    assert plan.take(0) is None  # (1 MiB past the fence: less than twice MIN_STEAL)
    plan.commit(1, 12 * mib)  # (a fence never moves back)
    assert b.fence == 15 * mib and b.end == 16 * mib
    with pytest.raises(ValueError):
        plan.commit(1, 17 * mib)


def test_a_steal_takes_half_of_what_is_past_the_fence():
    mib = 1 << 20
    plan = RangePlan(16 * mib)
    b = plan.take(1)
    plan.commit(1, 4 * mib)
    c = plan.take(0)
    assert (c.start, c.end, b.end) == (10 * mib, 16 * mib, 10 * mib)
    plan.give_back(1)  # -P auto ends worker 1: its request runs on to its fence
    assert b.end == 4 * mib and plan.take(2).start == 4 * mib


def test_with_cut_a_steal_splits_the_request_in_flight_when_nothing_is_past_a_fence():
    plan = RangePlan(64 * MIB)
    plan.split(2)
    a, b = plan.take(0), plan.take(1)
    plan.commit(0, a.end)
    plan.commit(1, b.end)  # (each asked for its whole share)
    plan.advance(0, 32 * MIB)
    plan.release(0)
    assert plan.take(0) is None and not plan.can_take()  # (without cut: nothing past a fence)
    plan.advance(1, 8 * MIB)
    c = plan.take(0, cut=True, least=STEAL_KEPT)
    assert (c.start, c.end, b.end) == (52 * MIB, 64 * MIB, 52 * MIB)  # (half of 24 MiB unread)
    assert b.fence == 64 * MIB > b.end  # worker 1 asked past its range: it stops reading at 52 MiB
    plan.commit(0, c.end)
    plan.advance(1, 4 * MIB)  # worker 1 at 44 MiB: 8 left; worker 0's 12 untouched
    assert plan.take(2, cut=True, least=STEAL_NEW) is None  # (a new connection: 2 x 16 MiB at least)
    d = plan.take(2, cut=True, least=STEAL_KEPT)
    assert (d.start, d.end, c.end) == (58 * MIB, 64 * MIB, 58 * MIB)


def test_a_steal_past_a_fence_comes_before_a_cut():
    plan = RangePlan(200 * MIB)
    a = plan.take(0)
    plan.commit(0, 64 * MIB)  # (136 MiB past the request)
    b = plan.take(1, cut=True)
    assert (b.start, a.end, a.fence) == (132 * MIB, 132 * MIB, 64 * MIB)


def test_the_least_steal_is_larger_for_a_connection_to_open():
    assert steal_least(True) == STEAL_KEPT < STEAL_NEW == steal_least(False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(1, 40 * MIB)), max_size=40),
       st.integers(1, 4), st.integers(1, 200 * MIB))
def test_cut_steals_lose_and_double_no_byte(ops, workers, size):
    """Any mix of takes (cut or not), requests, progress and ends: the
    ranges in play never overlap, and finishing them all holds the file."""
    plan = RangePlan(size, min_steal=MIB)
    plan.split(workers)
    for w, op, n in ops:
        asg = plan.active.get(w)
        if asg is None:
            plan.take(w, cut=op % 2 == 0, least=[None, MIB, STEAL_KEPT][op % 3])
        elif op == 0:
            plan.commit(w, request_end(asg.pos, asg.end))
        elif op in (1, 2):
            plan.advance(w, min(n, asg.left))
        elif op == 3 or asg.done:
            plan.release(w)
        else:
            plan.give_back(w)
        spans_ = sorted((s.pos, s.end) for s in plan.active.values() if s.pos < s.end)
        assert all(b0 <= a1 for (_, b0), (a1, _) in itertools.pairwise(spans_))
        assert all(s.start <= s.pos <= s.end for s in plan.active.values())
    for _ in range(200):  # (each round ends a range: bounded)
        for w in list(plan.active):
            plan.advance(w, plan.active[w].left)
            plan.release(w)
        if plan.take(0, cut=True) is None:
            break
    assert plan.held.total == size and plan.complete


def test_a_cut_leaves_each_reader_what_ends_both_together():
    # a reader at 10 MB/s with 40 MB unread, a thief at 30 MB/s a round trip (0.1 s) from its first byte:
    # the reader keeps k with k / 10 = 0.1 + (40 - k) / 30, so k = 10.75 MB, both done 1.075 s on
    assert cut_point(40_000_000, MIB, 10e6, 30e6, 0.1) == 10_750_000
    assert cut_point(40_000_000, MIB, None, 30e6, 0.1) == 21_500_000  # (a speed unknown: equal, the lead kept)
    assert cut_point(40_000_000, MIB, None, None, 0.1) == 20_000_000  # (no speed: halves)
    assert cut_point(40_000_000, MIB, 1e6, 1e9, 0.0) == MIB  # (each keeps the least at least)
    assert cut_point(40_000_000, MIB, 1e9, 1e6, 5.0) == 40_000_000 - MIB


def test_with_speeds_the_steal_splits_the_range_that_ends_last():
    plan = RangePlan(300 * MIB)
    plan.split(3)
    spans_ = [plan.take(w) for w in range(3)]
    assert [(a.start, a.end) for a in spans_] == [(150 * MIB, 300 * MIB), (0, 75 * MIB), (75 * MIB, 150 * MIB)]
    for a in spans_:
        plan.commit(a.worker, a.end)
    plan.advance(1, 75 * MIB)
    plan.release(1)
    plan.advance(2, 15 * MIB)  # worker 2: 60 MiB unread at 30 MB/s (2.1 s); worker 0: 150 MiB at 100 MB/s (1.6 s)
    assert plan.take(1, cut=True, least=STEAL_KEPT).start == 225 * MIB  # (no speeds: the most unread, halved)
    plan.active.pop(1)
    spans_[0].end = 300 * MIB
    got = plan.take(1, cut=True, least=STEAL_KEPT, speeds={0: 100e6, 1: 30e6, 2: 30e6}, delay=0.1)
    keep = (60 * MIB + 0.1 * 30e6) / 2  # (equal speeds: half of what is left once the thief starts)
    assert got.end == 150 * MIB and got.start == 90 * MIB + int(keep) - int(keep) % (1 << 16)
