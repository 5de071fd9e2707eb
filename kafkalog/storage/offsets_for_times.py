"""A partition's offset for a timestamp, as a broker answers a consumer's `offsetsForTimes`
(ListOffsets with a timestamp): the time index says where to start, the batches say the offset."""

from __future__ import annotations

from collections.abc import Sequence

from .segment import LogSegment


def offset_for_timestamp(segments: Sequence[LogSegment], timestamp: int, *, log_start_offset: int = 0) -> int | None:
    """The first offset at or past `log_start_offset` whose record's timestamp is at or past
    `timestamp` in a partition's `segments`, or None when there is none: Kafka's
    UnifiedLog.fetchOffsetByTimestamp. As there, only the first segment whose largest timestamp
    reaches `timestamp` is searched (the time index's largest entry, else the `.log`'s mtime), by
    LogSegment.findOffsetByTimestamp."""
    segment = next((s for s in segments if s.largest_timestamp() >= timestamp), None)
    return None if segment is None else segment.find_offset_by_timestamp(timestamp, log_start_offset)
