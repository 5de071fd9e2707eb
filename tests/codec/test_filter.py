"""Batch rewriting after record filtering, mirroring MemoryRecordsTest (spec catalogue 29-32, 51, 53-57)."""

from __future__ import annotations

import pytest

from kafkalog.codec.batch import RecordBatch, TimestampType, build_batch, build_empty_batch
from kafkalog.codec.compression import Codec
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.filter import BatchRetention, Outcome, filter_batch
from kafkalog.codec.legacy import LegacyBatch, build_legacy_batch
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptBatchError

KEEP = BatchRetention.DELETE_EMPTY


def _filter(batch, keep, **kw):
    retained = [r for r in batch.records() if keep(r)]
    kw.setdefault("retention", KEEP)
    kw.setdefault("delete_horizon_ms", 10**12)
    return filter_batch(batch, retained, **kw)


@pytest.mark.parametrize("codec", list(Codec))
def test_filter_to__MRT_testFilterTo(codec):
    batches = [
        build_batch([Record(0, 10, None, b"a")], codec=codec, partition_leader_epoch=67),
        build_batch([Record(1, 11, b"k1", b"b"), Record(2, 12, None, b"c")], codec=codec),
        build_batch([Record(3, 13, None, b"d"), Record(4, 20, b"k4", b"e"), Record(5, 15, b"k5", b"f")], codec=codec),
        build_batch([Record(6, 16, b"k6", b"g")], codec=codec),
    ]
    out = [_filter(RecordBatch(b), lambda r: r.key is not None) for b in batches]
    assert [o.outcome for o in out] == [Outcome.DROPPED, Outcome.REENCODED, Outcome.REENCODED, Outcome.VERBATIM]
    kept = [RecordBatch(o.data) for o in out if o.data]
    assert [(b.base_offset, b.last_offset) for b in kept] == [(1, 2), (3, 5), (6, 6)]
    assert [b.max_timestamp for b in kept] == [11, 20, 16]
    assert [r.offset for b in kept for r in b.records()] == [1, 4, 5, 6]
    assert [r.timestamp for b in kept for r in b.records()] == [11, 20, 15, 16]
    assert all(b.codec == codec and b.is_valid() for b in kept)


def test_filter_to_already_compacted_log__MRT_testFilterToAlreadyCompactedLog():
    batch = RecordBatch(
        build_batch([Record(5, 1, b"a", b"1"), Record(8, 2, b"b", b"2"), Record(10, 3, b"c", b"3")], base_offset=0)
    )
    out = RecordBatch(_filter(batch, lambda r: r.offset == 8).data)
    assert (out.base_offset, out.last_offset, [r.offset for r in out.records()]) == (0, 10, [8])


def test_legacy_base_is_first_retained__MRT_testFilterToAlreadyCompactedLog_legacy():
    data = build_legacy_batch(
        [Record(5, 1, b"a", b"1"), Record(8, 2, b"b", b"2"), Record(10, 3, b"c", b"3")], magic=1, codec=Codec.GZIP
    )
    out = LegacyBatch(_filter(LegacyBatch(data), lambda r: r.offset == 8).data)
    assert (out.base_offset, out.last_offset) == (8, 8)


def test_producer_info_preserved__MRT_testFilterToPreservesProducerInfo():
    batch = RecordBatch(
        build_batch(
            [Record(3, 1, None, b"x"), Record(4, 2, b"a", b"1"), Record(5, 3, b"b", b"2")],
            producer_id=7,
            producer_epoch=2,
            base_sequence=10,
            is_transactional=True,
        )
    )
    out = RecordBatch(_filter(batch, lambda r: r.key is not None).data)
    assert (out.producer_id, out.producer_epoch, out.base_sequence, out.is_transactional) == (7, 2, 10, True)
    assert (out.base_offset, out.last_offset, out.last_sequence) == (3, 5, 12)
    assert [out.base_sequence + r.offset - out.base_offset for r in out.records()] == [11, 12]


def test_empty_batch_retention__MRT_testFilterToEmptyBatchRetention():
    batch = RecordBatch(
        build_batch(
            [Record(3, 11, b"a", b"1"), Record(4, 12, b"b", b"2")],
            producer_id=1,
            producer_epoch=0,
            base_sequence=10,
            is_transactional=True,
        )
    )
    out = filter_batch(batch, [], retention=BatchRetention.RETAIN_EMPTY, delete_horizon_ms=0)
    empty = RecordBatch(out.data)
    assert out.outcome == Outcome.EMPTY and len(out.data) == 61
    assert (
        empty.records_count,
        empty.max_timestamp,
        empty.base_offset,
        empty.last_offset,
        empty.base_sequence,
        empty.last_sequence,
        empty.is_transactional,
        empty.timestamp_type,
    ) == (0, 12, 3, 4, 10, 11, True, TimestampType.CREATE_TIME)


def test_empty_batch_kept_and_deleted__MRT_testEmptyBatchRetention_testEmptyBatchDeletion():
    data = build_empty_batch(base_offset=5, last_offset_delta=0, max_timestamp=42, producer_id=1, producer_epoch=0)
    batch = RecordBatch(data)
    assert filter_batch(batch, [], retention=BatchRetention.RETAIN_EMPTY, delete_horizon_ms=0).data == data
    for retention in (BatchRetention.DELETE, BatchRetention.DELETE_EMPTY):
        assert filter_batch(batch, [], retention=retention, delete_horizon_ms=0).outcome == Outcome.DROPPED


def test_batch_discard__MRT_testFilterToBatchDiscard():
    batch = RecordBatch(build_batch([Record(0, 1, b"a", b"1")]))
    assert _filter(batch, lambda r: True, retention=BatchRetention.DELETE).outcome == Outcome.DROPPED


def test_leader_epoch_and_log_append_time__MRT_testFilterToPreservesPartitionLeaderEpoch_LogAppendTime():
    batch = RecordBatch(
        build_batch(
            [Record(0, 1, b"a", None), Record(1, 2, None, b"x")],
            partition_leader_epoch=67,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            log_append_time=999,
            codec=Codec.LZ4,
        )
    )
    out = RecordBatch(_filter(batch, lambda r: r.key is not None).data)
    assert (out.partition_leader_epoch, out.timestamp_type, out.max_timestamp, out.codec) == (
        67,
        TimestampType.LOG_APPEND_TIME,
        999,
        Codec.LZ4,
    )


def test_tombstone_gets_horizon_records_keep_timestamps__MRT_testBaseTimestampToDeleteHorizonConversion():
    batch = RecordBatch(build_batch([Record(0, 5, b"a", b"1"), Record(1, 10, b"b", None), Record(2, 15, b"c", b"3")]))
    out = _filter(batch, lambda r: True, delete_horizon_ms=1_000)
    assert out.outcome == Outcome.REENCODED and out.horizon_set
    rewritten = RecordBatch(out.data)
    assert rewritten.delete_horizon_ms == 1_000 and [r.timestamp for r in rewritten.records()] == [5, 10, 15]
    again = _filter(rewritten, lambda r: True, delete_horizon_ms=2_000)  # a horizon is installed once
    assert again.outcome == Outcome.VERBATIM and again.data == out.data


def test_marker_of_empty_transaction_gets_horizon():
    marker = RecordBatch(build_end_txn_marker(offset=9, timestamp=5, producer_id=1, producer_epoch=0, commit=True))
    out = _filter(marker, lambda r: True, contains_marker_for_empty_txn=True, delete_horizon_ms=777)
    assert RecordBatch(out.data).delete_horizon_ms == 777 and RecordBatch(out.data).is_control


def test_legacy_retain_empty_fails_like_kafka():
    (batch,) = list(iter_batches(build_legacy_batch([Record(0, 1, b"a", b"1")], magic=1)))
    with pytest.raises(CorruptBatchError, match="magic v2"):
        filter_batch(batch, [], retention=BatchRetention.RETAIN_EMPTY, delete_horizon_ms=0)
