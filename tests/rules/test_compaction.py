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
