"""drsftp/tuning/base.py: decisions, samples and reports as values, buffer sizes
and tuning specs.  Expected values come from the RFCs and the docs, written
here, not read back from the module's constants (docs/MUTATION.md: many of
these tests pin a rule a mutation run found open)."""

import dataclasses

import pytest

from drsftp.ftp.replies import Reply
from drsftp.ftp.url import FTPLocation
from drsftp.tuning import Decision, PeerReport, Role, Sample, check_spec, create, parse_size
from drsftp.tuning.base import parse_buffer

KiB, GiB = 1 << 10, 1 << 30


# -- the tuning interface's value objects ------------------------------------------

def test_decisions_merge_and_diff_field_by_field():
    assert Decision().is_empty()
    assert not Decision(rcv_window=1).is_empty() and not Decision(notsent=1).is_empty()
    assert Decision(1, 2, 3).changes_from(Decision(1, 5, 3)) == Decision(None, 2, None)
    assert Decision(None, 2, None).over(Decision(1, 5, 3)) == Decision(1, 2, 3)


def test_value_objects_are_immutable_and_counts_start_at_zero():
    """Decisions, samples, reports, replies and URLs are passed between the
    sans-IO cores and the drivers; none may change under another's hands."""
    for obj in (Decision(1), Sample(), PeerReport(), Reply(200, ("x",)), FTPLocation("h", 21, "u", "p", "/f")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.x = 1
    assert (Sample().bytes_received, Sample().bytes_acked) == (0, 0)


def test_a_cap_below_the_floor_lowers_the_floor():
    small = create("drs:128KiB", Role.RECEIVER)
    assert small.config.cap == small.config.floor == 128 * KiB


def test_sizes_in_bytes_with_binary_suffixes():
    assert parse_size("1") == 1 and parse_size("0.5k") == 512
    assert parse_size("3m") == 3 << 20 and parse_size("2GiB") == 2 << 30 and parse_size("1g") == 1 << 30
    for bad in ("0", "0.0001k", "-1", "1t"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_a_valid_spec_checks_and_comes_back():
    assert check_spec("drs:8MiB") == "drs:8MiB" and check_spec("kernel") == "kernel"
    with pytest.raises(ValueError, match="unknown tuning"):
        check_spec("bogus")


# -- base: buffer sizes (docs/DESIGN.md #kf-doubling: the kernel doubles an int) ------------

def test_a_socket_buffer_of_1_gib_is_accepted_and_one_byte_more_is_not():
    assert parse_buffer("1GiB") == GiB
    assert parse_buffer(str(GiB)) == GiB
    with pytest.raises(ValueError, match="at most 1 GiB"):
        parse_buffer(str(GiB + 1))
