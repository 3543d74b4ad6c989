"""The sans-IO transfer core shared by both ends: the DRS exchange
(drsftp/ftp/drsexchange.py) and the extended block mode plan
(drsftp/ftp/blockplan.py)."""

import math

from hypothesis import given
from hypothesis import strategies as st

from drsftp.ftp import blockplan, drsexchange
from drsftp.ftp.blockplan import MAX_BLOCK, MIN_BLOCK, BlockPlan, block_size

MiB = 1 << 20


# -- the DRS exchange ------------------------------------------------------------


def test_a_session_report_takes_the_least_rtt_and_sums_the_rest():
    a = {"rtt_us": 100_000, "rate": 10, "wnd": 1000, "bytes": 5, "rcvbuf": 7, "unknown": 3}
    b = {"rtt_us": 90_000, "rate": 30, "wnd": 3000, "bytes": 6, "retrans": 2}
    assert drsexchange.session_report([a, b]) == {"rtt_us": 90_000, "rate": 40, "wnd": 4000, "bytes": 11,
                                                  "rcvbuf": 7, "retrans": 2}
    assert drsexchange.session_report([a, b], streams=2)["streams"] == 2
    assert drsexchange.session_report([]) == {}
    assert "streams" not in drsexchange.session_report([a])


def test_a_stream_takes_an_even_share_of_the_peers_sums_and_its_rtt_whole():
    report = {"rtt_us": 100_000, "rate": 1001, "wnd": 4000, "cwnd": 8, "inflight": 9, "bytes": 12, "streams": 4}
    share = drsexchange.stream_share(report, 4)
    assert share == {"rtt_us": 100_000, "rate": 250, "wnd": 1000, "cwnd": 2, "inflight": 2, "bytes": 3,
                     "streams": 4}
    assert drsexchange.stream_share(report, 0) == drsexchange.stream_share(report, 1) == report


@given(st.lists(st.fixed_dictionaries({"rtt_us": st.integers(1, 10**7), "rate": st.integers(0, 10**9),
                                       "wnd": st.integers(0, 10**9)}), min_size=1, max_size=16))
def test_split_of_a_sum_never_gives_a_stream_more_than_the_session(reports):
    total = drsexchange.session_report(reports)
    share = drsexchange.stream_share(total, len(reports))
    assert share["rate"] * len(reports) <= total["rate"] < (share["rate"] + 1) * len(reports)
    assert share["rtt_us"] == min(r["rtt_us"] for r in reports)


def test_one_drs_command_at_a_time_and_at_most_one_per_rtt():
    ex = drsexchange.Exchange(enabled=True)
    assert ex.due(0.0, 0.1)
    ex.sent(0.0)
    assert not ex.due(10.0, 0.1)  # the reply is still out
    assert ex.on_reply(200, "DRS rtt_us=5000 rate=77") == {"rtt_us": 5000, "rate": 77}
    assert ex.replies == 1 and ex.peer_last == {"rtt_us": 5000, "rate": 77}
    assert not ex.due(0.099, 0.1) and ex.due(0.1, 0.1)
    assert not ex.due(0.049, 0.001) and ex.due(drsexchange.MIN_INTERVAL, 0.001)  # the floor on short paths
    assert ex.due(0.05, None)


def test_a_500_or_502_turns_the_exchange_off_other_refusals_do_not():
    for code, stays in ((500, False), (502, False), (501, True), (503, True), (None, True)):
        ex = drsexchange.Exchange(enabled=True)
        ex.sent(0.0)
        assert ex.on_reply(code, "no") is None
        assert ex.enabled is stays and not ex.pending and ex.replies == 0
        assert ex.due(1.0, 0.1) is stays


def test_a_disabled_exchange_is_never_due_and_a_reply_without_pairs_still_counts():
    assert not drsexchange.Exchange(enabled=False).due(100.0, None)
    ex = drsexchange.Exchange(enabled=True)
    assert ex.on_reply(200, "Transfer complete.") == {}  # a 200 whose text is no DRS reply
    assert ex.replies == 1


def test_the_command_line_carries_known_values_only():
    assert drsexchange.command({"rtt_us": 1500, "rate": None, "wnd": 7.9}) == "DRS rtt_us=1500 wnd=7"
    assert drsexchange.command({}) == "DRS"


# -- the block plan ---------------------------------------------------------------


def test_block_size_is_about_eight_a_stream_in_whole_64k_within_the_bounds():
    # the bounds as docs/EBLOCK.md states them: 256 KiB to 4 MiB
    assert (MIN_BLOCK, MAX_BLOCK) == (256 * 1024, 4 * 1024 * 1024)
    assert block_size(4 * MiB, 4) == 256 * 1024  # 8 a stream would be 128 KiB
    assert block_size(64 * MiB, 4) == 2 * MiB
    assert block_size(96 * MiB + 12345, 4) == 3 * MiB
    assert block_size(10 << 30, 4) == 4 * MiB
    assert block_size(0, 0) == 256 * 1024
    assert block_size(int(8 * 1.5 * MiB), 1) == int(1.5 * MiB)


def test_without_streams_the_plan_is_fixed_blocks_in_file_order_over_every_range():
    plan = BlockPlan([(0, 10 * MiB), (20 * MiB, 20 * MiB), (30 * MiB, 31 * MiB)], 4 * MiB)
    assert plan.left == 11 * MiB
    assert plan.all() == [(0, 4 * MiB), (4 * MiB, 4 * MiB), (8 * MiB, 2 * MiB), (30 * MiB, MiB)]
    assert plan.done and plan.left == 0 and plan.next(4) is None


def test_toward_the_end_blocks_taper_so_the_streams_end_together():
    blocks = BlockPlan([(0, 512 * MiB)], 4 * MiB).all(streams=8)
    assert blocks[0] == (0, 4 * MiB)
    sizes = [n for _, n in blocks]
    assert sizes == sorted(sizes, reverse=True)  # never larger again
    assert sizes[-2] == MIN_BLOCK >= sizes[-1] and 4 * MiB > sizes[-20] >= MIN_BLOCK
    left = 512 * MiB
    for _, n in blocks:  # the guided self-scheduling bound, block by block
        assert n <= max(MIN_BLOCK, left // (blockplan.TAPER * 8))
        left -= n


def test_the_taper_follows_the_streams_sending_at_each_block():
    plan = BlockPlan([(0, 64 * MiB)], 4 * MiB)
    assert plan.next(1) == (0, 4 * MiB)
    assert plan.next(16) == (4 * MiB, 60 * MiB // 64)  # 60 MiB left over 4 x 16 streams


@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 64 * MiB)), max_size=8),
       st.integers(64 << 10, 8 * MiB), st.one_of(st.none(), st.integers(1, 64)))
def test_the_plan_covers_each_range_exactly_once_in_order(raw, block, streams):
    ranges, end = [], 0
    for gap, length in raw:  # disjoint, ascending ranges
        ranges.append((end + gap, end + gap + length))
        end += gap + length
    out = BlockPlan(ranges, block).all(streams)
    assert all(0 < n <= block for _, n in out)
    covered = []
    for o, n in out:
        if covered and covered[-1][1] == o:
            covered[-1] = (covered[-1][0], o + n)
        else:
            covered.append((o, o + n))
    assert covered == [r for r in _merged(ranges) if r[1] > r[0]]


def _merged(ranges):
    out = []
    for a, b in ranges:
        if b <= a:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def test_a_non_positive_block_is_refused():
    for bad in (0, -1):
        try:
            BlockPlan([(0, 1)], bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    assert math.isfinite(block_size(1, 1))


def test_block_sizes_are_whole_64k_and_a_plan_without_streams_is_one_share():
    assert block_size(34 * MiB, 4) == 1088 * 1024  # 34 MiB over 32 blocks: 17 x 64 KiB, not rounded to 128 KiB
    assert block_size(2 * MiB, 0) == 2 * MiB  # no stream count: the whole, within the bounds
    assert BlockPlan([(0, 3)], 1).all() == [(0, 1), (1, 1), (2, 1)]  # a 1-byte block is a block
