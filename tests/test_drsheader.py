"""drsftp/http/drsheader.py: the DRS report and part-range headers."""

import pytest

from drsftp.http import drsheader


def test_report_round_trip_uses_the_drs_command_grammar():
    value = drsheader.report_value({"rtt_us": 100000, "rate": 125000000, "wnd": 0})
    assert value == "rtt_us=100000 rate=125000000 wnd=0"
    assert drsheader.parse_report(value) == {"rtt_us": 100000, "rate": 125000000, "wnd": 0}


def test_no_header_is_none_and_an_empty_one_says_drs_is_spoken():
    assert drsheader.parse_report(None) is None
    assert drsheader.parse_report("") == {}
    assert drsheader.parse_report("  ") == {}


@pytest.mark.parametrize("bad", ["rtt_us=-1", "rtt_us=1 rtt_us=2", "RTT=1", "rtt_us=99999999999", "x" * 20 + "=1"])
def test_malformed_reports_raise(bad):
    with pytest.raises(drsheader.DRSArgumentError):
        drsheader.parse_report(bad)


def test_part_ranges_round_trip_sorted():
    assert drsheader.parse_ranges(drsheader.format_ranges([(10, 19), (0, 4)])) == [(0, 4), (10, 19)]
    assert drsheader.parse_ranges("") == []
    assert drsheader.parse_ranges(None) == []


@pytest.mark.parametrize("bad", ["5-4", "a-b", "1", "-5", "1-2,,3-4", "1-" + "9" * 20])
def test_malformed_part_ranges_raise(bad):
    with pytest.raises(ValueError):
        drsheader.parse_ranges(bad)


def test_oversized_part_ranges_raise():
    with pytest.raises(ValueError):
        drsheader.parse_ranges(",".join(f"{i * 10}-{i * 10 + 1}" for i in range(1000)))
