"""Extended block mode codec and ledger (GFD.20), sans-IO."""

import dataclasses
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


# -- extended block mode (GFD.20) -------------------------------------------------------

def test_an_eod_header_carries_neither_a_count_nor_an_offset():
    """GFD.20: EOD (0x08) ends a connection's part; count and offset are 0
    (the EOF's offset field alone carries a number, the EOD count)."""
    assert eblock.eod() == bytes([0x08]) + bytes(16)
    assert eblock.eod(close=True) == bytes([0x0C]) + bytes(16)


@pytest.mark.parametrize("event", [Data(0, memoryview(b"x")), EndOfFile(1), EndOfData(close=False)])
def test_decoded_events_are_values_no_consumer_can_change(event):
    field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, getattr(event, field))


def test_a_connection_cannot_be_reused_with_one_payload_byte_or_part_of_a_header_left():
    dec = BlockDecoder()
    dec.feed(eblock.data_header(0, 2) + b"a")  # one byte of the block still to come
    assert dec.in_block
    with pytest.raises(BlockError, match="middle of a block"):
        dec.reset()
    dec = BlockDecoder()
    dec.feed(eblock.data_header(0, 1)[:5])  # a header split across reads
    assert dec.in_block
    with pytest.raises(BlockError, match="middle of a block"):
        dec.reset()
    dec.feed(eblock.data_header(0, 1)[5:] + b"z" + eblock.eod())
    assert not dec.in_block
    dec.reset()


@pytest.mark.parametrize("eods", [1, 2, 1 << 16])
def test_an_eof_announces_from_one_eod_up_to_65536(eods):
    """One stream is an EOD count of 1; drsftp's bound is 2^16 connections."""
    (ev,) = BlockDecoder().feed(eblock.header(0x40, 0, eods))
    assert ev == EndOfFile(eods)


def test_a_block_of_exactly_the_bound_or_ending_exactly_at_2_to_the_62_is_accepted():
    dec = BlockDecoder(max_count=8)
    (ev,) = dec.feed(eblock.data_header(0, 8) + b"12345678")
    assert bytes(ev.data) == b"12345678"
    with pytest.raises(BlockError, match="out of bounds"):
        BlockDecoder(max_count=8).feed(eblock.data_header(0, 9))
    assert BlockDecoder().feed(eblock.data_header((1 << 62) - 10, 10)) == []  # header alone: no payload yet
    with pytest.raises(BlockError, match="out of bounds"):
        BlockDecoder().feed(eblock.data_header((1 << 62) - 9, 10))


def test_rangesets_with_different_ranges_differ():
    assert RangeSet([(0, 1)]) != RangeSet([(0, 2)])
    assert RangeSet([(0, 1)]) != RangeSet([(5, 6)])
    assert RangeSet([(0, 1)]) != [(0, 1)]


def test_overlap_is_of_half_open_ranges_and_finds_the_range_before_the_end():
    rs = RangeSet([(0, 10), (20, 30)])
    assert not rs.overlaps(10, 20)  # [0,10) and [20,30) only touch [10,20)
    assert rs.overlaps(9, 10) and rs.overlaps(25, 26) and rs.overlaps(29, 40)
    assert not rs.overlaps(30, 31)


def test_nothing_is_missing_from_an_empty_file():
    assert RangeSet([(5, 6)]).missing(0) == []
    assert RangeSet().missing(0) == []


def test_an_empty_range_in_a_marker_is_well_formed_and_adds_nothing():
    assert RangeSet.parse("3-3") == RangeSet()
    assert RangeSet.parse("0-4,9-9") == RangeSet([(0, 4)])


def test_the_ledger_counts_the_new_bytes_and_the_size_is_the_end_of_the_last_range():
    led = ReceiveLedger(limit=1000, base=RangeSet([(0, 100)]))
    assert led.new_bytes == 0 and led.size() == 100
    led.data(300, 50)
    led.data(100, 20)
    assert led.new_bytes == 70 and led.size() == 350
    assert ReceiveLedger().size() == 0


def test_an_eof_after_all_its_eods_completes_the_transfer():
    led = ReceiveLedger()
    led.end_of_data()
    led.end_of_data()
    led.end_of_file(EndOfFile(2))  # EOF may come last, on any connection
    assert led.complete
