"""drsftp/ftp/drscmd.py: the DRS command's grammar, bounds and reply
(docs/PROTOCOL.md).  Expected values come from the RFCs and the docs, written
here, not read back from the module's constants (docs/MUTATION.md: many of
these tests pin a rule a mutation run found open)."""

import pytest

from drsftp.ftp import drscmd
from drsftp.tuning import PeerReport

# -- DRS command grammar (docs/PROTOCOL.md, "Replies": the bounds) ----------------

BOUNDS = {"rtt_us": 60_000_000, "cwnd": 1 << 34, "inflight": 1 << 34, "wnd": 1 << 34, "rate": 1 << 40,
          "bytes": 1 << 62, "future_key": 1 << 62,
          "streams": 65536}  # MODE E streams (docs/PROTOCOL.md, "DRS in extended block mode")


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_each_drs_value_bound_is_inclusive(key):
    bound = BOUNDS[key]
    assert drscmd.parse_args(f"{key}={bound}") == {key: bound}
    with pytest.raises(drscmd.DRSArgumentError):
        drscmd.parse_args(f"{key}={bound + 1}")


def test_at_most_16_pairs():
    sixteen = " ".join(f"k{i}=1" for i in range(16))
    assert len(drscmd.parse_args(sixteen)) == 16
    with pytest.raises(drscmd.DRSArgumentError):
        drscmd.parse_args(sixteen + " k16=1")


def test_a_report_carries_the_values_in_si_units_and_drops_zeros():
    pairs = drscmd.parse_args("rtt_us=1500 cwnd=1000 inflight=900 wnd=800 rate=700 bytes=1")
    assert drscmd.to_report(pairs) == PeerReport(rtt=0.0015, cwnd=1000, inflight=900, window=800, rate=700,
                                                 bytes=1)
    assert drscmd.to_report(drscmd.parse_args("rtt_us=0 cwnd=0 bytes=0")) == PeerReport()


def test_reply_pairs_keep_zero_drop_negatives_and_unknowns():
    assert drscmd.format_pairs({"a": 0, "b": -1, "c": None, "d": 2.9}) == "a=0 d=2"


def test_reply_text_must_start_with_the_word_drs():
    assert drscmd.parse_reply_text("") == {}
    assert drscmd.parse_reply_text("Transfer a=1") == {}
    assert drscmd.parse_reply_text("DRS a=1 note") == {"a": 1}
