"""The cleaner's selection, range and grouping rules, named after LogCleanerTest / LogCleanerManagerTest."""

from __future__ import annotations

from kafkalog.codec.control import ControlType
from kafkalog.codec.filter import BatchRetention
from kafkalog.rules.aborted_txn import AbortedTxn
from kafkalog.rules.cleaner import (
    BatchMeta,
    CleanedTransactionMetadata,
    cleanable_offsets,
    decide_batch,
    dirty_stats,
    group_segments_by_size,
    max_compaction_delay,
)
from kafkalog.rules.segment_meta import SegmentMeta

INT_MAX = 2**31 - 1


def segs(bases, size=100, ts=None, idx=8):
    return [SegmentMeta(b, size, (ts or {}).get(b, 0), offset_index_bytes=idx, time_index_bytes=12) for b in bases]


def _range(segments, **kw):
    args = dict(
        checkpoint=None, log_start_offset=0, log_end_offset=100, last_stable_offset=100, min_compaction_lag_ms=0, now=0
    )
    args.update(kw)
    return cleanable_offsets(segments, **args)


def test_dirty_offset_reset__LCMT_testDirtyOffsetResetIfLargerThanEndOffset_SmallerThanStartOffset():
    s = segs([0, 10, 20, 30])
    assert _range(s, checkpoint=200).first_dirty == 0 and _range(s, checkpoint=200).checkpoint_reset
    r = _range(s, checkpoint=0, log_start_offset=10)
    assert r.first_dirty == 10 and r.checkpoint_reset
    assert not _range(s, checkpoint=15, log_start_offset=10).checkpoint_reset  # LCMT ...NeedsCheckpointReset


def test_cleanable_offsets_lso_and_active__LCMT_testCleanableOffsetsForNone_ActiveSegment():
    s = segs([0, 30, 60, 90])
    assert _range(s, last_stable_offset=50).first_uncleanable == 30  # LSO inside segment 30: rounded down
    assert _range(s).first_uncleanable == 90  # HW = LEO: the active segment


def test_cleanable_offsets_min_lag__LCMT_testCleanableOffsetsForTime_ForShortTime():
    s = segs([0, 10, 20, 30], ts={0: 100, 10: 200, 20: 5_000})
    assert _range(s, min_compaction_lag_ms=1_000, now=5_500).first_uncleanable == 20
    assert _range(s, min_compaction_lag_ms=1_000, now=60_000).first_uncleanable == 30


def test_only_active_segment_never_cleanable__LCMT_testLogStartOffsetLargerThanActiveSegmentBaseOffset():
    r = _range(segs([0]), log_start_offset=5, checkpoint=5)
    assert r.first_uncleanable <= r.first_dirty or r.first_uncleanable == 0
    assert dirty_stats(segs([0]), r.first_dirty, r.first_uncleanable).cleanable_bytes == 0


def test_log_to_clean_with_uncleanable_section__LCT_testLogToCleanWithUncleanableSection():
    s = segs([0, 10, 20, 30, 40, 50], size=100)
    stats = dirty_stats(s, first_dirty=20, first_uncleanable=40)
    assert (stats.clean_bytes, stats.cleanable_bytes, stats.cleanable_ratio) == (200, 200, 0.5)


def test_max_compaction_delay__LCIT_testMaxLogCompactionLag():
    s = [
        SegmentMeta(0, 1, 0, first_batch_timestamp=1_000),
        SegmentMeta(10, 1, 0, first_batch_timestamp=2_000),
        SegmentMeta(20, 1, 0),
    ]
    assert max_compaction_delay(s, 0, 5_000, now=6_500) == 6_500 - 5_000 - 1_000
    assert max_compaction_delay(s, 0, 5_000, now=6_000) == 0
    assert max_compaction_delay(s, 10, 5_000, now=8_000) == 1_000  # only dirty segments count


def test_segment_grouping__LCT_testSegmentGrouping():
    s = segs(range(0, 100, 10), size=100)
    assert [len(g) for g in group_segments_by_size(s, INT_MAX, INT_MAX, 100)] == [10]
    assert [len(g) for g in group_segments_by_size(s, 1, INT_MAX, 100)] == [1] * 10
    assert [len(g) for g in group_segments_by_size(s, INT_MAX, 1, 100)] == [1] * 10
    assert [len(g) for g in group_segments_by_size(s, 301, INT_MAX, 100)] == [3, 3, 3, 1]
    assert [len(g) for g in group_segments_by_size(s, INT_MAX, 12 * 3, 100)] == [3, 3, 3, 1]  # time index bytes
    flat = [x.base_offset for g in group_segments_by_size(s, 301, INT_MAX, 100) for x in g]
    assert flat == list(range(0, 100, 10))


def test_grouping_sparse_offsets__LCT_testSegmentGroupingWithSparseOffsets():
    s = segs([0, INT_MAX, INT_MAX + 1], size=10)
    groups = group_segments_by_size(s, INT_MAX, INT_MAX, 2 * INT_MAX + 5)
    # segment 0 ends at INT_MAX - 1, segment INT_MAX ends at INT_MAX: both fit relative to 0
    assert [[x.base_offset for x in g] for g in groups] == [[0, INT_MAX], [INT_MAX + 1]]


def test_grouping_empty_segments_skip_range_check__LCT_testSegmentGroupingWithSparseOffsetsAndEmptySegments():
    s = [SegmentMeta(0, 0, 0), SegmentMeta(INT_MAX + 1, 0, 0), SegmentMeta(2 * INT_MAX + 2, 10, 0)]
    groups = group_segments_by_size(s, INT_MAX, INT_MAX, 3 * INT_MAX + 3)
    assert [[x.base_offset for x in g] for g in groups] == [[0, INT_MAX + 1], [2 * INT_MAX + 2]]


def _meta(base, last, pid=-1, txn=False, control=None):
    return BatchMeta(base, last, pid, 0, txn, control is not None, None if control == "empty" else control)


def test_tracker_aborted_data_and_markers__LCT_testBasicTransactionAwareCleaning():
    tracker = CleanedTransactionMetadata()
    abort = AbortedTxn(1, 0, 6, 2)
    tracker.add_aborted([abort])
    assert tracker.on_batch_read(_meta(0, 1, pid=1, txn=True))  # pid1 (1,2) aborted
    assert not tracker.on_batch_read(_meta(2, 3, pid=2, txn=True))  # pid2 committed later
    assert tracker.on_batch_read(_meta(4, 5, pid=1, txn=True))
    assert not tracker.on_control_batch_read(_meta(6, 6, pid=1, txn=True, control=ControlType.ABORT))
    assert not tracker.on_control_batch_read(_meta(7, 7, pid=2, txn=True, control=ControlType.COMMIT))
    assert not tracker.on_batch_read(_meta(8, 8, pid=1, txn=True))
    assert not tracker.on_control_batch_read(_meta(9, 9, pid=1, txn=True, control=ControlType.COMMIT))
    assert tracker.kept_aborted == [abort]


def test_tracker_empty_transactions_are_discardable():
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted([AbortedTxn(1, 3, 3, 4)])
    assert tracker.on_control_batch_read(_meta(3, 3, pid=1, txn=True, control=ControlType.ABORT))
    assert tracker.on_control_batch_read(_meta(4, 4, pid=2, txn=True, control=ControlType.COMMIT))
    assert tracker.on_control_batch_read(_meta(5, 5, pid=2, txn=True, control="empty"))
    assert not tracker.on_control_batch_read(_meta(6, 6, pid=2, control=ControlType.LEADER_CHANGE))
    assert tracker.kept_aborted == []


def test_batch_retention_rules():
    t = CleanedTransactionMetadata()
    active = {7: (5, 0), 8: (-1, 3)}
    d = decide_batch(_meta(4, 5, pid=7), t, delete_horizon_ms=None, active_producers=active, upper_bound=100, now=0)
    assert d.retention is BatchRetention.RETAIN_EMPTY  # the producer's last batch keeps its sequence
    d = decide_batch(_meta(8, 9), t, delete_horizon_ms=None, active_producers=active, upper_bound=10, now=0)
    assert d.retention is BatchRetention.RETAIN_EMPTY  # the last batch before the uncleanable offset
    marker = BatchMeta(11, 11, 8, 3, True, True, ControlType.COMMIT)
    d = decide_batch(marker, t, delete_horizon_ms=5, active_producers=active, upper_bound=100, now=10)
    assert d.retention is BatchRetention.RETAIN_EMPTY and d.discard_records and d.contains_marker_for_empty_txn
    marker = BatchMeta(12, 12, 9, 0, True, True, ControlType.COMMIT)
    d = decide_batch(marker, t, delete_horizon_ms=None, active_producers=active, upper_bound=100, now=10)
    assert d.retention is BatchRetention.DELETE_EMPTY and not d.discard_records and d.contains_marker_for_empty_txn
    d = decide_batch(
        marker._replace(base_offset=13, last_offset=13),
        t,
        delete_horizon_ms=10,
        active_producers=active,
        upper_bound=100,
        now=10,
    )
    assert d.retention is BatchRetention.DELETE
