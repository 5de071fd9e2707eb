"""A topic as a table: what a read_committed consumer sees of it, as a DataFrame.

`committed_records`: every data record of the topic that a consumer with isolation.level=read_committed
reads between each partition's log start offset and its end (`PartitionRange`): control records never
appear, and records of aborted transactions are dropped on the executors by Kafka's transaction
tracker (`CleanedTransactionMetadata`, the one the cleaner uses), seeded as a fetch response seeds a
consumer, with the partition's aborted transactions (`.txnindex`) that end at or past the first batch
read. `latest_records`: the last of those records per (partition, key), decided in the scan task
where a task reads the whole partition, else by the range path (spark/latest_ranges.py); "last" by
offset, or by a KIP-280 strategy's (rank, version, offset) (rules/compaction_strategy.py).
Keys and values are decoded by spark/decode.py (`decode_records`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..codec.control import parse_control_type
from ..rules.aborted_txn import AbortedTxn
from ..rules.cleaner import BatchMeta, CleanedTransactionMetadata
from ..rules.compaction_strategy import OFFSET, CompactionStrategy, record_versions, superseded
from ..scan.reader import read_task
from ..scan.scan_plan import ScanFilter, plan_segments, read_active_tails
from ..scan.views import RECORDS_SCHEMA
from ..storage.segment import LogSegment
from .latest_ranges import cut_ranges, latest_in_ranges
from .scan import default_min_tasks, pack_tasks, spark_schema
from .tasks import task_frame

# The table's columns: Spark's Kafka source's, in its order and types.
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
TABLE_SCHEMA = pa.schema([RECORDS_SCHEMA.field(c) for c in COLUMNS])


@dataclass(frozen=True)
class PartitionRange:
    """What a read_committed consumer reads of one partition: offsets in [start, end) (end exclusive,
    as Spark's endingOffsets), and the partition's aborted transactions."""

    partition: int
    start: int
    end: int
    aborted: tuple[AbortedTxn, ...] = ()


def committed_rows(
    batch: pa.RecordBatch, bounds: PartitionRange, trackers: dict[int, CleanedTransactionMetadata]
) -> pa.RecordBatch:
    """The rows of one Arrow batch of the records view (one partition's, one segment's, whole record
    batches in offset order) that a read_committed consumer returns: data records in [start, end)
    that no aborted transaction holds. `trackers` holds the transaction tracker of each segment
    read so far (by its base offset), carried from one Arrow batch of the segment to the next."""
    if not batch.num_rows:
        return batch
    base = batch["baseOffset"].to_numpy()
    runs = np.flatnonzero(np.concatenate([[True], base[1:] != base[:-1]]))
    segment = int(batch["segmentBaseOffset"][0].as_py())
    tracker = trackers.get(segment)
    if tracker is None:
        tracker = trackers[segment] = CleanedTransactionMetadata()
        # as a fetch from the first batch read returns them: the aborted transactions not ended before it
        tracker.add_aborted([t for t in bounds.aborted if t.last_offset >= int(base[0])])
    offsets = batch["offset"].to_numpy()
    ends = np.append(runs[1:], len(base))
    pid, epoch = batch["producerId"].to_numpy(), batch["producerEpoch"].to_numpy()
    transactional = batch["isTransactional"].to_numpy(zero_copy_only=False)
    control = batch["isControl"].to_numpy(zero_copy_only=False)
    keys = batch["key"]
    aborted = np.zeros(len(runs), bool)
    for i, (first, end) in enumerate(zip(runs.tolist(), ends.tolist())):
        meta = BatchMeta(
            int(base[first]),
            int(offsets[end - 1]),
            int(pid[first]),
            int(epoch[first]),
            bool(transactional[first]),
            bool(control[first]),
            parse_control_type(keys[first].as_py())[1] if control[first] else None,
        )
        if meta.is_control:
            tracker.on_control_batch_read(meta)
        else:
            aborted[i] = tracker.on_batch_read(meta)
    keep = ~np.repeat(aborted, ends - runs) & ~control & (offsets >= bounds.start) & (offsets < bounds.end)
    return batch if keep.all() else batch.filter(pa.array(keep))


def committed_batches(
    batches: Iterable[pa.RecordBatch], ranges: Mapping[int, PartitionRange]
) -> Iterator[pa.RecordBatch]:
    """`committed_rows` over a scan task's Arrow batches (each of one work unit, in order)."""
    trackers: dict[int, dict[int, CleanedTransactionMetadata]] = {}
    for batch in batches:
        partition = batch["partition"][0].as_py()
        kept = committed_rows(batch, ranges[partition], trackers.setdefault(partition, {}))
        if kept.num_rows:
            yield kept.select(list(COLUMNS))


@dataclass(frozen=True)
class TopicLog:
    """The segments of a topic's partitions, as the driver's plan listed them, and the log dir's root
    as executors reach it (a path or URI): the scan reads these and lists nothing again."""

    root: str
    topic: str
    segments: tuple[LogSegment, ...]
    is_local: bool


def _plan(spark, log: TopicLog, ranges: Sequence[PartitionRange]):
    """(the partitions to read with their ranges, their filter, the scan plan); no plan when none."""
    wanted = {r.partition: r for r in ranges if r.end > r.start}
    if not wanted:
        return wanted, None, None
    flt = ScanFilter.of(log.topic, wanted, min(r.start for r in wanted.values()), max(r.end for r in wanted.values()))
    read_active_tails(log.segments, flt)
    plan = plan_segments(log.root, log.segments, flt, is_local=log.is_local, min_tasks=default_min_tasks(spark))
    return wanted, flt, plan if plan.tasks else None


def _committed_frame(spark, root: str, tasks, flt: ScanFilter, wanted, verify_crc: bool, keep=lambda batches: batches):
    """A DataFrame of the committed records each task's units hold, through `keep`."""

    def task(i: int):
        yield from keep(committed_batches(read_task(root, tasks[i], "records", flt, verify_crc=verify_crc), wanted))

    return task_frame(spark, len(tasks), task, spark_schema(TABLE_SCHEMA))


def committed_records(spark, log: TopicLog, ranges: Sequence[PartitionRange], *, verify_crc: bool = True):
    """The records of `topic` a read_committed consumer reads in each partition's range, in offset
    order per partition (each scan task reads its partitions' work units in order), with the
    columns of Spark's Kafka source (`COLUMNS`)."""
    wanted, flt, plan = _plan(spark, log, ranges)
    if plan is None:
        return spark.createDataFrame([], spark_schema(TABLE_SCHEMA))
    return _committed_frame(spark, plan.root, plan.tasks, flt, wanted, verify_crc)


def latest_records(
    spark,
    log: TopicLog,
    ranges: Sequence[PartitionRange],
    *,
    verify_crc: bool = True,
    strategy: CompactionStrategy = OFFSET,
):
    """`last_per_key` of `committed_records` (under `strategy`). A partition of at most
    `tuning.ONE_TASK_BYTES` and `tuning.LATEST_TASK_RECORDS` offsets is read whole by one task, which
    keeps each key's last record as it reads (`last_per_key`), so that only the table's rows reach
    the JVM (no shuffle, as compaction's one-task path). A larger one takes the range path
    (spark/latest_ranges.py): no task holds a row per key of it."""
    wanted, flt, plan = _plan(spark, log, ranges)
    if plan is None:
        return spark.createDataFrame([], spark_schema(TABLE_SCHEMA))
    runs: dict[int, list] = {}
    for unit in plan.units:
        runs.setdefault(unit.partition, []).append(unit)
    whole, cut = [], []
    for partition, run in runs.items():
        run.sort(key=lambda u: (u.segment_base_offset, u.start))
        span = wanted[partition].end - wanted[partition].start
        if sum(u.nbytes for u in run) <= tuning.ONE_TASK_BYTES and span <= tuning.LATEST_TASK_RECORDS:
            whole.append(tuple(run))
        else:
            segments = sorted((s for s in log.segments if s.partition == partition), key=lambda s: s.base_offset)
            cut += cut_ranges(segments, flt, tuning.RANGE_BYTES)
    frames = []
    if whole:  # packed as compaction's one-task partitions are
        groups = pack_tasks(spark, whole, lambda run: sum(u.nbytes for u in run))
        tasks = [tuple(u for run in group for u in run) for group in groups]
        keep = functools.partial(last_per_key, strategy=strategy)
        frames.append(_committed_frame(spark, plan.root, tasks, flt, wanted, verify_crc, keep))
    if cut:
        root = plan.root

        def committed(units):
            return committed_batches(read_task(root, units, "records", flt, verify_crc=verify_crc), wanted)

        frames.append(latest_in_ranges(spark, cut, committed, strategy, spark_schema(TABLE_SCHEMA)))
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def last_per_key(batches: Iterable[pa.RecordBatch], strategy: CompactionStrategy = OFFSET) -> Iterator[pa.RecordBatch]:
    """Per (partition, key), the last of the committed records `batches` hold (whole partitions, each
    in offset order), keyless records left out. The records are combined about `tuning.COMBINE_ROWS`
    at a time with the last ones so far (pyarrow's hash aggregation), so a task holds one row per key
    of the partition it reads and a chunk, not the partition."""
    held: pa.Table | None = None  # the last record per key of the current partition so far
    chunk: list[pa.RecordBatch] = []
    rows, current = 0, None
    for batch in batches:
        partition = batch["partition"][0].as_py()
        if partition != current and (held is not None or chunk):
            yield from _combine(held, chunk, strategy).to_batches()
            held, chunk, rows = None, [], 0
        current = partition
        keyed = batch.filter(pc.is_valid(batch["key"]))
        chunk.append(keyed)
        rows += keyed.num_rows
        if rows >= tuning.COMBINE_ROWS:
            held, chunk, rows = _combine(held, chunk, strategy), [], 0
    if held is not None or chunk:
        yield from _combine(held, chunk, strategy).to_batches()


def _combine(held: pa.Table | None, chunk: list[pa.RecordBatch], strategy: CompactionStrategy) -> pa.Table:
    """The last record per key of `held` (one partition's so far) followed by `chunk`: offsets are
    unique in a partition, so each key's greatest offset picks its row (under a KIP-280 strategy,
    its greatest (rank, version, offset): `superseded`)."""
    table = pa.Table.from_batches([*(held.to_batches() if held is not None else ()), *chunk], TABLE_SCHEMA)
    if strategy != OFFSET:
        code = pc.dictionary_encode(table["key"].combine_chunks()).indices.to_numpy().astype(np.int64)
        every = np.ones(table.num_rows, bool)
        gone, _ = superseded(code, every, every, *record_versions(table, strategy), table["offset"].to_numpy())
        return table.filter(pa.array(~gone))
    last = table.group_by("key", use_threads=False).aggregate([("offset", "max")])
    return table.filter(pc.is_in(table["offset"], value_set=last["offset_max"]))
