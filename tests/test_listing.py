"""drsftp/ftp/listing.py: MLSD/MLST facts (RFC 3659) and LIST lines, parsed.
Expected values come from the RFCs and the docs, written here, not read back
from the module's constants (docs/MUTATION.md: many of these tests pin a rule
a mutation run found open)."""

import dataclasses

import pytest

from drsftp.ftp.listing import FILE, LINK, Entry, parse_list_line, parse_mlst_reply, parse_mlsx_line, parse_time_val

# -- listings (RFC 3659 sec. 2.3 and 7; the Unix ls -l format of LIST) ------------------

JAN_1_2021 = 1609459200  # 2021-01-01 00:00:00 UTC


@pytest.mark.parametrize("text, want", [
    ("20210101000000", JAN_1_2021),
    ("20210101000000.25", JAN_1_2021 + 0.25),  # fractions of a second add
    ("20211231235959", JAN_1_2021 + 365 * 86400 - 1),  # month 12, day 31, hour 23, minute 59
    ("20201231235960", JAN_1_2021),  # second 60: a leap second
])
def test_a_time_val_is_utc_to_the_fraction(text, want):
    assert parse_time_val(text) == want


@pytest.mark.parametrize("text", ["20210001000000", "20211301000000", "20210100000000", "20210132000000",
                                  "20210101240000", "20210101006000", "20210101000061"])
def test_a_time_val_outside_its_fields_ranges_is_no_time(text):
    """RFC 3659 sec. 2.3: month 01-12, day 01-31, hour 00-23, minute 00-59,
    second 00-60."""
    assert parse_time_val(text) is None


def test_an_mlsd_line_needs_facts_a_space_and_a_name():
    assert parse_mlsx_line("type=file;size=1; ") is None  # no name after the space
    assert parse_mlsx_line("type=file;size=1;") is None  # no space
    assert parse_mlsx_line("type=file;size=1; x") == Entry("x", FILE, 1)


def test_an_mlst_reply_without_an_opening_line_still_gives_its_entry():
    """RFC 3659 sec. 7.2 puts the entry between an opening and a closing
    line; a reply of the entry and the closing line alone is read too."""
    assert parse_mlst_reply((" type=file;size=5; /f", "End")) == Entry("/f", FILE, 5)
    assert parse_mlst_reply(("type=file;size=5; /f",)) == Entry("/f", FILE, 5)


def test_a_list_line_keeps_an_arrow_in_a_files_name_and_splits_a_links_at_its_first():
    f = parse_list_line("-rw-r--r-- 1 u g 5 Jan 05  2021 a -> b")
    assert (f.name, f.type, f.target) == ("a -> b", FILE, None)
    ln = parse_list_line("lrwxrwxrwx 1 u g 5 Jan 05  2021 x -> y -> z")
    assert (ln.name, ln.type, ln.target) == ("x", LINK, "y -> z")


JUN_15_2021 = 1623715200  # 2021-06-15 00:00:00 UTC


@pytest.mark.parametrize("line_time, now, want", [
    ("Jun 14 10:20", JUN_15_2021, JUN_15_2021 - 86400 + 10 * 3600 + 20 * 60),  # this year, to the minute
    ("Jun 15 00:00", JUN_15_2021 + 3 * 3600, JUN_15_2021),
    ("Jun 16 00:00", JUN_15_2021, JUN_15_2021 + 86400),  # a day ahead (time zones): still this year
    ("Jun 16 00:00", JUN_15_2021 - 1, JUN_15_2021 + 86400 - 365 * 86400),  # more than a day ahead: last year
    ("Dec 31 23:59", JAN_1_2021 + 3600, JAN_1_2021 - 60),
    ("Jan 05  2021", JUN_15_2021, JAN_1_2021 + 4 * 86400),  # a year: midnight UTC of that day
])
def test_a_list_time_without_a_year_is_the_latest_not_more_than_a_day_ahead(line_time, now, want):
    """ls -l shows HH:MM for the last six months: the year is the one that
    puts the time at most a day after now (clocks and time zones), else the
    year before."""
    e = parse_list_line(f"-rw-r--r-- 1 u g 5 {line_time} f", now=now)
    assert e.mtime == want


def test_listing_entries_are_values_no_consumer_can_change():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Entry("x", FILE).name = "y"
