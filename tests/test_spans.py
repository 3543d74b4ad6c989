"""drsftp/http/spans.py: the client's ranged requests and their answers,
and the fences they set in a download's range plan (streams/rangeplan.py)."""

import pytest

from drsftp.client.streams.rangeplan import RangePlan
from drsftp.http.spans import (
    MAX_REQUEST,
    MIN_REQUEST,
    TAPER,
    content_range,
    parse_content_range,
    range_header,
    request_end,
    spans,
    unsatisfied_size,
)


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


def test_requests_taper_toward_the_end_and_leave_no_sliver():
    mib = 1 << 20
    assert request_end(0, 512 * mib, 512 * mib, 1) == MAX_REQUEST  # (the cap)
    assert request_end(0, 64 * mib, 512 * mib, 8) == 512 * mib // (TAPER * 8)
    assert request_end(10 * mib, 64 * mib, 16 * mib, 8) == 10 * mib + MIN_REQUEST  # (the floor)
    assert request_end(0, MIN_REQUEST + mib, 8 * mib, 8) == MIN_REQUEST + mib  # (no 1 MiB left behind)
    assert request_end(5, 105, 100, 4) == 105
    ends, pos = [], 0
    while pos < 64 * mib:  # one connection's share of 8 sharing 512 MiB evenly
        pos = request_end(pos, 64 * mib, (64 * mib - pos) * 8, 8)
        ends.append(pos)
    sizes = [b - a for a, b in zip([0, *ends], ends)]
    assert sizes == [32 * mib, 16 * mib, 8 * mib, 4 * mib, 2 * mib, 2 * mib]


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
