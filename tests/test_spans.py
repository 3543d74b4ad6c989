"""drsftp/http/spans.py: the client's ranged requests and their answers."""

from drsftp.http.spans import (
    MAX_REQUEST,
    content_range,
    parse_content_range,
    range_header,
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
