"""drsftp/tuning/count/pathstreams.py: `-P auto` of a third-party copy, from the data
path's figures (docs/THIRDPARTY.md, "-P auto"; docs/PARALLEL.md).  Expected
values come from the RFCs and the docs, written here, not read back from the
module's constants (docs/MUTATION.md: many of these tests pin a rule a
mutation run found open)."""

from drsftp.tuning.count.pathstreams import PathStreams
from drsftp.tuning.count.streams import StreamsConfig

MiB = 1 << 20

# -- -P auto from the data path (docs/THIRDPARTY.md, "-P auto"; docs/PARALLEL.md) ---------------

def _path_auto(t0=100.0, rtt=0.05):
    """A copy's -P auto after its first report: 8 streams at 50 ms (10 Gbit/s over a 4 MiB cap)."""
    auto = PathStreams(StreamsConfig(max_streams=16), 4 * MiB)
    assert auto.update(t0, rtt, 0, 0) == 8
    return auto


def _path_run(auto, t0, rates, rtt=0.05, left=None, step=0.25, moved=0):
    """update every ``step`` seconds from t0, ``rates`` bytes/s in turn; the decisions."""
    out = []
    for i, rate in enumerate(rates, 1):
        moved += int(rate * step)
        out.append(auto.update(t0 + i * step, rtt, moved, 0, left))
    return out


def test_a_copy_starts_at_4_streams_and_waits_for_a_positive_data_path_rtt():
    auto = PathStreams(window_cap=4 * MiB)
    assert auto.streams == 4  # GridFTP's usual -p 4
    assert auto.update(0.0, 0.0, 0, 0) is None and auto.update(0.0, -1.0, 0, 0) is None
    assert auto.first_rtt is None
    auto.refused(4)  # (nothing asked yet: nothing to undo)
    assert auto.update(0.1, 0.1, 0, 0) == 8 and auto.first_rtt == 0.1


def test_the_path_controller_decides_once_an_interval_and_probes_after_four():
    """The interval is 4 RTTs, 0.25 s at least; the first probe waits 4 of them."""
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4) == [None, None, None, 9]
    auto = _path_auto()
    half = _path_run(auto, 100.0, [4e6] * 8, step=0.125)  # every other look is inside an interval
    assert half == [None] * 7 + [9]


def test_a_path_rtt_above_its_least_is_a_queue_that_holds_the_probe():
    auto = _path_auto()  # least RTT 50 ms
    assert _path_run(auto, 100.0, [4e6] * 6, rtt=0.1, step=0.4) == [None] * 6  # 100 ms > 1.25 x 50 ms + 2 ms


def test_the_path_probe_is_judged_on_the_goodput_b_reports():
    """A stream must add max(5%, 50% / 8) = 6.25% (docs/PARALLEL.md, "-P auto")."""
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 8)[3:] == [9, None, None, None, 8]  # flat: given back
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4 + [4.4e6] * 4)[3:] == [9, None, None, None, None]  # +10%: kept
    assert auto.streams == 9


def test_the_path_probes_only_while_the_rest_outlasts_its_judgment():
    """6 intervals: 4 to settle, 2 to judge."""
    auto = _path_auto()  # 4 MB/s: a second's bytes left is 4 intervals
    assert _path_run(auto, 100.0, [4e6] * 5, left=4_000_000) == [None] * 5
    auto = _path_auto()  # two seconds' is 8
    assert _path_run(auto, 100.0, [4e6] * 4, left=8_000_000)[-1] == 9
    auto = _path_auto()  # nothing moved: no rate to reckon the rest by
    assert _path_run(auto, 100.0, [0.0] * 4, left=8_000_000)[-1] == 9


def test_a_probe_the_source_refused_is_undone_and_the_next_waits_the_longest_backoff():
    auto = _path_auto()
    assert _path_run(auto, 100.0, [4e6] * 4) == [None, None, None, 9]
    auto.refused(8)  # what runs: the source kept its streams
    assert auto.controller is not None and auto.controller.streams == 8
    assert _path_run(auto, 101.0, [4e6] * 32, moved=4_000_000) == [None] * 31 + [9]  # 32 intervals
