"""The conformance catalogue (spec §10.1-§10.7) asserted on the reference cleaner model.

Each test is named after the Kafka test it mirrors and asserts the outcome the spec (and that test)
gives. Kafka's LogCleanerTest builds `LogToClean(log, firstDirty, activeSegment.baseOffset)` by hand;
the model computes the range itself (checkpoint, LSO, active segment, min lag), which gives the same
range unless a transaction is left open: there the tests pass `uncleanable_offset`, as LCT does.
LCT's FakeOffsetMap keeps its latest offset across passes, so a "clean again" with a checkpoint at
the active segment re-filters the whole log there; the mirrors pass `checkpoint=0` for that.
"""

from __future__ import annotations

import struct

import pytest

# kafkalog's codec only writes inputs here (build_*, compress, the enums' values); every output is
# read back through the model, which reads with kafka-python
from kafkalog.codec.batch import TimestampType, build_empty_batch
from kafkalog.codec.compression import Codec, compress
from kafkalog.codec.control import ControlType
from kafkalog.codec.legacy import build_legacy_message

from .cleaner_model import (
    CREATE_TIME,
    INT32_MAX,
    LOG_APPEND_TIME,
    LONG_MAX,
    AbortedTxn,
    CleanerConfig,
    IllegalStateError,
    build_offset_map,
    clean,
    clean_twice,
    cleanable_range,
    group_segments,
    last_stable_offset,
    load_segments,
    replay_producers,
    split_batches,
    with_config,
)
from .scenarios import (
    LARGE_TIMESTAMP,
    LCT_CONFIG,
    T0,
    LogBuilder,
    batch_base_offsets,
    batch_last_offsets,
    batches_in_log,
    distinct_values_by_segment,
    enc,
    keys_in_log,
    last_sequences_in_log,
    lct_map_capacity,
    log_size,
    offsets_in_log,
    records_in_log,
    segment_sizes,
    unkeyed_count_in_log,
)

V2_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
LEGACY = [(magic, codec) for magic in (0, 1) for codec in (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4)]


def lct(log: LogBuilder, *, now: int = T0, config: CleanerConfig = LCT_CONFIG, **kwargs):
    """One pass over the builder's partition with LogCleanerTest's config."""
    return clean(log.build(), now=now, config=config, **kwargs)


def continue_from(result, **kwargs) -> LogBuilder:
    return LogBuilder.from_segments(result, **kwargs)


# =================================================================================================
# §10.1 compaction basics
# =================================================================================================
def test_testCleanSegments():
    """1. Keys with a later version (1, 3, 5, 7, 9) disappear from the first segments; every other
    key stays, in order; bytes read = the size of the cleaned segments. (LCT fakes the later versions
    in its offset map; here they are real records in a later cleanable segment.)"""
    log = LogBuilder(segment_bytes=1024)
    while log.number_of_segments < 4:
        log.record(log.log_end_offset, log.log_end_offset)
    first_segments = log.build()[:3]
    assert keys_in_log(log) == list(range(log.log_end_offset))
    for k in (1, 3, 5, 7, 9):
        log.record(k, "later")
    log.roll()
    before = keys_in_log(first_segments)
    r = lct(log, config=with_config(LCT_CONFIG, segment_bytes=LONG_MAX))
    expected = [k for k in before if k not in (1, 3, 5, 7, 9)] + list(range(before[-1] + 1, log.log_end_offset - 5))
    assert keys_in_log(r)[: len(expected)] == expected
    assert keys_in_log(r)[len(expected) :] == [1, 3, 5, 7, 9]
    assert r.counts["bytes_read"] == log_size(log.build()[:-1])
    assert r.counts["superseded"] == 5


def test_testCleaningWithDeletes():
    """2. After tombstones for every even key, no even key has a live value anywhere."""
    log = LogBuilder(segment_bytes=1024)
    while log.number_of_segments < 2:
        log.record(log.log_end_offset, log.log_end_offset)
    leo = log.log_end_offset
    for k in range(0, leo, 2):
        log.tombstone(k)
    while log.number_of_segments < 4:
        log.record(log.log_end_offset, log.log_end_offset)
    r = lct(log)
    keys = set(keys_in_log(r))
    assert not any(k in keys for k in range(0, leo, 2))
    assert all(k in keys for k in range(1, leo, 2))


def test_testPartialSegmentClean():
    """3. A one-key map (makeCleaner(2), load factor 0.75) still makes progress from each dirty offset."""
    config = with_config(LCT_CONFIG, map_capacity=lct_map_capacity(2))
    assert config.map_capacity == 1
    log = LogBuilder()
    for k in (0, 1, 0, 1, 0):
        log.record(k, k)
    log.roll()
    r = clean(log.build(), now=T0, config=config, checkpoint=2)
    assert (keys_in_log(r), offsets_in_log(r), r.checkpoint) == ([1, 0, 1, 0], [1, 2, 3, 4], 3)
    r = clean(r.as_input(), now=T0, config=config, checkpoint=3)
    assert (keys_in_log(r), offsets_in_log(r)) == ([0, 1, 0], [2, 3, 4])
    r = clean(r.as_input(), now=T0, config=config, checkpoint=4)
    assert (keys_in_log(r), offsets_in_log(r)) == ([1, 0], [3, 4])


def test_testLogCleanerStats():
    """4. Map of 3 keys, clean from 2: next dirty offset 5, 5 read, 2 written, byte totals, 0 invalid."""
    log = LogBuilder()
    for k in (0, 1, 0, 1, 0):
        log.record(k, k)
    log.roll()
    initial_size = log_size(log)
    r = clean(log.build(), now=T0, config=with_config(LCT_CONFIG, map_capacity=lct_map_capacity(4)), checkpoint=2)
    assert r.checkpoint == 5
    assert r.counts["records_read"] == 5
    assert r.counts["kept"] == 2
    assert r.counts["bytes_read"] == initial_size
    assert r.counts["bytes_written"] == log_size(r)
    assert r.counts["unkeyed"] == 0


def test_testCleaningWithUnkeyedMessages():
    """5. Unkeyed records are dropped and counted as invalid; the keyed part is kept whole."""
    log = LogBuilder(segment_bytes=1024)
    while log.number_of_segments < 2:
        log.unkeyed(log.log_end_offset)
    num_invalid = unkeyed_count_in_log(log)
    size_with_unkeyed = log_size(log)
    while log.number_of_segments < 3:
        log.record(log.log_end_offset, log.log_end_offset)
    expected_size = log_size(log) - size_with_unkeyed
    r = lct(log)
    assert unkeyed_count_in_log(r) == 0
    assert log_size(r) == expected_size
    assert r.counts["unkeyed"] == num_invalid


def test_testCleaningWithUncleanableSection():
    """6. Segments from the first uncleanable one on keep all their values; earlier ones lose duplicates."""
    n, cleanable, total = 10, 2, 7
    log = LogBuilder(segment_bytes=1024)
    while log.number_of_segments <= cleanable:
        log.record(log.log_end_offset % n, log.log_end_offset)
    first_uncleanable = log.log_end_offset + 1
    while log.number_of_segments < total - 1:
        log.record(log.log_end_offset % n, log.log_end_offset)
    before = distinct_values_by_segment(log)
    assert all(v > n for v in before[:-1])
    r = lct(log, uncleanable_offset=first_uncleanable)
    after = distinct_values_by_segment(r)
    assert all(a < b for b, a in zip(before[:cleanable], after[:cleanable]))
    assert before[cleanable:] == after[cleanable:]


@pytest.mark.parametrize("gaps", [(11,), (15, 30)])
def test_testCleaningBeyondMissingOffsets(gaps):
    """7. The next dirty offset steps over offset gaps between segments to the active segment."""
    log = LogBuilder(segment_bytes=1024 * 1024)
    for i in range(10):
        log.append_at(i, i, i)
    log.roll(gaps[0])
    if len(gaps) == 2:
        for i in range(15, 25):
            log.append_at(i, i, i)
        log.roll(gaps[1])
    log.append_at(gaps[-1], 1015, 1015)
    r = lct(log)
    assert r.checkpoint == log.active_base == gaps[-1]


def test_testCleanTombstone():
    """8. A tombstone older than delete.retention.ms survives the pass that first sees it (its horizon
    counts from the clean time) and a further pass inside the retention window."""
    config = CleanerConfig(producer_id_expiration_ms=None)
    log = LogBuilder()
    log.record(0, 0, timestamp=T0 + config.delete_retention_ms + 10_000)
    log.roll()
    r = clean(log.build(), now=T0, config=config, checkpoint=0)
    log = continue_from(r)
    log.tombstone(0, timestamp=T0 - config.delete_retention_ms - 10_000)
    log.roll()
    r = clean(log.build(), now=T0, config=config, checkpoint=1)
    first = batches_in_log(r)[0]
    assert first.last_offset == 1
    assert first.delete_horizon_ms == T0 + config.delete_retention_ms
    assert [rec.timestamp for rec in first.records()] == [T0 - config.delete_retention_ms - 10_000]
    log = continue_from(r)
    log.record(1, 1)
    log.roll()
    r = clean(log.build(), now=T0, config=config, checkpoint=2)
    assert batches_in_log(r)[0].last_offset == 1


def _corrupt_wrapper(first_offset: int, pairs, codec=Codec.GZIP) -> bytes:
    """KAFKA-4298: a v1 compressed wrapper holding v0 messages (relative inner offsets)."""
    inner = b"".join(
        build_legacy_message(offset=i, magic=0, timestamp=-1, key=enc(k), value=enc(v))
        for i, (k, v) in enumerate(pairs)
    )
    return build_legacy_message(
        offset=first_offset + len(pairs) - 1,
        magic=1,
        timestamp=-1,
        key=None,
        value=compress(codec, inner, magic=1),
        codec=codec,
    )


def test_testCleanCorruptMessageSet():
    """12. v1 wrappers with v0 inner messages are rewritten so every record has its batch's magic and
    the offset each value names."""
    log = LogBuilder()
    dup_keys = [0, 1, 0, 1]
    log.append_batch(_corrupt_wrapper(25, [(k, 25 + i) for i, k in enumerate(dup_keys)]))
    log.append_batch(_corrupt_wrapper(50, [(k, 50 + i) for i, k in enumerate([3, 4])]))
    log.roll()
    r = lct(log)
    batches = batches_in_log(r)
    assert batches and all(b.magic == 1 for b in batches)
    assert not any(b.has_inconsistent_inner_magic for b in batches)
    assert [(rec.offset, int(rec.value)) for rec in records_in_log(r)] == [(27, 27), (28, 28), (50, 50), (51, 51)]


def test_testClientHandlingOfCorruptMessageSet():
    """13. Such a wrapper still reads with correct absolute offsets."""
    (wrapper,) = split_batches(_corrupt_wrapper(50, [(k, 50 + i) for i, k in enumerate(range(1, 10))]))
    assert wrapper.has_inconsistent_inner_magic
    assert [(rec.offset, int(rec.value)) for rec in wrapper.records()] == [(o, o) for o in range(50, 59)]


@pytest.mark.parametrize("codec", V2_CODECS)
def test_cleanerTest(codec):
    """14. LCPIT.cleanerTest: 100 keys x 3 rounds, batches of 10 in every codec: the cleaned log is
    smaller, holds exactly the latest value per key, and keeps each batch's codec."""
    log = LogBuilder(segment_bytes=4096)
    for round_ in range(3):
        for start in range(0, 100, 10):
            log.append([(k, f"{round_}-{k}") for k in range(start, start + 10)], codec=codec)
    log.roll()
    r = lct(log)
    latest = {int(rec.key): rec.value for rec in records_in_log(r)}
    assert latest == {k: f"2-{k}".encode() for k in range(100)}
    assert len(records_in_log(r)) == 100
    assert log_size(r) < log_size(log)
    assert {b.codec for b in batches_in_log(r)} == {codec}


def test_testCleaningNestedMessagesWithV0AndV1():
    """15. LCPIT.testCleanerWithMessageFormatV0 / testCleaningNestedMessagesWithV0AndV1: mixed v0,
    v1 and v2 data, plain and compressed, compacts to the latest value per key."""
    log = LogBuilder()
    log.legacy([(k, f"v0-{k}") for k in range(10)], magic=0)
    log.legacy([(k, f"v0z-{k}") for k in range(5, 15)], magic=0, codec=Codec.GZIP)
    log.legacy([(k, f"v1z-{k}") for k in range(10, 20)], magic=1, codec=Codec.SNAPPY)
    log.legacy([(k, f"v1-{k}") for k in range(15, 25)], magic=1)
    log.append([(k, f"v2-{k}") for k in range(20, 30)], codec=Codec.LZ4)
    log.roll()
    r = lct(log)
    got = {int(rec.key): rec.value.decode() for rec in records_in_log(r)}
    expected = {}
    for prefix, keys in (
        ("v0", range(10)),
        ("v0z", range(5, 15)),
        ("v1z", range(10, 20)),
        ("v1", range(15, 25)),
        ("v2", range(20, 30)),
    ):
        expected.update({k: f"{prefix}-{k}" for k in keys})
    assert got == expected
    assert len(records_in_log(r)) == 30


# =================================================================================================
# §10.2 offset map and range
# =================================================================================================
def test_testBuildOffsetMap():
    """17. Over [segment k, segment m): latest + 1 = end, one entry per key at its offset, nothing
    outside the range."""
    log = LogBuilder(segment_bytes=1024)
    for i in range(500):
        log.record(i, i)
    segs = load_segments(log.build())
    bases = [s.base_offset for s in segs]
    for start, end in ((0, bases[1]), (bases[1], bases[3]), (bases[3], log.log_end_offset)):
        omap = build_offset_map(segs, start, end, [], lct_map_capacity(1000))
        assert omap.latest_offset + 1 == end
        assert len(omap.offsets) == end - start
        assert all(omap.get(enc(i)) == i for i in range(start, end))
        assert omap.get(enc(start - 1)) == -1 and omap.get(enc(end)) == -1


def test_testBuildPartialOffsetMap():
    """18. Keys 0..4, a map of 2 keys, start 2: key2 -> 2, key3 -> 3, keys 0 and 4 absent."""
    log = LogBuilder()
    for k in range(5):
        log.record(k, k)
    log.roll()
    omap = build_offset_map(load_segments(log.build()), 2, INT32_MAX, [], lct_map_capacity(3))
    assert len(omap.offsets) == 2
    assert [omap.get(enc(k)) for k in range(5)] == [-1, -1, 2, 3, -1]
    assert omap.latest_offset == 3


def test_testBuildOffsetMapFakeLarge():
    """19. Records at offsets 0 and 7 206 178: latest offset 7 206 178, both keys mapped."""
    log = LogBuilder(segment_bytes=120)
    log.append_at(0, 0, 0)
    log.append_at(7_206_178, 1, 1)
    omap = build_offset_map(load_segments(log.build()), 0, 7_206_179, [], lct_map_capacity(1000))
    assert omap.latest_offset == 7_206_178
    assert (len(omap.offsets), omap.get(enc(0)), omap.get(enc(1))) == (2, 0, 7_206_178)


def test_testMultiPassSegmentCleaningWithAbortedTransactions():
    """20. A map of 3 keys cleans interleaved transactions in three passes; the aborted-transaction
    index empties once no data is left, and the ABORT markers go after delete.retention.ms."""
    config = with_config(LCT_CONFIG, delete_retention_ms=50_000, map_capacity=lct_map_capacity(4))
    log = LogBuilder()
    p1, p2 = log.transactional(1), log.transactional(2)
    p1([1, 2])
    p2([2, 3])
    p1([3, 4])
    log.commit(1)
    log.commit(2)
    p1([2, 3])
    log.abort(1)
    p2([4, 5])
    p1([5, 6])
    log.commit(1)
    log.abort(2)
    p2([6, 7])
    log.commit(2)
    log.roll()
    assert log.log_end_offset == 20
    expected_txns = [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]
    assert replay_producers(log.build()).aborted_txns == expected_txns

    r = clean(log.build(), now=T0, config=config, checkpoint=0)
    assert r.checkpoint == 4
    assert batch_base_offsets(r) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(r) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert r.aborted_txns == expected_txns
    assert not any(e.txn_first_offset is not None for e in replay_producers(r.as_input()).producers.values())

    r = clean(r.as_input(), now=T0, config=config, checkpoint=r.checkpoint, aborted_txns=r.aborted_txns)
    assert r.checkpoint == 14
    assert batch_base_offsets(r) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(r) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert r.aborted_txns == []

    r = clean(r.as_input(), now=T0 + 50_000, config=config, checkpoint=r.checkpoint, aborted_txns=r.aborted_txns)
    assert r.checkpoint == 20
    assert batch_base_offsets(r) == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert offsets_in_log(r) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert r.aborted_txns == []


# =================================================================================================
# §10.3 segment grouping
# =================================================================================================
def _hello_log(segment_bytes: int) -> LogBuilder:
    return LogBuilder(segment_bytes=segment_bytes, time=-1)  # TestUtils.singletonRecords: no timestamp


def test_testSegmentGrouping():
    """21. Grouping by huge limits gives one group; by tiny limits singletons; by the size (or the
    offset-index size) of 3 segments + 1, groups of 3; order is always kept."""
    log = _hello_log(300)
    while log.number_of_segments < 10:
        log.record("hello", "hello")
    segs = load_segments(log.build(), index_interval_bytes=1)
    leo = log.log_end_offset

    def bases(groups):
        flat = [s.base_offset for g in groups for s in g]
        assert flat == sorted(flat) == [s.base_offset for s in segs]
        return [len(g) for g in groups]

    assert bases(group_segments(segs, INT32_MAX, INT32_MAX, leo)) == [10]
    assert bases(group_segments(segs, 1, INT32_MAX, leo)) == [1] * 10
    assert bases(group_segments(segs, INT32_MAX, 1, leo)) == [1] * 10
    size3 = sum(s.size for s in segs[:3]) + 1
    assert all(n == 3 for n in bases(group_segments(segs, size3, INT32_MAX, leo))[:-1])
    index3 = sum(s.offset_index_bytes for s in segs[:3]) + 1
    assert all(n == 3 for n in bases(group_segments(segs, INT32_MAX, index3, leo))[:-1])


def test_testSegmentGroupingWithSparseOffsets():
    """22. A segment reaching relative offset Int.MAX groups with the first; one offset more and they
    split; every group stays within Int.MAX of its first base offset."""
    log = _hello_log(400)
    while log.number_of_segments == 1:
        log.record("hello", "hello")
    log.append_at(INT32_MAX - 1, "hello", "hello")
    log.record("hello", "hello")
    assert log.log_end_offset - 1 == INT32_MAX
    segs = load_segments(log.build(), 1)
    assert len(group_segments(segs, INT32_MAX, INT32_MAX, log.log_end_offset)) == 1
    log.record("hello", "hello")
    segs = load_segments(log.build(), 1)
    assert len(group_segments(segs, INT32_MAX, INT32_MAX, log.log_end_offset)) == 2
    while log.number_of_segments < 4:
        log.record("hello", "hello")
    segs = load_segments(log.build(), 1)
    groups = group_segments(segs, INT32_MAX, INT32_MAX, log.log_end_offset)
    assert len(groups) == log.number_of_segments - 1
    for g in groups:
        assert g[-1].read_next_offset - 1 - g[0].base_offset <= INT32_MAX


def test_testSegmentGroupingFollowingLoadOfZeroIndex():
    """23. An empty offset index does not hide a segment's real range: > Int.MAX splits into 2 groups."""
    log = _hello_log(400)
    log.append_at(0, "hello", "hello")
    log.append_at(1, "hello", "hello")
    log.roll(INT32_MAX // 2)
    log.append_at(INT32_MAX // 2, "hello", "hello")
    log.append_at(INT32_MAX + 1, "hello", "hello")
    segs = load_segments(log.build(), 400)
    assert all(s.offset_index_bytes == 0 for s in segs)
    groups = group_segments(segs, INT32_MAX, INT32_MAX, log.log_end_offset)
    assert len(groups) == 2
    for g in groups:
        assert g[-1].read_next_offset - 1 - g[0].base_offset <= INT32_MAX


def test_testSegmentGroupingWithSparseOffsetsAndEmptySegments():
    """24. Three segments spanning Int.MAX+1 offsets each never group; once a clean empties the first
    two they group (size 0 skips the range check) and the next clean merges them."""
    log = LogBuilder(time=-1)
    for i in range(3):
        if i:
            log.roll()
        log.record("key", "val")
        log.append_at((i + 1) * (INT32_MAX + 1) - 1, "key", "val")
        assert log.number_of_segments == i + 1
    log.roll()
    log.record("key", "val")
    first_uncleanable = log.log_end_offset - 1
    config = CleanerConfig(producer_id_expiration_ms=None)
    segs = load_segments(log.build())
    assert len(group_segments(segs, INT32_MAX, INT32_MAX, first_uncleanable)) == 3
    r = clean(log.build(), now=T0, config=config, checkpoint=0, uncleanable_offset=first_uncleanable)
    assert len(r.segments) == 4 and segment_sizes(r)[0] == 0
    segs = load_segments(r.as_input())
    assert len(group_segments(segs, INT32_MAX, INT32_MAX, first_uncleanable)) == 2
    r = clean(r.as_input(), now=T0, config=config, checkpoint=0, uncleanable_offset=first_uncleanable)
    assert len(r.segments) == 3


# =================================================================================================
# §10.4 producer ids and idempotence
# =================================================================================================
def test_testLogCleanerRetainsProducerLastSequence():
    """25. Each active producer keeps its last batch (pid1's as an empty batch)."""
    log = LogBuilder(segment_bytes=1024)
    log.record(0, 0)
    log.record(0, 1, producer_id=1, producer_epoch=0, base_sequence=0)
    log.record(0, 2, producer_id=2, producer_epoch=0, base_sequence=0)
    log.record(0, 3, producer_id=3, producer_epoch=0, base_sequence=0)
    log.record(1, 1, producer_id=2, producer_epoch=0, base_sequence=1)
    log.roll()
    r = lct(log)
    assert batch_last_offsets(r) == [1, 3, 4]
    assert last_sequences_in_log(r) == {1: 0, 2: 1, 3: 0}
    assert keys_in_log(r) == [0, 1]
    assert offsets_in_log(r) == [3, 4]
    assert batches_in_log(r)[0].records_count == 0


def test_testDuplicateCheckAfterCleaning():
    """26. Sequences and last offsets survive cleaning (so re-sent batches are still duplicates),
    also after pid4 supersedes pid1's last remaining key."""
    log = LogBuilder(segment_bytes=2048)
    log.idempotent(1)([1, 2, 3])
    log.idempotent(2)([3, 1, 4])
    log.idempotent(3)([1, 4])
    log.roll()
    producers_before = {
        pid: (e.last_data_offset, e.last_sequence) for pid, e in replay_producers(log.build()).producers.items()
    }
    r = lct(log)
    assert batch_last_offsets(r) == [2, 5, 7]
    assert last_sequences_in_log(r) == {1: 2, 2: 2, 3: 1}
    assert keys_in_log(r) == [2, 3, 1, 4]
    assert offsets_in_log(r) == [1, 3, 6, 7]
    # after a reload (replay of the cleaned log) each producer's last batch is where it was:
    # re-sending pid1 (seq 0-2), pid3 (0-1), pid2 (0-2) is answered with offsets 0-2, 6-7, 3-5
    replayed = replay_producers(r.as_input()).producers
    assert {pid: (e.last_data_offset, e.last_sequence) for pid, e in replayed.items()} == producers_before
    assert producers_before == {1: (2, 2), 2: (5, 2), 3: (7, 1)}

    log = continue_from(r, segment_bytes=2048)
    log.idempotent(4)([2])
    log.roll()
    r = lct(log, checkpoint=0)
    assert last_sequences_in_log(r) == {1: 2, 2: 2, 3: 1, 4: 0}
    assert batch_last_offsets(r) == [2, 5, 7, 8]
    assert keys_in_log(r) == [3, 1, 4, 2]
    assert offsets_in_log(r) == [3, 6, 7, 8]
    assert replay_producers(r.as_input()).producers[1].last_data_offset == 2


def test_testLogCleanerRetainsLastSequenceEvenIfTransactionAborted():
    """27. The aborted batch that holds the producer's last sequence stays (empty); it goes once the
    producer writes again."""
    log = LogBuilder(segment_bytes=1024)
    producer = log.transactional(1)
    producer([1])
    producer([2, 3])
    log.abort(1)
    log.roll()
    r = lct(log)
    assert batch_last_offsets(r) == [2, 3]
    assert last_sequences_in_log(r) == {1: 2}
    assert keys_in_log(r) == []
    assert offsets_in_log(r) == [3]

    log = continue_from(r, segment_bytes=1024)
    log.append([(1, 1), (5, 5)], producer_id=1, producer_epoch=0, base_sequence=3, transactional=True)
    log.roll()
    r = lct(log, checkpoint=0, uncleanable_offset=log.active_base)  # LCT ignores the open transaction
    assert batch_last_offsets(r) == [3, 5]
    assert last_sequences_in_log(r) == {1: 4}
    assert keys_in_log(r) == [1, 5]
    assert offsets_in_log(r) == [3, 4, 5]


def test_testCleanSegmentsRetainingLastEmptyBatch():
    """28. When every record of the cleaned segments is obsolete, the batch right before the first
    uncleanable offset stays as an empty batch so the end offset is not lost. (LCT fakes "all keys
    deleted" in its offset map; here every record is a tombstone, removed by a two-pass clean, and
    the three segments form one group.)"""
    log = LogBuilder(segment_bytes=1024)
    while log.number_of_segments < 4:
        log.tombstone(log.log_end_offset)
    config = with_config(LCT_CONFIG, segment_bytes=LONG_MAX)
    _, r = clean_twice(log.build(), now=T0, config=config, checkpoint=0)
    assert len(r.segments) == 2
    assert batch_last_offsets(r.segments[:1]) == [log.active_base - 1]
    assert batches_in_log(r.segments[:1])[0].records_count == 0
    assert len(r.segments[0].batches[0]) == 61


@pytest.mark.parametrize("transactional", [True, False])
def test_testFilterToEmptyBatchRetention(transactional):
    """29. A producer's last batch whose records are all gone is kept as a 61-byte empty batch with
    its range, sequences, max timestamp and flags."""
    log = LogBuilder(leader_epoch=293)
    log.append([("a", "a"), ("b", "b"), ("c", "c")])
    log.append(
        [(2, "b"), (3, "c")],
        producer_id=23,
        producer_epoch=5,
        base_sequence=10,
        transactional=transactional,
        timestamps=[11, 12],
    )
    if transactional:
        log.commit(23, 5)
    log.append([(2, "x"), (3, "y")])
    log.roll()
    r = lct(log)
    empty = [b for b in batches_in_log(r) if b.producer_id == 23 and not b.is_control]
    assert len(empty) == 1
    b = empty[0]
    assert (b.records_count, b.max_timestamp, b.timestamp_type) == (0, 12, CREATE_TIME)
    assert (b.base_offset, b.last_offset, b.base_sequence, b.last_sequence) == (3, 4, 10, 11)
    assert (b.is_transactional, b.partition_leader_epoch, b.size, b.codec) == (transactional, 293, 61, 0)
    assert b.is_valid()


def _empty_batch_log() -> tuple[LogBuilder, bytes]:
    log = LogBuilder()
    log.append([("a", "a"), ("b", "b"), ("c", "c")])
    empty = build_empty_batch(
        base_offset=3,
        last_offset_delta=0,
        max_timestamp=T0,
        partition_leader_epoch=293,
        producer_id=23,
        producer_epoch=5,
        base_sequence=10,
    )
    log.append_batch(empty)
    log.record("d", "d")
    log.roll()
    return log, empty


def test_testEmptyBatchRetention():
    """30. An already empty batch that must stay is kept byte for byte (61 bytes)."""
    log, empty = _empty_batch_log()
    r = lct(log)
    assert empty in r.segments[0].batches
    assert len(empty) == 61


def test_testEmptyBatchDeletion():
    """31. The same empty batch goes when nothing keeps it (its producer has expired)."""
    log, empty = _empty_batch_log()
    r = lct(log, now=T0 + 86_400_000, config=with_config(LCT_CONFIG, producer_id_expiration_ms=86_400_000))
    assert empty not in r.segments[0].batches
    assert batch_last_offsets(r) == [2, 4]


def test_testFilterToPreservesProducerInfo():
    """32. Re-encoded batches keep producer id, epoch, base sequence and flags; record sequences follow
    their offsets."""
    log = LogBuilder()
    log.append([(None, "a"), (1, "b"), (None, "c")], timestamps=[10, 11, 12])
    log.append(
        [(None, "d"), (4, "e"), (5, "f")], producer_id=23, producer_epoch=5, base_sequence=10, timestamps=[13, 14, 15]
    )
    log.append(
        [(6, "g"), (7, "h"), (None, "i")],
        producer_id=99384,
        producer_epoch=234,
        base_sequence=15,
        transactional=True,
        timestamps=[16, 17, 18],
    )
    log.commit(99384, 234)
    log.roll()
    r = lct(log)
    first, second, third, marker = batches_in_log(r)
    assert (first.records_count, first.base_offset, first.last_offset) == (1, 0, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.is_transactional) == (-1, -1, -1, False)
    assert [(x.offset, x.timestamp, x.key, x.value) for x in first.records()] == [(1, 11, b"1", b"b")]
    assert (second.records_count, second.base_offset, second.last_offset) == (2, 3, 5)
    assert (second.producer_id, second.producer_epoch, second.base_sequence, second.last_sequence) == (23, 5, 10, 12)
    assert [x.offset - second.base_offset + second.base_sequence for x in second.records()] == [11, 12]
    assert (third.records_count, third.base_offset, third.last_offset, third.is_transactional) == (2, 6, 8, True)
    assert (third.producer_id, third.producer_epoch, third.base_sequence, third.last_sequence) == (99384, 234, 15, 17)
    assert [x.offset - third.base_offset + third.base_sequence for x in third.records()] == [15, 16]
    assert marker.is_control


def test_testRebuildProducerStateWithEmptyCompactedBatch():
    """33. Replaying an emptied 2-record batch (sequence 0) keeps the producer active at last sequence 1."""
    log = LogBuilder()
    log.idempotent(1)([1, 2])
    log.record(1, "x")
    log.record(2, "y")
    log.roll()
    r = lct(log)
    assert batches_in_log(r)[0].records_count == 0
    entry = replay_producers(r.as_input()).producers[1]
    assert (entry.last_sequence, entry.last_data_offset, entry.epoch) == (1, 1, 0)


def test_testRebuildProducerIdMapWithCompactedData():
    """34. A 4-record batch reduced to 2 records still replays to last sequence 3."""
    log = LogBuilder()
    log.idempotent(1)([1, 2, 3, 4])
    log.record(1, "x")
    log.record(2, "y")
    log.roll()
    r = lct(log)
    assert batches_in_log(r)[0].records_count == 2
    assert replay_producers(r.as_input()).producers[1].last_sequence == 3


# =================================================================================================
# §10.5 transactions and markers
# =================================================================================================
def test_testBasicTransactionAwareCleaning():
    """35. Aborted data goes, markers stay, the aborted-transaction index is unchanged."""
    log = LogBuilder(segment_bytes=2048)
    p1, p2 = log.transactional(1), log.transactional(2)
    p1([1, 2])
    p2([2, 3])
    p1([3, 4])
    log.abort(1)
    log.commit(2)
    p1([2])
    log.commit(1)
    aborted = replay_producers(log.build()).aborted_txns
    log.roll()
    r = lct(log)
    assert keys_in_log(r) == [3, 2]
    assert offsets_in_log(r) == [3, 6, 7, 8, 9]
    assert r.aborted_txns == aborted == [AbortedTxn(1, 0, 6, 2)]
    assert r.counts["aborted_transaction"] == 4


def test_testCleanWithTransactionsSpanningSegments():
    """36. Transactions aborted across two segments leave only pid3's keys and the later keys."""
    log = LogBuilder(segment_bytes=1024)
    p1, p2, p3 = log.transactional(1), log.transactional(2), log.transactional(3)
    p1([1, 2])
    p3([2, 3])
    p2([3, 4])
    log.roll()
    p2([5, 6])
    p3([6, 7])
    p1([7, 8])
    log.abort(2)
    p3([8, 9])
    log.commit(3)
    p1([9, 10])
    log.abort(1)
    r = lct(log)
    assert keys_in_log(r) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    dirty = r.checkpoint
    log = continue_from(r, segment_bytes=1024)
    log.roll()
    p2, p1 = log.transactional(2, sequence=4), log.transactional(1, sequence=6)
    p2([11])
    p1([12])
    r = lct(log, checkpoint=dirty, aborted_txns=r.aborted_txns)
    assert keys_in_log(r) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_testCommitMarkerRemoval():
    """37. A COMMIT marker stays while its transaction has records, also when cleaned again at the
    same time, and goes once its horizon has passed (clean at Long.MAX)."""
    log = LogBuilder(segment_bytes=256)
    producer = log.transactional(1)
    producer([1])
    producer([2, 3])
    log.commit(1)
    producer([2])
    log.commit(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert keys_in_log(r) == [1, 3, 2]
    assert offsets_in_log(r) == [0, 2, 3, 4, 5]

    log = continue_from(r, segment_bytes=256)
    producer = log.transactional(1, sequence=4)
    producer([1, 3])
    log.commit(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP, checkpoint=r.checkpoint, aborted_txns=r.aborted_txns)
    assert keys_in_log(r) == [2, 1, 3]
    assert offsets_in_log(r) == [3, 4, 5, 6, 7, 8]

    r = lct(continue_from(r), now=LARGE_TIMESTAMP, checkpoint=0, aborted_txns=r.aborted_txns)
    assert keys_in_log(r) == [2, 1, 3]
    assert offsets_in_log(r) == [3, 4, 5, 6, 7, 8]
    assert batches_in_log(r)[0].delete_horizon_ms == LONG_MAX - 1

    r = lct(continue_from(r), now=LONG_MAX, checkpoint=0, aborted_txns=r.aborted_txns)
    assert keys_in_log(r) == [2, 1, 3]
    assert offsets_in_log(r) == [4, 5, 6, 7, 8]
    assert r.counts["marker_removed"] == 1


def test_testDeletedBatchesWithNoMessagesRead():
    """39. data@0, ABORT@1, data@2, data@3 (same key), COMMIT@4: [1, 3, 4], then after a two-pass clean [3, 4]."""
    log = LogBuilder(segment_bytes=1000)
    producer = log.transactional(1)
    producer([1])
    log.abort(1)
    producer([2])
    producer([2])
    log.commit(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert keys_in_log(r) == [2]
    assert offsets_in_log(r) == [1, 3, 4]
    _, r = clean_twice(r.as_input(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0, aborted_txns=r.aborted_txns)
    assert keys_in_log(r) == [2]
    assert offsets_in_log(r) == [3, 4]


def test_testAbortMarkerRemoval():
    """38. Aborted records go and the ABORT marker stays; a two-pass clean removes the marker."""
    log = LogBuilder(segment_bytes=256)
    producer = log.transactional(1)
    producer([1])
    producer([2, 3])
    log.abort(1)
    producer([3])
    log.commit(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert keys_in_log(r) == [3]
    assert offsets_in_log(r) == [3, 4, 5]
    first, r = clean_twice(
        r.as_input(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0, aborted_txns=r.aborted_txns
    )
    abort = batches_in_log(first)[0]
    assert abort.is_control and abort.delete_horizon_ms == LARGE_TIMESTAMP + LCT_CONFIG.delete_retention_ms
    assert keys_in_log(r) == [3]
    assert offsets_in_log(r) == [4, 5]


def test_testCommitMarkerRetentionWithEmptyBatch():
    """40. Both producers' emptied data batches stay while they hold the last sequence; pid2's goes
    when pid2 writes again, and its old COMMIT marker after a two-pass clean."""
    log = LogBuilder(segment_bytes=256)
    producer1, producer2 = log.transactional(1), log.transactional(2)
    producer1([2, 3])
    log.roll()
    producer2([2, 3])
    log.commit(2)
    log.roll()
    log.record(2, 2)
    log.record(3, 3)
    log.commit(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert keys_in_log(r) == [2, 3]
    assert offsets_in_log(r) == [4, 5, 6, 7]
    assert batch_last_offsets(r) == [1, 3, 4, 5, 6, 7]

    r = lct(continue_from(r), now=LARGE_TIMESTAMP, checkpoint=0, aborted_txns=r.aborted_txns)
    assert offsets_in_log(r) == [4, 5, 6, 7]
    assert batch_last_offsets(r) == [1, 3, 4, 5, 6, 7]

    log = continue_from(r, segment_bytes=256)
    log.append([(1, 1)], producer_id=2, producer_epoch=0, base_sequence=2, transactional=True)
    log.commit(2)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP, checkpoint=r.checkpoint)
    assert keys_in_log(r) == [2, 3, 1]
    assert offsets_in_log(r) == [4, 5, 6, 7, 8, 9]
    assert batch_last_offsets(r) == [1, 4, 5, 6, 7, 8, 9]
    commit = batches_in_log(r)[1]
    assert commit.is_control and not commit.has_delete_horizon

    _, r = clean_twice(r.as_input(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0)
    assert keys_in_log(r) == [2, 3, 1]
    assert offsets_in_log(r) == [5, 6, 7, 8, 9]
    assert batch_last_offsets(r) == [1, 5, 6, 7, 8, 9]


def test_testAbortMarkerRetentionWithEmptyBatch():
    """41. The aborted batch holding the last sequence stays empty with its ABORT marker and index
    entry; when the producer writes again the empty batch goes, then the marker (two-pass), then the
    index entry."""
    log = LogBuilder(segment_bytes=256)
    producer = log.transactional(1)
    producer([2, 3])
    log.abort(1)
    log.roll()
    entry = AbortedTxn(1, 0, 2, 3)
    assert replay_producers(log.build()).aborted_txns == [entry]

    r = lct(log, now=LARGE_TIMESTAMP)
    assert r.aborted_txns == [entry]
    assert keys_in_log(r) == []
    assert offsets_in_log(r) == [2]
    assert batch_last_offsets(r) == [1, 2]

    _, r = clean_twice(r.as_input(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0, aborted_txns=r.aborted_txns)
    assert r.aborted_txns == [entry]
    assert offsets_in_log(r) == [2]
    assert batch_last_offsets(r) == [1, 2]

    log = continue_from(r, segment_bytes=256)
    producer = log.transactional(1, sequence=2)
    producer([1])  # sequence 2, an open transaction: LCT cleans up to the active segment regardless
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP, checkpoint=0, aborted_txns=r.aborted_txns, uncleanable_offset=log.active_base)
    assert r.aborted_txns == [entry]
    assert keys_in_log(r) == [1]
    assert offsets_in_log(r) == [2, 3]
    assert batch_last_offsets(r) == [2, 3]

    _, r = clean_twice(
        r.as_input(),
        now=LARGE_TIMESTAMP,
        config=LCT_CONFIG,
        checkpoint=0,
        aborted_txns=r.aborted_txns,
        uncleanable_offset=log.active_base,
    )
    assert keys_in_log(r) == [1]
    assert offsets_in_log(r) == [3]
    assert batch_last_offsets(r) == [3]
    assert r.aborted_txns == []


def test_testCleanEmptyControlBatch():
    """42. A COMMIT marker without data loses its record after a two-pass clean but its batch stays
    (empty) for the producer epoch; a further clean at Long.MAX changes nothing and does not fail."""
    log = LogBuilder(segment_bytes=256)
    log.commit(1)
    log.record(2, 2)
    log.record(3, 3)
    log.roll()
    first, r = clean_twice(log.build(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0)
    assert keys_in_log(r) == [2, 3]
    assert offsets_in_log(r) == [1, 2]
    assert batch_last_offsets(r) == [0, 1, 2]
    empty = batches_in_log(r)[0]
    assert empty.is_control and empty.records_count == 0 and empty.producer_epoch == 0
    # LCT's producer state is the live one, from before cleaning
    again = lct(continue_from(r), now=LONG_MAX, checkpoint=0, producers=first.producers)
    assert batch_last_offsets(again) == [0, 1, 2]
    assert again.segments[0].batches == r.segments[0].batches


def test_emptied_control_batch_with_replayed_producer_state():
    """Model behaviour (not a Kafka test): replaying the cleaned log, the emptied COMMIT batch makes
    no producer entry with an epoch (§6.1 ignores it), so nothing protects it any more and the next
    pass drops it. A broker keeps it because its producer state predates the clean (test 42)."""
    log = LogBuilder()
    log.commit(1)
    log.record(2, 2)
    log.record(3, 3)
    log.roll()
    _, r = clean_twice(log.build(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0)
    assert batch_last_offsets(r) == [0, 1, 2]
    again = lct(continue_from(r), now=LARGE_TIMESTAMP, checkpoint=0)
    assert batch_last_offsets(again) == [1, 2]


def test_testCommittedTransactionSpanningSegments():
    """43. data@0 and its COMMIT@1 in the next segment both stay after a two-pass clean."""
    log = LogBuilder(segment_bytes=128)
    log.transactional(1)([1])
    log.roll()
    log.commit(1)
    log.roll()
    _, r = clean_twice(log.build(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0)
    assert offsets_in_log(r) == [0, 1]
    assert batch_last_offsets(r) == [0, 1]


def test_testAbortedTransactionSpanningSegments():
    """44. data@0, ABORT@1 in the next segment: the batch stays (empty, last of its producer) and the
    marker stays (its transaction still has a batch), also when cleaned again at Long.MAX."""
    log = LogBuilder(segment_bytes=128)
    log.transactional(1)([1])
    log.roll()
    log.abort(1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert offsets_in_log(r) == [1]
    assert batch_last_offsets(r) == [0, 1]
    r = lct(continue_from(r), now=LONG_MAX, checkpoint=0, aborted_txns=r.aborted_txns, producers=r.producers)
    assert offsets_in_log(r) == [1]
    assert batch_last_offsets(r) == [0, 1]


def test_testEmptyBatchRemovalWithSequenceReuse():
    """45. Two transactions of one producer both at sequence 0: the older emptied batch and, after a
    two-pass clean, its COMMIT marker go; the newer batch stays empty."""
    log = LogBuilder(segment_bytes=2048)
    log.transactional(1)([1])
    log.commit(1)
    log.transactional(1)([2])
    log.commit(1)
    log.record(1, 1)
    log.record(2, 1)
    log.roll()
    r = lct(log, now=LARGE_TIMESTAMP)
    assert offsets_in_log(r) == [1, 3, 4, 5]
    assert batch_last_offsets(r) == [1, 2, 3, 4, 5]
    _, r = clean_twice(r.as_input(), now=LARGE_TIMESTAMP, config=LCT_CONFIG, checkpoint=0, aborted_txns=r.aborted_txns)
    assert offsets_in_log(r) == [3, 4, 5]
    assert batch_last_offsets(r) == [2, 3, 4, 5]


def test_testCleaningWithKeysConflictingWithTxnMarkerKeys():
    """46. A data record whose key equals a COMMIT control key does not remove the marker."""
    log = LogBuilder(segment_bytes=1024, leader_epoch=5)
    log.transactional(1)([1])
    log.commit(1)
    commit_key = struct.pack(">hh", 0, ControlType.COMMIT)
    log.append([(commit_key, b"foo")], producer_id=2, producer_epoch=0, base_sequence=0, transactional=True)
    log.commit(2)
    log.roll()
    assert offsets_in_log(log) == [0, 1, 2, 3]
    r = lct(log)
    assert batch_last_offsets(r) == [0, 1, 2, 3]
    assert offsets_in_log(r) == [0, 1, 2, 3]


def test_testUndecidedTransactionalDataNotCleanable():
    """47. LCMT: an open transaction makes nothing cleanable ([0,0)); after its ABORT and a roll the
    first segment is ([0,3)); once the min compaction lag has passed, the second too ([0,4))."""
    lag = 60 * 60 * 1000
    config = CleanerConfig(segment_bytes=1024, min_compaction_lag_ms=lag)
    log = LogBuilder(segment_bytes=1024)
    log.append([(1, "a"), (2, "b")], producer_id=15, producer_epoch=0, base_sequence=0, transactional=True)
    log.append([(3, "c")], producer_id=15, producer_epoch=0, base_sequence=2, transactional=True)
    log.roll()
    log.sleep(lag + 1)

    def rng(hw):
        segs = load_segments(log.build())
        lso = last_stable_offset(replay_producers(segs), hw)
        return cleanable_range(
            segs, checkpoint=0, log_start_offset=0, last_stable=lso, min_compaction_lag_ms=lag, now=log.time
        )

    assert rng(3)[:2] == (0, 0)
    r = clean(log.build(), now=log.time, config=config, checkpoint=0, high_watermark=3)
    assert (r.cleaned, r.first_uncleanable, r.last_stable_offset) == (False, 0, 0)
    log.abort(15, coordinator_epoch=15)
    log.roll()
    assert rng(4)[:2] == (0, 3)
    log.sleep(lag + 1)
    assert rng(4)[:2] == (0, 4)
    r = clean(log.build(), now=log.time, config=config, checkpoint=0, high_watermark=4)
    assert (r.first_dirty, r.first_uncleanable, r.checkpoint) == (0, 4, 4)


def test_testAppendEmptyControlBatch():
    """50. PSMT: an empty control batch neither starts nor completes a transaction."""
    log = LogBuilder()
    log.record("a", "a")
    log.append_batch(
        build_empty_batch(
            base_offset=1,
            last_offset_delta=0,
            max_timestamp=T0,
            producer_id=23,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )
    )
    state = replay_producers(log.build())
    assert state.producers[23].txn_first_offset is None
    assert state.aborted_txns == [] and state.completed == []


# =================================================================================================
# §10.6 delete horizon (KIP-534)
# =================================================================================================
@pytest.mark.parametrize("codec", V2_CODECS)
def test_testBaseTimestampToDeleteHorizonConversion(codec):
    """51. Keeping a tombstone stamps the horizon now + delete.retention.ms into the base timestamp
    (bit 6); record timestamps stay 5, 10, 15."""
    horizon = INT32_MAX // 2
    log = LogBuilder(leader_epoch=998)
    log.append([(0, 0), (1, None), (2, 2)], codec=codec, timestamps=[5, 10, 15])
    log.roll()
    r = lct(log, now=horizon - 1, config=with_config(LCT_CONFIG, delete_retention_ms=1))
    (batch,) = batches_in_log(r)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == batch.base_timestamp == horizon
    assert [x.timestamp for x in batch.records()] == [5, 10, 15]
    assert (batch.codec, batch.partition_leader_epoch, batch.max_timestamp) == (codec, 998, 15)
    assert batch.is_valid()


def test_runTwoPassClean_semantics():
    """52. A tombstone, and a marker whose transaction has no data left, survive the pass that stamps
    their horizon (now + delete.retention.ms) and are gone in a pass more than delete.retention.ms
    later. (The marker is stamped only in the pass after the one that removed its data.)"""
    log = LogBuilder()
    log.record(1, "a")
    log.tombstone(1)
    producer = log.transactional(7)
    producer([2])
    log.abort(7)
    producer([3])
    log.commit(7)
    log.record(4, "z")
    log.roll()
    horizon = T0 + LCT_CONFIG.delete_retention_ms
    r = lct(log)
    batches = {b.base_offset: b for b in batches_in_log(r)}
    assert batches[1].delete_horizon_ms == horizon and batches[1].records()[0].value is None
    assert 2 not in batches and not batches[3].has_delete_horizon  # data gone, marker not yet stamped
    assert (r.counts["superseded"], r.counts["aborted_transaction"]) == (1, 1)
    first, second = clean_twice(r.as_input(), now=T0, config=LCT_CONFIG, checkpoint=0, aborted_txns=r.aborted_txns)
    batches = {b.base_offset: b for b in batches_in_log(first)}
    assert batches[3].is_control and batches[3].delete_horizon_ms == horizon
    assert first.aborted_txns == []
    assert offsets_in_log(first) == [3, 4, 5, 6]
    assert offsets_in_log(second) == [4, 5, 6]
    assert (second.counts["tombstone_expired"], second.counts["marker_removed"]) == (1, 1)


# =================================================================================================
# §10.7 record-level rewriting
# =================================================================================================
def _filter_to_log(magic: int, codec: int) -> LogBuilder:
    """MRT.testFilterTo's four batches, then a roll."""
    log = LogBuilder()
    batches = [
        ([(None, "a")], [10]),
        ([(1, "b"), (None, "c")], [11, 12]),
        ([(None, "d"), (4, "e"), (5, "f")], [13, 20, 15]),
        ([(6, "g")], [16]),
    ]
    for pairs, stamps in batches:
        if magic == 2:
            log.append(pairs, codec=codec, timestamps=stamps)
        else:
            log.legacy(pairs, magic=magic, codec=codec, timestamps=stamps)
    log.roll()
    return log


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] + LEGACY)
def test_testFilterTo(magic, codec):
    """53. Unkeyed records go; v2 batches keep their offset range, legacy ones shrink to the kept
    records; max timestamps and codec are those of the kept records and the original batch."""
    r = lct(_filter_to_log(magic, codec))
    batches = batches_in_log(r)
    if magic == 2:
        expected = [(1, 2, 11), (3, 5, 20), (6, 6, 16)]
    elif codec == Codec.NONE:
        expected = [(1, 1, 11), (4, 4, 20), (5, 5, 15), (6, 6, 16)]
    else:
        expected = [(1, 1, 11), (4, 5, 20), (6, 6, 16)]
    if magic == 0:
        expected = [(base, last, -1) for base, last, _ in expected]
    assert [(b.base_offset, b.last_offset, b.max_timestamp) for b in batches] == expected
    assert all(b.magic == magic and b.codec == codec for b in batches)
    recs = records_in_log(r)
    stamps = [11, 20, 15, 16] if magic else [-1] * 4
    assert [(x.offset, x.timestamp, x.key, x.value) for x in recs] == [
        (1, stamps[0], b"1", b"b"),
        (4, stamps[1], b"4", b"e"),
        (5, stamps[2], b"5", b"f"),
        (6, stamps[3], b"6", b"g"),
    ]
    assert (r.counts["records_read"], r.counts["kept"], r.counts["unkeyed"]) == (7, 4, 3)


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] + LEGACY)
def test_testFilterToAlreadyCompactedLog(magic, codec):
    """54. A batch with offset gaps (records at 5, 8, 10 of base 0) keeping only 8: v2 keeps base 0
    and last 10, legacy shrinks to 8..8."""
    log = LogBuilder()
    pairs, offsets, stamps = [(None, "a"), (1, "b"), (None, "c")], [5, 8, 10], [10, 11, 12]
    if magic == 2:
        log.append(pairs, offset=0, offsets=offsets, last_offset_delta=10, codec=codec, timestamps=stamps)
    else:
        log.legacy(pairs, magic=magic, codec=codec, offsets=offsets, timestamps=stamps)
    log.record("last", "z")  # so the batch is not the one kept before the uncleanable part (§5.8)
    log.roll()
    r = lct(log)
    batch, _ = batches_in_log(r)
    assert [(x.offset, x.timestamp, x.key, x.value) for x in batch.records()] == [(8, 11 if magic else -1, b"1", b"b")]
    assert (batch.base_offset, batch.last_offset) == ((0, 10) if magic == 2 else (8, 8))


def test_testFilterToBatchDiscard():
    """55. Batches the batch decision discards (data of aborted transactions) go whole although every
    record in them is the latest of its key."""
    config = with_config(LCT_CONFIG, producer_id_expiration_ms=86_400_000)
    log = LogBuilder()
    log.record(1, "a")
    log.append([(2, "b"), (3, "c")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    log.append([(4, "d"), (5, "e"), (6, "f")])
    log.append([(7, "g")], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    log.abort(7)
    log.abort(8)
    log.roll()
    r = lct(log, now=T0 + 10 * 86_400_000, config=config)  # both producers expired: nothing protects their batches
    assert [b.last_offset for b in batches_in_log(r) if not b.is_control] == [0, 5]
    assert r.counts["aborted_transaction"] == 3


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] + [(1, Codec.GZIP), (0, Codec.NONE)])
def test_testFilterToPreservesPartitionLeaderEpoch(magic, codec):
    """56. A re-encoded v2 batch keeps partition leader epoch 67; legacy batches have none (-1)."""
    log = LogBuilder(leader_epoch=67)
    pairs = [(None, "a"), (1, "b"), (None, "c")]
    if magic == 2:
        log.append(pairs, codec=codec, timestamps=[10, 11, 12])
    else:
        log.legacy(pairs, magic=magic, codec=codec, timestamps=[10, 11, 12])
    log.record("last", "z")
    log.roll()
    batch, _ = batches_in_log(lct(log))
    assert batch.partition_leader_epoch == (67 if magic == 2 else -1)


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] + [(1, c) for c in (Codec.NONE, Codec.GZIP)])
def test_testFilterToPreservesLogAppendTime(magic, codec):
    """57. LogAppendTime batches keep their timestamp type, their append time as max timestamp, and codec."""
    append_time = T0 + 123
    log = LogBuilder()
    producer = dict(producer_id=134234, producer_epoch=28, base_sequence=777) if magic == 2 else {}
    for pairs, stamps in (
        ([(None, "a")], [10]),
        ([(1, "b"), (None, "c")], [11, 12]),
        ([(None, "d"), (4, "e"), (5, "f")], [13, 14, 15]),
    ):
        if magic == 2:
            log.append(
                pairs,
                codec=codec,
                timestamps=stamps,
                timestamp=append_time,
                timestamp_type=TimestampType.LOG_APPEND_TIME,
                **producer,
            )
        else:
            log.legacy(pairs, magic=1, codec=codec, timestamp=append_time, timestamp_type=TimestampType.LOG_APPEND_TIME)
    log.roll()
    batches = batches_in_log(lct(log))
    assert len(batches) == (3 if magic < 2 and codec == Codec.NONE else 2)
    for b in batches:
        assert (b.codec, b.timestamp_type, b.max_timestamp) == (codec, LOG_APPEND_TIME, append_time)


# =================================================================================================
# model invariants used by the differential test
# =================================================================================================
def test_second_pass_at_the_same_time():
    """Offsets, batch ranges and producer fields of kept batches are those of the input. A second pass
    at the same time is not a no-op: markers whose transaction lost its last data in the first pass
    are now discardable, so they get a delete horizon (and an ABORT its .txnindex entry dropped);
    nothing else changes, and a third pass changes nothing."""
    log = LogBuilder(segment_bytes=700)
    p = log.transactional(5)
    for i in range(30):
        log.record(i % 7, i, codec=Codec.GZIP if i % 3 else Codec.NONE)
        if i % 5 == 0:
            log.tombstone(i % 7)
        if i % 4 == 0:
            p([i % 7, 100 + i])
            (log.abort if i % 8 == 0 else log.commit)(5)
    log.roll()
    first = lct(log)
    original = {b.base_offset: b for b in batches_in_log(log)}
    for b in batches_in_log(first):
        o = original[b.base_offset]
        assert (b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence) == (
            o.last_offset,
            o.producer_id,
            o.producer_epoch,
            o.base_sequence,
        )
    second = lct(continue_from(first), checkpoint=0, aborted_txns=first.aborted_txns)
    before = {b.base_offset: b for b in batches_in_log(first)}
    changed = [b for b in batches_in_log(second) if b.data != before[b.base_offset].data]
    assert changed and all(b.is_control and b.has_delete_horizon for b in changed)
    assert set(before) == {b.base_offset for b in batches_in_log(second)}
    assert len(second.aborted_txns) < len(first.aborted_txns)
    third = lct(continue_from(second), checkpoint=0, aborted_txns=second.aborted_txns)
    assert [s.batches for s in third.segments] == [s.batches for s in second.segments]
    assert third.aborted_txns == second.aborted_txns


def test_legacy_batch_kept_empty_fails_the_pass():
    """§5.8: a legacy batch that must stay (the last before the uncleanable part) but loses every
    record cannot be written as an empty batch: the pass fails."""
    log = LogBuilder()
    log.record(1, "a")
    log.legacy([(None, "unkeyed")], magic=1)
    log.roll()
    with pytest.raises(IllegalStateError):
        lct(log)


def test_counts_add_up():
    log = _filter_to_log(2, Codec.NONE)
    r = lct(log)
    assert (
        sum(
            r.counts[k]
            for k in ("kept", "superseded", "tombstone_expired", "aborted_transaction", "marker_removed", "unkeyed")
        )
        == r.counts["records_read"]
        == 7
    )
    assert r.counts["batches_read"] == 4 and r.counts["batches_written"] == 3


@pytest.mark.parametrize(
    "checkpoint,log_start,first_dirty,reset",
    [
        (None, 0, 0, False),  # no checkpoint: the log start offset
        (200, 0, 0, True),  # LCMT.testDirtyOffsetResetIfLargerThanEndOffset
        (0, 10, 10, True),  # LCMT.testDirtyOffsetResetIfSmallerThanStartOffset
        (12, 10, 12, False),
    ],
)
def test_cleanable_offsets_checkpoint_rules(checkpoint, log_start, first_dirty, reset):
    """§5.3 step 2: an out-of-range checkpoint restarts at the log start offset and must be rewritten."""
    log = LogBuilder(segment_bytes=300)
    for i in range(30):
        log.record(i % 4, i)
    r = lct(log, checkpoint=checkpoint, log_start_offset=log_start)
    assert (r.first_dirty, r.checkpoint_reset) == (first_dirty, reset)
    assert r.checkpoint == r.first_uncleanable == log.active_base


def test_offset_map_from_a_first_dirty_offset_inside_a_segment():
    """Kafka's source, not yet checked against a broker: Cleaner.buildOffsetMapForSegment reads the
    first dirty segment from the offset-index position of the first dirty offset, and
    UnifiedLog.collectAbortedTransactions (LocalLog passes the log start offset down to
    TransactionIndex.collectAbortedTxns) also returns aborted transactions whose ABORT lies before
    that offset. So when a producer's aborted transaction ended before the read position, the map
    builder never reads its marker and takes the producer's later (committed) transactional data
    for aborted: its keys are not mapped, and the older K@2 survives a pass from checkpoint 30.
    From checkpoint 0 the marker is read and K@2 is superseded."""
    log = LogBuilder()
    producer = log.transactional(5)
    producer(["a"])  # 0, aborted
    log.abort(5)  # 1
    log.record("K", "old")  # 2
    for i in range(3, 40):
        log.record(f"k{i}", "x" * 40)  # enough bytes for offset-index entries before 30
    producer(["K"])  # 40, committed
    log.commit(5)  # 41
    log.roll()
    log.record("z", "z")
    config = CleanerConfig(index_interval_bytes=256, producer_id_expiration_ms=None)
    segs = load_segments(log.build(), 256)
    assert 0 < segs[0].lookup(30) and segs[0].offset_index[0][0] > 1  # the read starts after the ABORT

    def kept_k(checkpoint):
        r = clean(log.build(), now=T0, config=config, checkpoint=checkpoint)
        return [rec.offset for rec in records_in_log(r) if rec.key == b"K"]

    assert kept_k(0) == [40]
    assert kept_k(30) == [2, 40]


def test_last_stable_offset_counts_transactions_completed_above_the_high_watermark():
    """§6.4: a transaction whose marker is at or above the high watermark is still unstable."""
    log = LogBuilder(segment_bytes=200)
    log.record(1, 1)
    log.transactional(3)([2, 3])
    log.commit(3)
    log.record(4, 4)
    state = replay_producers(log.build())
    assert last_stable_offset(state, log.log_end_offset) == log.log_end_offset
    assert last_stable_offset(state, 3) == 1
    assert last_stable_offset(state, 4) == 4


def test_model_is_independent_of_the_product():
    """The model imports nothing of kafkalog (it reads with kafka-python and writes on its own), so a
    misreading of the format in kafkalog's codec cannot be shared. The scenarios build their inputs
    with kafkalog's codec, never its cleaner, filter, rewrite or producer state."""
    import subprocess
    import sys

    root = __file__.rsplit("/tests/", 1)[0]

    def kafkalog_modules(imports: str) -> list:
        code = f"import sys, {imports}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kafkalog'))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
        return eval(out.stdout)

    assert kafkalog_modules("tests.reference.cleaner_model") == []
    building = kafkalog_modules("tests.reference.scenarios")
    assert building and not any(
        m.startswith(
            ("kafkalog.rules", "kafkalog.storage", "kafkalog.spark", "kafkalog.operations", "kafkalog.codec.filter")
        )
        for m in building
    )
