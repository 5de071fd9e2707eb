"""A partition's offset for a timestamp, as a broker answers a consumer's `offsetsForTimes`
(ListOffsets with a timestamp): the time index says where to start, the batches say the offset."""

from __future__ import annotations

from .index import OffsetIndex, TimeIndex
from .partition import Partition


def offset_for_timestamp(part: Partition, timestamp: int, *, log_start_offset: int = 0) -> int | None:
    """The first offset at or past `log_start_offset` whose record's timestamp is at or past
    `timestamp`, or None when there is none: Kafka's UnifiedLog.fetchOffsetByTimestamp. As there,
    only the first segment whose largest timestamp reaches `timestamp` is searched (the time index's
    largest entry, else the `.log`'s mtime); within it the time index gives the offset to start
    from, the offset index its byte, and the batches from there the record
    (LogSegment.findOffsetByTimestamp)."""
    segment = next((s for s in part.segments if s.largest_timestamp() >= timestamp), None)
    if segment is None:
        return None
    start = max(log_start_offset, segment.base_offset)
    time_index = segment.read(".timeindex")
    indexed = TimeIndex.from_bytes(time_index, segment.base_offset).lookup(timestamp).offset if time_index else 0
    offset_index = OffsetIndex(segment.base_offset, segment.offset_index_entries)
    position = offset_index.lookup(max(indexed, start)).position
    for _, batch in segment.batches(position):
        if batch.max_timestamp < timestamp:
            continue
        for record in batch.records():
            if record.timestamp >= timestamp and record.offset >= start:
                return record.offset
    return None
