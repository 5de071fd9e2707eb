"""What the codec decodes directly, walking a log directory with the storage layer alone: the
expected side of the Spark tests (no kafkalog.spark code is used here)."""

from __future__ import annotations

from kafkalog.codec.batch import increment_sequence
from kafkalog.codec.scan import KeyColumns, scan_keys
from kafkalog.storage.logdir import LogDir

# RECORDS_SCHEMA with `timestamp` as epoch milliseconds (Spark's TimestampType cast with unix_millis)
RECORDS_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp long, "
    "timestampType int, headers array<struct<key:string,value:binary>>, producerId long, "
    "producerEpoch short, sequence int, isTransactional boolean, isControl boolean, "
    "partitionLeaderEpoch int, compresscodec byte, segmentBaseOffset long, baseOffset long"
)


def walk(log_dir, topics=None):
    """(topic, partition, segment, file position, batch) for every batch, in log order."""
    opened = LogDir.open(str(log_dir))
    for topic, number in opened.topic_partitions:
        if topics is not None and topic not in topics:
            continue
        for segment in opened.partition(topic, number).segments:
            for position, batch in segment.batches():
                yield topic, number, segment, position, batch


def record_rows(log_dir, topics=None) -> list[tuple]:
    """Rows of the records view, decoded with `batch.records()`."""
    rows = []
    for topic, number, segment, _, batch in walk(log_dir, topics):
        for r in batch.records():
            sequence = (
                -1
                if batch.base_sequence == -1
                else increment_sequence(batch.base_sequence, r.offset - batch.base_offset)
            )
            rows.append(
                (
                    r.key,
                    r.value,
                    topic,
                    number,
                    r.offset,
                    r.timestamp,
                    batch.timestamp_type,
                    [tuple(h) for h in r.headers] or None,
                    batch.producer_id,
                    batch.producer_epoch,
                    sequence,
                    batch.is_transactional,
                    batch.is_control,
                    batch.partition_leader_epoch,
                    batch.codec,
                    segment.base_offset,
                    batch.base_offset,
                )
            )
    return rows


def narrow_rows(log_dir, topics=None) -> list[tuple]:
    """(topic, partition, offset, timestamp, key, valueSize, recordSpanStart, recordSpanSize,
    position) per record, from `scan_keys`."""
    rows = []
    for topic, number, _, position, batch in walk(log_dir, topics):
        cols = KeyColumns()
        scan_keys(batch, cols)
        for i in range(len(cols)):
            rows.append(
                (
                    topic,
                    number,
                    int(cols.offset[i]),
                    int(cols.timestamp[i]),
                    None if cols.key[i] is None else bytes(cols.key[i]),
                    int(cols.value_size[i]),
                    int(cols.span_start[i]),
                    int(cols.span_size[i]),
                    position,
                )
            )
    return rows
