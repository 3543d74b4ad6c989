"""Extended block mode codec and ledger (GFD.20), sans-IO."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drsftp.ftp import eblock
from drsftp.ftp.eblock import BlockDecoder, BlockError, Data, EndOfData, EndOfFile, RangeSet, ReceiveLedger


def test_header_layout_is_descriptor_count_offset_big_endian():
    # GFD.20: 8-bit descriptor, 64-bit count, 64-bit offset; GridFTP's values
    # for the descriptor bits (EOD 8, EOF 64, CLOSE 4)
    assert eblock.data_header(offset=0x0102030405060708, count=5) == (
        b"\x00" + (5).to_bytes(8, "big") + bytes(range(1, 9)))
    assert eblock.eod(eof_streams=4)[0] == 0x48
    assert eblock.eod(close=True)[0] == 0x0C
    assert struct.unpack(">BQQ", eblock.eod(eof_streams=4)) == (0x48, 0, 4)


def _stream(blocks, eof_streams=None):
    out = b""
    for off, data in blocks:
        out += eblock.data_header(off, len(data)) + data
    return out + eblock.eod(eof_streams=eof_streams)


def _decode(buf, cuts):
    dec = BlockDecoder()
    events, pos = [], 0
    for cut in sorted(cuts) + [len(buf)]:
        events += [Data(e.offset, bytes(e.data)) if isinstance(e, Data) else e for e in dec.feed(buf[pos:cut])]
        pos = cut
    return events


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=50), min_size=1, max_size=6), st.data())
def test_any_split_of_the_stream_decodes_the_same(chunks, data):
    blocks, off = [], 0
    for c in chunks:
        blocks.append((off, c))
        off += len(c) + 7  # leave holes: offsets, not order, place data
    buf = _stream(blocks, eof_streams=2)
    cuts = data.draw(st.lists(st.integers(0, len(buf)), max_size=8))
    events = _decode(buf, cuts)
    got: dict[int, bytes] = {}
    for e in events:
        if isinstance(e, Data):
            got[e.offset] = got.get(e.offset, b"") + e.data  # contiguous pieces of one block
    merged = RangeSet()
    for e in events:
        if isinstance(e, Data):
            merged.add(e.offset, e.offset + len(e.data))
    assert merged == RangeSet([(o, o + len(c)) for o, c in blocks])
    assert events[-2:] == [EndOfFile(2), EndOfData(close=False)]
    # every byte lands where its header said
    image = bytearray(off)
    for e in events:
        if isinstance(e, Data):
            image[e.offset:e.offset + len(e.data)] = e.data
    for o, c in blocks:
        assert bytes(image[o:o + len(c)]) == c


def test_payload_passes_as_views_without_copies():
    buf = bytearray(eblock.data_header(10, 4) + b"abcd")
    (ev,) = BlockDecoder().feed(buf)
    assert isinstance(ev.data, memoryview) and ev.data.obj is buf and ev.offset == 10


@pytest.mark.parametrize("raw,why", [
    (eblock.header(0x01, 0, 0), "unknown descriptor"),
    (eblock.header(0x80, 1, 0), "record"),
    (eblock.header(0x10, 0, 0), "restart"),
    (eblock.header(0x40, 5, 1), "carries no data"),
    (eblock.header(0x48, 0, 0), "out of range"),
    (eblock.header(0x48, 0, (1 << 16) + 1), "out of range"),
    (eblock.header(0x08, 3, 0), "EOD on a block"),
    (eblock.header(0x00, 1 << 41, 0), "out of bounds"),
    (eblock.header(0x00, 10, (1 << 62) - 5), "out of bounds"),
])
def test_hostile_headers_are_errors(raw, why):
    with pytest.raises(BlockError, match=why):
        BlockDecoder().feed(raw)


def test_data_after_eod_is_an_error_until_the_next_transfer():
    dec = BlockDecoder()
    dec.feed(eblock.eod())
    with pytest.raises(BlockError, match="after EOD"):
        dec.feed(eblock.data_header(0, 1) + b"x")
    dec2 = BlockDecoder()
    dec2.feed(eblock.eod())
    dec2.reset()  # a cached connection carries the next transfer
    assert [bytes(e.data) for e in dec2.feed(eblock.data_header(0, 1) + b"x")] == [b"x"]


def test_ledger_completes_on_eof_and_the_announced_eods_from_any_connection():
    led = ReceiveLedger(limit=300)
    led.data(200, 100)
    led.end_of_data()
    assert not led.complete
    led.data(0, 200)
    led.end_of_file(EndOfFile(3))
    led.end_of_data()
    assert not led.complete
    led.end_of_data()
    assert led.complete and led.received.missing(300) == [] and led.size() == 300


@pytest.mark.parametrize("steps,why", [
    ([("data", 250, 100)], "past the limit"),
    ([("data", 0, 100), ("data", 50, 10)], "overlaps"),
    ([("data", 0, 100), ("data", 0, 100)], "overlaps"),  # a duplicate block
    # a block running into a range above it, received earlier (any block
    # may come on any connection, in any order: GFD.20)
    ([("data", 100, 100), ("data", 0, 101)], "overlaps"),
    ([("data", 100, 100), ("data", 50, 100)], "overlaps"),
    ([("data", 100, 10), ("data", 0, 300)], "overlaps"),  # spanning it
    ([("data", 0, 10), ("data", 200, 10), ("data", 150, 51)], "overlaps"),  # the higher of two
    ([("eof", 1), ("eod",), ("eod",)], "EODs for an EOD count"),
    ([("eod",), ("eod",), ("eof", 1)], "EODs for an EOD count"),
    ([("eof", 2), ("eof", 2)], "second EOF"),
])
def test_ledger_refuses_what_a_hostile_sender_does(steps, why):
    led = ReceiveLedger(limit=300)
    with pytest.raises(BlockError, match=why):
        for step in steps:
            if step[0] == "data":
                led.data(step[1], step[2])
            elif step[0] == "eof":
                led.end_of_file(EndOfFile(step[1]))
            else:
                led.end_of_data()


def test_ledger_takes_blocks_that_touch_a_range_from_either_side():
    led = ReceiveLedger(limit=300)
    for offset, count in [(100, 100), (0, 100), (200, 100)]:  # below, then above, a range held
        led.data(offset, count)
    assert list(led.received) == [(0, 300)] and led.new_bytes == 300


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 120), st.integers(1, 30)), min_size=1, max_size=12))
def test_ledger_refuses_exactly_the_blocks_over_bytes_it_holds(blocks):
    """Blocks in any order: each is refused if and only if it covers a byte
    an earlier accepted block covered (a set of bytes as the model)."""
    led, held = ReceiveLedger(), set()
    for offset, count in blocks:
        span = set(range(offset, offset + count))
        if span & held:
            with pytest.raises(BlockError, match="overlaps"):
                led.data(offset, count)
        else:
            led.data(offset, count)
            held |= span
        assert {x for a, b in led.received for x in range(a, b)} == held


def test_rangeset_merges_reports_gaps_and_round_trips_markers():
    rs = RangeSet()
    for a, b in [(10, 20), (30, 40), (20, 30), (50, 60)]:
        rs.add(a, b)
    assert list(rs) == [(10, 40), (50, 60)] and rs.total == 40
    assert rs.missing(70) == [(0, 10), (40, 50), (60, 70)]
    assert rs.missing(45) == [(0, 10), (40, 45)]
    assert RangeSet.parse(rs.marker()) == rs
    assert RangeSet.parse("0-5, 5-9") == RangeSet([(0, 9)])
    for bad in ["5", "a-b", "9-5", "-3"]:
        with pytest.raises(ValueError):
            RangeSet.parse(bad)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)), max_size=20))
def test_rangeset_equals_a_set_of_bytes(spans):
    rs, model = RangeSet(), set()
    for a, n in spans:
        rs.add(a, a + n)
        model.update(range(a, a + n))
    assert rs.total == len(model)
    covered = {x for a, b in rs for x in range(a, b)}
    assert covered == model
    gaps = {x for a, b in rs.missing(260) for x in range(a, b)}
    assert gaps == set(range(260)) - model


def test_a_range_marker_is_read_once_for_every_client_path_and_bounded_by_the_file():
    """``111 Range Marker`` (GFD.20) as put, copy and the copy pipeline read
    it: ranges within the file kept; past its end, garbled or not a marker:
    none (a hostile server cannot plant a range in a resume record)."""
    assert eblock.marker_ranges("Range Marker 0-100,200-300", 300) == [(0, 100), (200, 300)]
    assert eblock.marker_ranges("111 Range Marker 0-100", None) == [(0, 100)]
    assert eblock.marker_ranges("Range Marker 0-100,200-301", 300) == []
    assert eblock.marker_ranges("Range Marker 0-x", 300) == []
    assert eblock.marker_ranges("Perf Marker 0-100", 300) == []
