"""A topic repartitioned on Spark: one scan, one shuffle, one writing task per new partition.

Scan tasks read the committed data records of the source topic (`topic_table.committed_rows`: aborted
records and control batches dropped, each partition's range [log start, last stable offset)) and give
each its new partition (`rules.partitioner.new_partitions`) and its merge key: the running maximum
timestamp of its source partition (`running_max`). A task reading a unit that does not start its
partition takes, as the carry, the largest timestamp of the segments before the unit (and of the unit's
own segment when the unit starts inside it): an upper bound of every merge key before it, so the keys
never decrease along a source partition, whichever task reads which unit.

Rows then go by `repartitionById` to the task of their new partition, sorted there by (merge key,
source partition, source offset) (Spark's sort spills: a task's memory does not grow with the
partition), and that task writes the partition with `PartitionWriter` (the broker's append path:
segments rolled at segment.bytes, indexes, leader-epoch checkpoint, partition.metadata), builds batches
of at most `BATCH_BYTES` (and max.message.bytes) of records of one codec and timestamp type, writes
its part of the offset map as Parquet, and works out where each consumer group resumes (`GroupResume`).
It returns one summary row. Nothing but those rows reaches the driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TimestampType, build_batch_of_section
from ..codec.records import encode_headers
from ..codec.splice import encode_records
from ..errors import KafkaLogError
from ..rules.cleaner import CleanedTransactionMetadata
from ..rules.partitioner import GroupResume, new_partitions, running_max
from ..scan.reader import read_unit
from ..scan.scan_plan import ScanFilter, plan_scan
from ..scan.views import HEADERS_TYPE, filesystem
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter
from .scan import default_min_tasks, spark_schema
from .topic_table import PartitionRange, committed_rows

# Uncompressed bytes of records gathered into one batch: a producer's batches are 16 KiB by default;
# larger batches compress better and cost a consumer nothing (a fetch returns whole batches).
BATCH_BYTES = 256 * 1024
_RECORD_OVERHEAD = 24  # a record's varints and attributes, roughly: enough to cut batches by size

PLACED_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),  # the new partition
        ("order", pa.int64()),  # the merge key: the source partition's running maximum timestamp
        ("source", pa.int32()),  # -1: the row that makes the partition's task run when no record lands there
        ("sourceOffset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),  # epoch ms
        ("timestampType", pa.int32()),
        ("headers", HEADERS_TYPE),
        ("codec", pa.int8()),
    ]
)
WRITTEN_DDL = "partition int, records long, logEndOffset long, segments int, bytes long, groups string"


@dataclass(frozen=True)
class WriteSpec:
    """What each writing task needs (it pickles): where and how to write, and the groups' commits."""

    staging: str  # the directory the new partition directories are written in
    topic: str
    topic_id: str
    partitions: int
    leader_epochs: Mapping[int, int]
    segment_bytes: int
    segment_ms: int
    index_interval_bytes: int
    segment_index_bytes: int
    max_message_bytes: int
    codec: int | None  # None: each record keeps its source batch's codec (compression.type=producer)
    offset_map: str | None  # the directory of the offset map's Parquet parts
    committed: Mapping[str, Mapping[int, int]]  # group -> source partition -> committed offset


def carries(log_dir, topic: str, units) -> dict[tuple[int, int, int], int]:
    """(partition, segment base offset, unit start) -> the largest timestamp before the unit: of the
    partition's earlier segments, and of the unit's own segment when the unit starts inside it."""
    from ..storage.logdir import LogDir

    opened = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    largest: dict[int, list[tuple[int, int]]] = {}
    for unit in units:
        if unit.partition not in largest:
            segments = opened.partition(topic, unit.partition).segments
            largest[unit.partition] = [
                (s.base_offset, s.meta(with_last_offset=False).largest_timestamp) for s in segments
            ]
    out = {}
    for unit in units:
        before = [ts for base, ts in largest[unit.partition] if base < unit.segment_base_offset]
        if unit.start > 0:
            before += [ts for base, ts in largest[unit.partition] if base == unit.segment_base_offset]
        out[unit.partition, unit.segment_base_offset, unit.start] = max(before, default=-1)
    return out


def placed_records(spark, log_dir, topic: str, ranges: Sequence[PartitionRange], partitions: int):
    """The committed records of `topic` in `ranges`, each with its new partition and merge key
    (PLACED_SCHEMA), plus one marker row per new partition."""
    from .tasks import task_frame

    wanted = {r.partition: r for r in ranges if r.end > r.start}
    markers = spark.createDataFrame(
        [(q, -(2**63), -1, -1) for q in range(partitions)], "partition int, order long, source int, sourceOffset long"
    )
    if not wanted:
        return markers.unionByName(spark.createDataFrame([], spark_schema(PLACED_SCHEMA)), allowMissingColumns=True)
    flt = ScanFilter.of(topic, wanted, min(r.start for r in wanted.values()), max(r.end for r in wanted.values()))
    plan = plan_scan(log_dir, flt, min_tasks=default_min_tasks(spark))
    carried = carries(log_dir, topic, plan.units)
    root, tasks = plan.root, plan.tasks

    def task(i: int) -> Iterator[pa.RecordBatch]:
        fs = filesystem(root)
        trackers: dict[int, dict[int, CleanedTransactionMetadata]] = {}
        for unit in tasks[i]:
            carry = carried[unit.partition, unit.segment_base_offset, unit.start]
            for batch in read_unit(unit, fs, "records", flt):
                kept = committed_rows(batch, wanted[unit.partition], trackers.setdefault(unit.partition, {}))
                if kept.num_rows:
                    placed = place(kept, partitions, carry)
                    carry = int(placed["order"][-1].as_py())
                    yield placed

    records = task_frame(spark, len(tasks), task, spark_schema(PLACED_SCHEMA))
    return records.unionByName(markers, allowMissingColumns=True)


def place(batch: pa.RecordBatch, partitions: int, carry: int) -> pa.RecordBatch:
    """Rows of the records view (one source partition's, in offset order) as PLACED_SCHEMA rows."""
    source = batch["partition"].to_numpy()
    timestamps = pc.divide(batch["timestamp"].cast(pa.int64()), 1000).to_numpy()
    columns = {
        "partition": pa.array(new_partitions(batch["key"].to_pylist(), source, partitions), pa.int32()),
        "order": pa.array(running_max(timestamps, carry), pa.int64()),
        "source": batch["partition"],
        "sourceOffset": batch["offset"],
        "key": batch["key"],
        "value": batch["value"],
        "timestamp": pa.array(timestamps, pa.int64()),
        "timestampType": batch["timestampType"],
        "headers": batch["headers"],
        "codec": batch["compresscodec"],
    }
    return pa.RecordBatch.from_arrays(list(columns.values()), schema=PLACED_SCHEMA)


def write_partitions(spark, records, spec: WriteSpec) -> list[dict]:
    """Shuffle the placed records to their new partitions and write each; the summary rows."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from write_partition(batches, spec)

    shuffled = records.repartitionById(spec.partitions, "partition").sortWithinPartitions(
        "order", "source", "sourceOffset"
    )
    return [row.asDict() for row in shuffled.mapInArrow(write, WRITTEN_DDL).collect()]


class _Batcher:
    """Rows (PLACED_SCHEMA, in their new order) gathered into batches of one codec and timestamp type
    (and, for LogAppendTime, one append time), cut at `limit` bytes of records, and appended to
    `writer`. A batch may span the Arrow batches Spark hands over: the rows of the last, unfinished
    one wait for the next (so the batches do not depend on Spark's Arrow batch size)."""

    def __init__(self, writer: PartitionWriter, codec: int | None, limit: int):
        self.writer, self.codec, self.limit = writer, codec, limit
        self.pending: pa.RecordBatch | None = None

    def add(self, rows: pa.RecordBatch) -> None:
        if self.pending is not None:
            rows = pa.Table.from_batches([self.pending, rows]).combine_chunks().to_batches()[0]
        cuts = self._cuts(rows)
        for start, end in zip(cuts, cuts[1:-1]):
            self._append(rows.slice(start, end - start))
        self.pending = rows.slice(cuts[-2]) if len(cuts) > 1 else None

    def flush(self) -> None:
        if self.pending is not None and self.pending.num_rows:
            self._append(self.pending)
        self.pending = None

    def _cuts(self, rows: pa.RecordBatch) -> list[int]:
        """Where batches start: at each change of kind, and where the bytes would pass the limit."""
        n = rows.num_rows
        codec = rows["codec"].to_numpy() if self.codec is None else np.full(n, self.codec)
        ts_type = rows["timestampType"].to_numpy() == TimestampType.LOG_APPEND_TIME
        stamp = np.where(ts_type, rows["timestamp"].to_numpy(), np.iinfo(np.int64).min)
        changed = (codec[1:] != codec[:-1]) | (ts_type[1:] != ts_type[:-1]) | (stamp[1:] != stamp[:-1])
        kinds = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
        size = _RECORD_OVERHEAD + _lengths(rows["key"]) + _lengths(rows["value"])
        entries = pc.list_flatten(rows["headers"])
        if len(entries):
            owners = pc.list_parent_indices(rows["headers"]).to_numpy()
            size = size + np.bincount(owners, _lengths(entries.field("key")) + _lengths(entries.field("value")), n)
        total = np.concatenate(([0], np.cumsum(size)))
        cuts = [0]
        for start, end in zip(kinds, kinds[1:]):
            at = start
            while at < end:
                # the first row past the limit ends the batch; a row larger than the limit goes alone
                stop = int(np.searchsorted(total, total[at] + self.limit, side="right")) - 1
                at = min(max(stop, at + 1), end)
                cuts.append(at)
        return cuts

    def _append(self, rows: pa.RecordBatch) -> None:
        n, base = rows.num_rows, self.writer.log_end_offset
        timestamps = rows["timestamp"].to_numpy()
        headers = [
            None if not h else encode_headers([(x["key"], x["value"]) for x in h]) for h in rows["headers"].to_pylist()
        ]
        section = encode_records(np.arange(n), timestamps - timestamps[0], rows["key"], rows["value"], headers)
        log_append = int(rows["timestampType"][0].as_py()) == TimestampType.LOG_APPEND_TIME
        self.writer.append(
            build_batch_of_section(
                section,
                n,
                base_offset=base,
                codec=self.codec if self.codec is not None else int(rows["codec"][0].as_py()),
                last_offset_delta=n - 1,
                timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
                base_timestamp=int(timestamps[0]),
                max_timestamp=int(timestamps.max()),
                partition_leader_epoch=self.writer.partition_leader_epoch,
                producer_id=NO_PRODUCER_ID,
                producer_epoch=NO_PRODUCER_EPOCH,
                base_sequence=NO_SEQUENCE,
                is_transactional=False,
                is_control=False,
                has_delete_horizon=False,
            )
        )


def _lengths(column: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.binary_length(column), 0).to_numpy().astype(np.int64)


def write_partition(batches: Iterator[pa.RecordBatch], spec: WriteSpec) -> Iterator[pa.RecordBatch]:
    """The writing task of one new partition: its rows arrive sorted, its marker first."""
    import pyarrow.parquet as pq

    writer = batcher = parts = None
    resumes: dict[str, GroupResume] = {}
    last_source: dict[int, int] = {}
    records = 0
    q = -1
    fs, staging = LogFileSystem.for_path(spec.staging)
    try:
        for batch in batches:
            if writer is None:
                q = int(batch["partition"][0].as_py())
                own = fs.join(staging, f"{spec.topic}-{q}")
                if fs.exists(own):  # an earlier attempt of this task: only it writes there
                    fs.delete_dir(own)
                writer = PartitionWriter(
                    fs,
                    staging,
                    spec.topic,
                    q,
                    segment_bytes=spec.segment_bytes,
                    segment_ms=spec.segment_ms,
                    index_interval_bytes=spec.index_interval_bytes,
                    segment_index_bytes=spec.segment_index_bytes,
                    leader_epoch=spec.leader_epochs.get(q, 0),
                    topic_id=spec.topic_id,
                )
                batcher = _Batcher(writer, spec.codec, min(BATCH_BYTES, spec.max_message_bytes))
                resumes = {group: GroupResume(c) for group, c in spec.committed.items()}
                if spec.offset_map is not None:
                    parts = pq.ParquetWriter(f"{spec.offset_map}/part-{q:05d}.parquet", OFFSET_MAP_SCHEMA)
            assert batcher is not None
            batch = batch.filter(pc.greater_equal(batch["source"], 0))
            if not batch.num_rows:
                continue
            sources, source_offsets = batch["source"].to_numpy(), batch["sourceOffset"].to_numpy()
            _check_order(sources, source_offsets, last_source, spec.topic, q)
            new_offsets = np.arange(records, records + batch.num_rows, dtype=np.int64)  # dense from 0
            batcher.add(batch)
            records += batch.num_rows
            for resume in resumes.values():
                resume.feed(sources, source_offsets, new_offsets)
            if parts is not None:
                columns = [batch["source"], batch["sourceOffset"], pa.array(np.full(batch.num_rows, q, np.int32))]
                parts.write_batch(
                    pa.RecordBatch.from_arrays([*columns, pa.array(new_offsets)], schema=OFFSET_MAP_SCHEMA)
                )
        if writer is None or batcher is None:
            return
        batcher.flush()
        written = writer.close()
    finally:
        if parts is not None:
            parts.close()
    if written.log_end_offset != records:
        raise KafkaLogError(f"partition {q} of {spec.topic} ends at offset {written.log_end_offset}, not {records}")
    groups = {group: resume.result(written.log_end_offset) for group, resume in resumes.items()}
    yield pa.RecordBatch.from_pylist(
        [
            {
                "partition": q,
                "records": records,
                "logEndOffset": written.log_end_offset,
                "segments": len(written.segments),
                "bytes": sum(s.size for s in written.segments),
                "groups": json.dumps(groups),
            }
        ],
        schema=pa.schema(
            [
                ("partition", pa.int32()),
                ("records", pa.int64()),
                ("logEndOffset", pa.int64()),
                ("segments", pa.int32()),
                ("bytes", pa.int64()),
                ("groups", pa.string()),
            ]
        ),
    )


OFFSET_MAP_SCHEMA = pa.schema(
    [("sourcePartition", pa.int32()), ("sourceOffset", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64())]
)


def _check_order(sources: np.ndarray, offsets: np.ndarray, last: dict[int, int], topic: str, q: int) -> None:
    """Refuse to write a source partition's records out of their order: the merge keys rely on the
    segments' time indexes bounding their timestamps, which a segment a broker never closed may not."""
    for source in np.unique(sources).tolist():
        mine = offsets[sources == source]
        previous = last.get(source, -1)
        if mine[0] <= previous or (len(mine) > 1 and np.any(np.diff(mine) <= 0)):
            raise KafkaLogError(
                f"records of source partition {source} would reach partition {q} of {topic} out of their order "
                "(a segment's time index understates its timestamps); run kafkalog validate on the log dir"
            )
        last[source] = int(mine[-1])
