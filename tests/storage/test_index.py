"""Offset index, time index and index building (spec §4.4-§4.6, §9.5; catalogue 101, 105, 112-116, 125)."""

import random
import struct

import pytest

from kafkalog.errors import CorruptBatchError, CorruptIndexError, KafkaLogError
from kafkalog.storage.index import (
    BatchSummary,
    IndexBuilder,
    LogSegmentOffsetOverflowError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    build_indexes,
)

BASE = 45


def _monotonic(start: int, count: int, rng: random.Random) -> list[int]:
    values, last = [], start
    for _ in range(count):
        last += rng.randint(1, 15)
        values.append(last)
    return values


# -- OffsetIndex --------------------------------------------------------------------------------


def test_offset_index_random_lookup__OIT_randomLookupTest():
    rng = random.Random(20241025)
    index = OffsetIndex(BASE, max_entries=30)
    assert index.lookup(92) == OffsetPosition(BASE, 0)
    offsets, positions = _monotonic(BASE + 1, 30, rng), _monotonic(0, 30, rng)
    for offset, position in zip(offsets, positions):
        index.append(offset, position)
    for offset, position in zip(offsets, positions):
        assert index.lookup(offset) == OffsetPosition(offset, position)
    for target in range(BASE, offsets[-1] + 20):
        below = [(o, p) for o, p in zip(offsets, positions) if o <= target]
        assert index.lookup(target) == (OffsetPosition(*below[-1]) if below else OffsetPosition(BASE, 0))


def test_offset_index_lookup_extreme_cases__OIT_lookupExtremeCases():
    index = OffsetIndex(BASE, max_entries=30)
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)  # empty index
    for i in range(30):
        index.append(BASE + i + 1, i)
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)  # below the first entry
    assert index.lookup(BASE + 30) == OffsetPosition(BASE + 30, 29)
    assert index.lookup(10**12) == OffsetPosition(BASE + 30, 29)


def test_offset_index_append_too_many__OIT_appendTooMany():
    index = OffsetIndex(BASE, max_entries=30)
    for i in range(30):
        index.append(BASE + i + 1, i)
    assert index.is_full()
    with pytest.raises(CorruptIndexError, match="full"):
        index.append(BASE + 31, 31)


def test_offset_index_append_out_of_order__OIT_appendOutOfOrder():
    index = OffsetIndex(BASE)
    index.append(51, 0)
    with pytest.raises(CorruptIndexError) as caught:
        index.append(50, 1)
    assert caught.value.offset == 50 and caught.value.position == 8
    with pytest.raises(CorruptIndexError):
        index.append(51, 1)  # equal is not larger
    with pytest.raises(CorruptIndexError):
        index.append(52, 0)  # positions must increase too


def test_offset_index_reopen__OIT_testReopen():
    index = OffsetIndex(BASE)
    index.append(51, 0)
    index.append(52, 1)
    data = index.to_bytes()
    assert data == struct.pack(">iiii", 51 - BASE, 0, 52 - BASE, 1)  # relative offsets, big-endian, trimmed
    reopened = OffsetIndex.from_bytes(data, BASE, file="00000000000000000045.index")
    assert reopened == index
    assert reopened.lookup(51) == OffsetPosition(51, 0)
    assert reopened.lookup(52) == OffsetPosition(52, 1)
    assert reopened.last_offset == 52 and len(reopened.entries) == 2
    reopened.sanity_check()


def test_offset_index_truncate__OIT_truncate():
    index = OffsetIndex(0, max_entries=10)
    for i in range(1, 10):
        index.append(i, i)
    index.truncate_to(12)
    assert index.lookup(10) == OffsetPosition(9, 9) and index.last_offset == 9  # past the end: no-op
    index.append(10, 10)
    index.truncate_to(10)
    assert index.lookup(10) == OffsetPosition(9, 9) and index.last_offset == 9  # exact hit removes the entry
    index.append(10, 10)
    index.truncate_to(9)
    assert index.lookup(10) == OffsetPosition(8, 8) and index.last_offset == 8
    index.append(9, 9)
    index.truncate_to(5)
    assert index.lookup(10) == OffsetPosition(4, 4) and index.last_offset == 4
    index.append(5, 5)
    index.truncate_to(0)
    assert index.entries == [] and index.last_offset == 0
    index.append(0, 0)


def test_offset_index_sanity_last_offset_equal_to_base__OIT_testSanityLastOffsetEqualToBaseOffset():
    index = OffsetIndex(20)
    index.append(20, 0)
    index.sanity_check()
    OffsetIndex.from_bytes(index.to_bytes(), 20).sanity_check()


def test_offset_index_empty_file_is_valid():
    index = OffsetIndex.from_bytes(b"", 100)
    assert index.entries == [] and index.last_offset == 100 and index.to_bytes() == b""
    assert index.lookup(150) == OffsetPosition(100, 0)
    index.sanity_check()


def test_offset_index_sanity_last_offset_below_base():
    data = struct.pack(">iiii", 5, 100, -1, 200)  # a negative relative offset in the last entry
    index = OffsetIndex.from_bytes(data, 1000, file="x.index")
    assert index.entries == [OffsetPosition(1005, 100), OffsetPosition(999, 200)]
    with pytest.raises(CorruptIndexError, match="less than the base offset") as caught:
        index.sanity_check()
    assert (caught.value.file, caught.value.position, caught.value.offset) == ("x.index", 8, 999)


def test_offset_index_trailing_partial_entry_is_read_like_kafka_and_fails_sanity():
    data = struct.pack(">ii", 1, 100) + b"\x00\x00\x00"
    index = OffsetIndex.from_bytes(data, 0, file="p.index")
    assert index.entries == [OffsetPosition(1, 100)]  # Kafka: entries = floor(length / 8)
    assert index.trailing_bytes == 3
    with pytest.raises(CorruptIndexError, match="not a multiple") as caught:
        index.sanity_check()
    assert caught.value.position == 8
    assert index.to_bytes() == data[:8]


def test_offset_index_sanity_reports_non_increasing_entries():
    index = OffsetIndex.from_bytes(struct.pack(">iiiiii", 1, 100, 5, 200, 3, 300), 0, file="n.index")
    with pytest.raises(CorruptIndexError, match="must both increase") as caught:
        index.sanity_check()
    assert (caught.value.position, caught.value.offset) == (16, 3)
    index = OffsetIndex.from_bytes(struct.pack(">iiii", 1, 100, 5, 100), 0)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()


def test_offset_index_preallocated_zero_tail_is_parsed_and_reported():
    data = struct.pack(">iiii", 3, 4200, 7, 8400) + bytes(8 * 1000)  # active segment, unclean stop
    index = OffsetIndex.from_bytes(data, 500, file="z.index")
    assert len(index.entries) == 1002  # every byte is an entry to Kafka's reader
    assert index.entries[2] == OffsetPosition(500, 0)
    with pytest.raises(CorruptIndexError, match="preallocated zero tail") as caught:
        index.sanity_check()
    assert caught.value.position == 16
    all_zero = OffsetIndex.from_bytes(bytes(80), 0)
    with pytest.raises(CorruptIndexError, match="preallocated zero tail"):
        all_zero.sanity_check()


def test_offset_index_relative_offset_must_fit_int32():
    index = OffsetIndex(100)
    with pytest.raises(LogSegmentOffsetOverflowError):
        index.append(99, 0)
    with pytest.raises(LogSegmentOffsetOverflowError):
        index.append(100 + 2**31, 0)
    index.append(100 + 2**31 - 1, 0)
    assert OffsetIndex.from_bytes(index.to_bytes(), 100).entries == index.entries
    with pytest.raises(LogSegmentOffsetOverflowError):
        OffsetIndex(100, [OffsetPosition(50, 0)]).to_bytes()


# -- TimeIndex ----------------------------------------------------------------------------------


def _time_index(entries: int, max_entries: int = 30) -> TimeIndex:
    index = TimeIndex(BASE, max_entries=max_entries)
    for i in range(1, entries + 1):
        index.maybe_append(i * 10, i * 10 + BASE)
    return index


def test_time_index_lookup__TIT_testLookUp():
    assert TimeIndex(BASE).lookup(100) == TimestampOffset(-1, BASE)
    index = _time_index(29)
    assert index.lookup(9) == TimestampOffset(-1, BASE)
    assert index.lookup(25) == TimestampOffset(20, 65)
    assert index.lookup(30) == TimestampOffset(30, 75)
    assert index.entries[:4] == [(10, 55), (20, 65), (30, 75), (40, 85)]  # TIT.testEntry


def test_time_index_truncate__TIT_testTruncate():
    index = _time_index(29)
    index.truncate_to(0)
    assert index.entries == []
    index = _time_index(29)
    index.truncate_to(10 + BASE)
    assert index.entries == []
    index = _time_index(29)
    index.truncate_to(30 + BASE)
    assert index.entries == [(10, 55), (20, 65)]


def test_time_index_append__TIT_testAppend():
    index = _time_index(29)
    with pytest.raises(CorruptIndexError, match="full"):
        index.maybe_append(10000, 1000)
    with pytest.raises(CorruptIndexError, match="smaller than the last entry's offset"):
        index.maybe_append(10000, (30 - 2) * 10, skip_full_check=True)
    index.maybe_append(10000, 1000, skip_full_check=True)
    assert index.last_entry == TimestampOffset(10000, 1000)


def test_time_index_append_rules():
    index = TimeIndex(BASE)
    index.maybe_append(-1, BASE)  # timestamp -1 never creates an entry
    assert index.entries == []
    index.maybe_append(100, 50)
    index.maybe_append(100, 60)  # equal timestamp: silently ignored
    assert index.entries == [(100, 50)]
    with pytest.raises(CorruptIndexError, match="timestamp 99"):
        index.maybe_append(99, 60)


def test_time_index_is_full__TIT_testIsFull():
    index = _time_index(0)
    assert not index.is_full()
    index = _time_index(29)
    assert index.is_full()  # the last of the 30 slots is kept for the final entry


def test_time_index_last_entry__TIT_testLastEntry():
    index = TimeIndex(BASE)
    assert index.last_entry == TimestampOffset(-1, BASE)
    index.maybe_append(1, 1 + BASE)
    assert index.last_entry == TimestampOffset(1, BASE + 1)


def test_time_index_entry_size__TIT_testEntrySize():
    assert TimeIndex.ENTRY.size == 12 and OffsetIndex.ENTRY.size == 8
    data = _time_index(5).to_bytes()
    assert len(data) == 60
    assert data[:12] == struct.pack(">qi", 10, 10)  # timestamp int64, relative offset int32


def test_time_index_sanity_check__TIT_testSanityCheck():
    index = _time_index(5)
    index.sanity_check()
    TimeIndex.from_bytes(index.to_bytes(), BASE).sanity_check()
    TimeIndex(BASE).sanity_check()

    corrupt_offset = index.to_bytes()[:-4] + struct.pack(">i", -1)  # last offset = base - 1
    with pytest.raises(CorruptIndexError, match="less than the base offset") as caught:
        TimeIndex.from_bytes(corrupt_offset, BASE, file="t.timeindex").sanity_check()
    assert (caught.value.file, caught.value.position) == ("t.timeindex", 48)

    corrupt_timestamp = index.to_bytes()[:-12] + struct.pack(">qi", 9, 60)  # last ts < first ts
    with pytest.raises(CorruptIndexError, match="less than the first timestamp"):
        TimeIndex.from_bytes(corrupt_timestamp, BASE).sanity_check()

    corrupt_length = index.to_bytes()[:-1]
    with pytest.raises(CorruptIndexError, match="not a multiple of the 12-byte"):
        TimeIndex.from_bytes(corrupt_length, BASE).sanity_check()


def test_time_index_sanity_reports_non_increasing_timestamps():
    data = struct.pack(">qiqiqi", 10, 1, 30, 2, 20, 3)
    with pytest.raises(CorruptIndexError, match="timestamps must increase") as caught:
        TimeIndex.from_bytes(data, 0).sanity_check()
    assert caught.value.position == 24


def test_time_index_preallocated_zero_tail_is_reported():
    data = struct.pack(">qi", 1_700_000_000_000, 4) + bytes(12 * 10)
    index = TimeIndex.from_bytes(data, 0, file="z.timeindex")
    assert len(index.entries) == 11
    with pytest.raises(CorruptIndexError, match="preallocated zero tail") as caught:
        index.sanity_check()
    assert caught.value.position == 12


# -- building indexes (LogSegment.recover, §4.6) -----------------------------------------------


def _batches(sizes, first_offset=0, timestamps=None, records_per_batch=1):
    batches, position, offset = [], 0, first_offset
    for i, size in enumerate(sizes):
        offset += records_per_batch
        ts = timestamps[i] if timestamps is not None else 1000 + i
        batches.append(BatchSummary(position, size, offset - 1, ts))
        position += size
    return batches


def test_build_indexes_interval_zero_indexes_every_batch_but_the_first():
    batches = _batches([100, 80, 120, 90])
    offset_index, time_index = build_indexes(batches, 0, index_interval_bytes=0)
    assert offset_index.entries == [(1, 100), (2, 180), (3, 300)]
    assert time_index.entries == [(1001, 1), (1002, 2), (1003, 3)]


def test_build_indexes_default_interval_is_strictly_greater_than_4096():
    batches = _batches([1024] * 16)  # positions 0, 1024, ..., 15360
    offset_index, time_index = build_indexes(batches, 0)
    # 4096 - 0 is not > 4096, so the batch at 4096 is not indexed; the one at 5120 is.
    assert offset_index.entries == [(5, 5120), (10, 10240), (15, 15360)]
    assert time_index.entries == [(1005, 5), (1010, 10), (1015, 15)]


def test_build_indexes_small_segment_has_no_offset_entries_and_one_final_time_entry():
    offset_index, time_index = build_indexes(_batches([500, 500, 500], first_offset=70), 70)
    assert offset_index.entries == []
    assert time_index.entries == [(1002, 72)]  # the final entry written at the end of recovery
    assert time_index.to_bytes() == struct.pack(">qi", 1002, 2)


def test_build_indexes_final_time_entry_follows_the_last_indexed_one():
    batches = _batches([100, 100, 100], timestamps=[10, 20, 30])
    offset_index, time_index = build_indexes(batches, 0, index_interval_bytes=150)
    assert offset_index.entries == [(2, 200)]
    assert time_index.entries == [(30, 2)]  # indexed batch and final entry agree: no duplicate
    batches = _batches([100, 100, 100, 100], timestamps=[10, 20, 30, 40])
    _, time_index = build_indexes(batches, 0, index_interval_bytes=150)
    assert time_index.entries == [(30, 2), (40, 3)]


def test_build_indexes_time_entry_uses_max_timestamp_so_far_including_the_indexed_batch():
    # The max is updated before the index check, so the indexed batch's own timestamp counts,
    # and a later, smaller timestamp keeps pointing at the earlier batch.
    batches = _batches([100] * 4, timestamps=[50, 10, 70, 60])
    offset_index, time_index = build_indexes(batches, 0, index_interval_bytes=0)
    assert offset_index.entries == [(1, 100), (2, 200), (3, 300)]
    assert time_index.entries == [(50, 0), (70, 2)]


def test_build_indexes_equal_max_timestamps_earliest_batch_wins():
    batches = _batches([100] * 4, timestamps=[100, 300, 300, 200])
    _, time_index = build_indexes(batches, 0, index_interval_bytes=0)
    assert time_index.entries == [(300, 1)]
    _, time_index = build_indexes(_batches([100, 100], timestamps=[500, 500]), 0)
    assert time_index.entries == [(500, 0)]


def test_build_indexes_v0_data_leaves_the_time_index_empty__LLT_testRebuildTimeIndexForOldMessages():
    batches = _batches([3000] * 5, timestamps=[-1] * 5)
    offset_index, time_index = build_indexes(batches, 0)
    assert offset_index.entries == [(2, 6000), (4, 12000)]
    assert time_index.entries == [] and time_index.to_bytes() == b""


def test_build_indexes_uses_batch_last_offsets_and_gaps():
    batches = [BatchSummary(0, 200, 104, 1), BatchSummary(200, 200, 109, 2), BatchSummary(400, 200, 150, 3)]
    offset_index, time_index = build_indexes(batches, 100, index_interval_bytes=0)
    assert offset_index.entries == [(109, 200), (150, 400)]
    assert offset_index.to_bytes() == struct.pack(">iiii", 9, 200, 50, 400)
    assert time_index.entries == [(2, 109), (3, 150)]


def test_build_indexes_reload_after_truncation__LST_testReloadLargestTimestampAndNextOffsetAfterTruncation():
    size = 70
    batches = [BatchSummary(i * size, size, 40 + i, (40 + i) * 10) for i in range(30)]
    offset_index, time_index = build_indexes(batches, 40, index_interval_bytes=2 * size - 1)
    assert len(offset_index.entries) == 30 // 2 - 1
    assert len(time_index.entries) == 30 // 2 - 1 + 1  # plus the final entry of a finished segment
    assert time_index.last_entry == TimestampOffset(690, 69)
    offset_index.truncate_to(41)
    time_index.truncate_to(41)
    assert offset_index.entries == [] and time_index.entries == []


@pytest.mark.parametrize("base, last_offset", [(0, 2**31), (100, 10), (100, 99)])
def test_build_indexes_offset_out_of_range__LST_testAppendForLogSegmentOffsetOverflowException(base, last_offset):
    with pytest.raises(LogSegmentOffsetOverflowError) as caught:
        build_indexes([BatchSummary(0, 100, last_offset, 5)], base, file="seg.log")
    error = caught.value
    assert isinstance(error, CorruptBatchError) and isinstance(error, KafkaLogError)
    assert (error.file, error.position, error.offset) == ("seg.log", 0, last_offset)
    build_indexes([BatchSummary(0, 100, base + 2**31 - 1, 5)], base)  # the upper bound is allowed


def test_build_indexes_refuses_batches_that_do_not_tile_the_file():
    with pytest.raises(ValueError):
        build_indexes([BatchSummary(10, 100, 0, 5)], 0)
    with pytest.raises(ValueError):
        build_indexes([BatchSummary(0, 100, 0, 5), BatchSummary(150, 100, 1, 5)], 0)


def test_build_indexes_refuses_non_increasing_offsets():
    batches = [BatchSummary(0, 100, 5, 1), BatchSummary(100, 100, 5, 2)]
    with pytest.raises(CorruptBatchError) as caught:
        build_indexes(batches, 0, file="seg.log")
    assert (caught.value.position, caught.value.offset) == (100, 5)


def test_index_builder_streams_batches():
    builder = IndexBuilder(0, index_interval_bytes=0)
    for batch in _batches([100, 100, 100]):
        builder.append(batch)
    offset_index, time_index = builder.finish()
    assert (offset_index, time_index) == build_indexes(_batches([100, 100, 100]), 0, index_interval_bytes=0)
