"""rules/compaction.py without Spark: the offset map of a partition read whole (`supersede`)."""

from __future__ import annotations

import pyarrow as pa

from kafkalog.rules.compaction import (
    EXPIRE_TOMBSTONE,
    FATES,
    KEEP,
    KEEP_TOMBSTONE,
    SUPERSEDED,
    UNKEYED,
    supersede,
)


def fates(rows) -> pa.Table:
    """`record_fates` rows from (key, offset, fate, map_offset)."""
    keys, offsets, fate, map_offset = zip(*rows)
    n = len(rows)
    return pa.table(
        {
            "tp": pa.array([0] * n, pa.int32()),
            "segment": pa.array([0] * n, pa.int32()),
            "position": pa.array(offsets, pa.int64()),
            "offset": pa.array(offsets, pa.int64()),
            "key": pa.array(keys, pa.binary()),
            "recordSpanSize": pa.array([10] * n, pa.int32()),
            "fate": pa.array(fate, pa.int8()),
            "map_offset": pa.array(map_offset, pa.int64()),
            "whole": pa.array([True] * n),
            "rank": pa.array([0] * n, pa.int8()),
            "version": pa.array([0] * n, pa.int64()),
            "invalid_header": pa.array([False] * n),
        },
        schema=FATES,
    )


def test_a_keyed_record_older_than_its_keys_latest_offset_in_the_map_is_superseded():
    table = fates(
        [
            (b"a", 0, KEEP, None),  # below the first dirty offset: in no map, superseded by a@2
            (b"b", 1, KEEP, 1),  # superseded by the tombstone b@4
            (b"a", 2, KEEP_TOMBSTONE, 2),
            (None, 3, UNKEYED, None),
            (b"b", 4, EXPIRE_TOMBSTONE, 4),
            (b"c", 5, KEEP, None),  # its key is in no map: it stays
            (b"a", 6, KEEP, None),  # newer than the map's a@2 (a map_offset only in the dirty range)
        ]
    )
    assert supersede(table).tolist() == [SUPERSEDED, SUPERSEDED, KEEP_TOMBSTONE, UNKEYED, EXPIRE_TOMBSTONE, KEEP, KEEP]


def test_no_records_no_fates():
    assert supersede(FATES.empty_table()).tolist() == []


def test_the_estimate_of_the_bytes_removed_is_never_negative_nor_more_than_the_batch():
    """A dry run's bytes_removed, per batch: legacy records have no spans (-1 each), so their
    batches' estimate is their share of the records that go; a v2 batch kept empty keeps its
    header; an uncompressed v2 batch loses its records' spans; a compressed one its records' share."""
    from kafkalog.rules.compaction import estimated_bytes_removed

    cases = [  # size, count, magic, codec, retention, gone, gone_spans -> bytes removed
        ((40, 1, 1, 0, "delete_empty", 1, -1), 40),  # a legacy message that goes: whole
        ((40, 1, 0, 0, "delete_empty", 0, 0), 0),  # ... that stays
        ((300, 10, 1, 1, "delete_empty", 4, -4), 120),  # a gzip wrapper losing 4 of 10
        ((300, 10, 1, 1, "delete_empty", 10, -10), 300),  # ... losing all of them
        ((161, 5, 2, 0, "delete_empty", 2, 38), 38),  # uncompressed v2: the spans
        ((161, 5, 2, 3, "delete_empty", 2, 38), 40),  # lz4 v2: 2/5 of the 100 bytes after the header
        ((161, 5, 2, 0, "retain_empty", 5, 100), 100),  # kept empty: all but its header
        ((161, 5, 2, 0, "delete", 0, 0), 161),  # an aborted batch goes whole
        ((61, 0, 2, 0, "delete_empty", 0, 0), 61),  # an empty batch goes
        ((61, 0, 2, 0, "retain_empty", 0, 0), 0),  # ... unless it is kept
    ]
    columns = [list(c) for c in zip(*(args for args, _ in cases))]
    assert estimated_bytes_removed(*columns).tolist() == [expected for _, expected in cases]
