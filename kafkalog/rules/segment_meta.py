"""What Kafka's rules know of a segment: plain data the storage layer reads (`LogSegment.meta`) and
the cleaner and retention decide on, so that rules never open a file."""

from __future__ import annotations

from typing import NamedTuple

from ..codec.columnar import INT64_MAX


class SegmentMeta(NamedTuple):
    """What Kafka's rules (cleaner, retention) need of a segment, without reading its records: one
    record per segment (`LogSegment.meta`), each value read once.

    `largest_timestamp` is Kafka's LogSegment.largestTimestamp: the time index's last entry, or the
    `.log` file's mtime when the index has no timestamp >= 0 (`timestamp_from_index` False).
    `last_offset` is the last offset of the last batch (None: no batch, or not asked for);
    `first_batch_timestamp` Kafka's getFirstBatchTimestamp (INT64_MAX: none, or not asked for)."""

    base_offset: int
    size: int
    largest_timestamp: int
    last_offset: int | None = None
    timestamp_from_index: bool = True
    mtime_ms: int = 0
    first_batch_timestamp: int = INT64_MAX
    offset_index_bytes: int = 0
    time_index_bytes: int = 0

    def last_offset_or_below(self) -> int:
        """The last offset, or base - 1 for a segment without batches: everything in it is below."""
        return self.last_offset if self.last_offset is not None else self.base_offset - 1
