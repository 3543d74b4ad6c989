"""drsftp/http/ranges.py: Range headers within a file's size (RFC 9110 sec. 14)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsftp.http.ranges import (
    MAX_RANGES,
    ByteRange,
    Unsatisfiable,
    multipart_head,
    multipart_length,
    multipart_tail,
    parse_range,
)


@pytest.mark.parametrize("header,size,want", [
    ("bytes=0-99", 1000, [(0, 99)]),
    ("bytes=900-", 1000, [(900, 999)]),
    ("bytes=-100", 1000, [(900, 999)]),
    ("bytes=-5000", 1000, [(0, 999)]),  # a suffix longer than the file: all of it
    ("bytes=990-2000", 1000, [(990, 999)]),  # a last byte past the end is the end
    ("bytes=0-9, 5-19 ,30-39", 1000, [(0, 19), (30, 39)]),  # overlaps merged
    ("bytes=10-19,0-9", 1000, [(0, 19)]),  # adjacent, out of order: merged
    ("bytes=0-0,-1", 1000, [(0, 0), (999, 999)]),
    ("bytes=0-9,,20-29", 1000, [(0, 9), (20, 29)]),  # an empty list element
    ("BYTES=0-9", 1000, [(0, 9)]),  # the unit is case-insensitive
    ("bytes=1000-,0-9", 1000, [(0, 9)]),  # one range past the end, one within
])
def test_ranges_within_the_size(header, size, want):
    assert [(r.first, r.last) for r in parse_range(header, size)] == want


@pytest.mark.parametrize("header", [
    None, "items=0-9", "bytes", "bytes=9-0", "bytes=a-b", "bytes=-", "bytes=0-9,x", "bytes=1-2-3",
    "bytes=0x1-9", "bytes=\u0661-9", "bytes=" + ",".join(["0-1"] * (MAX_RANGES + 1)), "bytes=0-" + "9" * 5000,
])
def test_a_header_not_understood_or_abusive_gets_the_whole_file(header):
    assert parse_range(header, 1000) is None


@pytest.mark.parametrize("header,size", [("bytes=1000-", 1000), ("bytes=5-9", 0), ("bytes=-0", 1000),
                                         ("bytes=2000-3000,1000-", 1000)])
def test_ranges_all_past_the_end_are_unsatisfiable(header, size):
    with pytest.raises(Unsatisfiable) as got:
        parse_range(header, size)
    assert got.value.content_range == f"bytes */{size}"


@given(st.integers(min_value=1, max_value=10**6),
       st.lists(st.tuples(st.integers(0, 2 * 10**6), st.integers(0, 2 * 10**6)), min_size=1, max_size=8))
def test_every_byte_asked_within_the_size_is_sent_once_and_no_other(size, pairs):
    header = "bytes=" + ",".join(f"{min(a, b)}-{max(a, b)}" for a, b in pairs)
    try:
        got = parse_range(header, size)
    except Unsatisfiable:
        assert all(min(a, b) >= size for a, b in pairs)
        return
    assert got is not None
    wanted = set()
    for a, b in pairs:
        lo, hi = min(a, b), min(max(a, b), size - 1)
        if lo < size and hi - lo < 2000:  # (spot-check the short ones byte by byte)
            wanted.update(range(lo, hi + 1))
    sent = [(r.first, r.last) for r in got]
    assert all(0 <= f <= last < size for f, last in sent)
    assert all(sent[i][1] + 1 < sent[i + 1][0] for i in range(len(sent) - 1))  # sorted, apart: merged
    covered = lambda x: any(f <= x <= last for f, last in sent)  # noqa: E731
    assert all(covered(x) for x in wanted)


def test_a_multipart_body_has_the_length_it_announces():
    parts = [ByteRange(0, 9), ByteRange(20, 29)]
    body = b"".join(multipart_head("XyZ", p, 100, "application/octet-stream") + bytes(p.length) for p in parts)
    body += multipart_tail("XyZ")
    assert len(body) == multipart_length("XyZ", parts, 100, "application/octet-stream")
    assert b"Content-Range: bytes 20-29/100\r\n" in body and body.endswith(b"--XyZ--\r\n")
