"""A cleaning pass's decisions as a Spark plan: steps 2 and 3 of a compaction (docs/architecture.md).

2. Scan (executors): the batch view and the narrow record view of the work units the plan hands
   down (the chosen partitions' segments below their first uncleanable offset), a partition that
   fits in a task read whole by one task.
3. Decide: batch fates with Kafka's transaction tracker, one task per partition; record fates
   decided in the scan task as it reads them (no record passes through the JVM on its way), with
   the latest offset per key over the cleanable dirty range as a window over (partition, key); the
   fates aggregated per batch as they leave the window. Before the window, each scan task
   supersedes what its own records supersede and decides the partitions it reads whole (a map-side
   combine with pyarrow's hash aggregation), so the window sorts only runs of decided records and
   the latest record per key of partitions read by several tasks. Only batches that change get a
   plan; changed segments and the report's counts come from the same per-batch table.

`plan` is kafkalog.operations.compact.CompactionPlan: what these functions read of it is its root
(the log directory as executors reach it), `now`, the chosen `LogToClean`s and their segments
(`scanned()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..codec.filter import BatchRetention
from ..rules.cleaner import BatchMeta, CleanedTransactionMetadata, decide_batch
from .scan import default_min_tasks, pack_tasks, spark_schema
from .scan_plan import DEFAULT_MAX_BYTES_PER_TASK, ScanFilter, ScanPlan, plan_segments
from .tasks import task_frame
from .views import read_task

# One row per batch below the upper bound: its fate, and whether its ABORT marker keeps the
# transaction's .txnindex entry (data of the transaction is still in the log).
DECIDED = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segmentBaseOffset", pa.int64()),
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("lastOffset", pa.int64()),
        ("count", pa.int32()),
        ("magic", pa.int8()),
        ("deleteHorizonMs", pa.int64()),
        ("retention", pa.string()),
        ("discard_records", pa.bool_()),
        ("marker_for_empty_txn", pa.bool_()),
        ("keeps_txn_index_entry", pa.bool_()),
    ]
)
# A record's fate as a small integer: fates travel through the window's shuffle, where a string per
# record would cost. The first three are keyed data records, in the offset map, whose fate the
# window may still turn into SUPERSEDED.
KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE, CONTROL, MARKER, ABORTED, UNKEYED, SUPERSEDED = range(8)
FATES_OF = {
    "kept": (KEEP, KEEP_TOMBSTONE, CONTROL),
    "superseded": (SUPERSEDED,),
    "tombstone_expired": (EXPIRE_TOMBSTONE,),
    "aborted_transaction": (ABORTED,),
    "marker_removed": (MARKER,),
    "unkeyed": (UNKEYED,),
}
REASONS = tuple(FATES_OF)
# A compaction's scan tasks are twice the size of other scans' where the bytes allow, so that more
# partitions are read whole by one task, which then decides their keys alone.
TASK_BYTES = 2 * DEFAULT_MAX_BYTES_PER_TASK
# About this many records of a scan task are combined at once (`_chunks`): what bounds a Python
# worker's memory when a task holds millions of small records with distinct keys. Measured
# (docs/benchmarks.md): from 5 to 10 million keys the workers grew 27% at 2^20, 9% at 2^18, not at
# 2^17; but at 2^17 the partitions of a 256 MB log no longer fit in a chunk, and compaction took 1.5
# times as long.
COMBINE_ROWS = 1 << 18


# -- step 3: decide ------------------------------------------------------------------------------------


def _scan(spark, plan) -> ScanPlan:
    """The one scan of a pass, as the plan hands it down: the chosen partitions' segments below
    their first uncleanable offset, listed and opened by the plan (each offset index is read once,
    and only where a segment is cut). Both the batch and the record views read its units."""
    chosen = plan.chosen
    return plan_segments(
        plan.root,
        plan.scanned(),
        ScanFilter.of(end_offset=max(s.upper_bound for s in chosen)),
        is_local=plan.is_local,
        max_bytes_per_task=TASK_BYTES,
        min_tasks=default_min_tasks(spark),
        whole_partitions=True,
    )


def _whole(scan: ScanPlan) -> set[tuple[str, int]]:
    """The partitions all of whose scanned units one task reads: their keys are decided in it."""
    tasks: dict = {}
    for i, task in enumerate(scan.tasks):
        for unit in task:
            tasks.setdefault((unit.topic, unit.partition), set()).add(i)
    return {tp for tp, ids in tasks.items() if len(ids) == 1}


@dataclass(frozen=True)
class SegmentFacts:
    """What the record fates read of a source segment and of its partition. Its own number and its
    partition's (`tp`) stand for the topic, partition and segment in the window's shuffle; `whole`:
    one scan task reads the whole partition."""

    tp: int
    number: int
    mtime_ms: int
    first_dirty: int
    upper_bound: int
    legacy_horizon_ms: int
    whole: bool


def _segment_facts(plan, whole: set) -> dict[tuple[str, int, int], SegmentFacts]:
    """The facts of every source segment of the chosen partitions, by (topic, partition, base)."""
    facts: dict = {}
    for tp, s in enumerate(plan.chosen):
        for seg in s.segments:
            facts[s.topic, s.partition, seg.base_offset] = SegmentFacts(
                tp,
                len(facts),
                seg.mtime_ms,
                s.range.first_dirty,
                s.upper_bound,
                s.legacy_delete_horizon_ms,
                (s.topic, s.partition) in whole,
            )
    return facts


def _batch_decisions(spark, plan, scan: ScanPlan, facts: dict):
    """Batch fates with Kafka's transaction tracker: each partition's batches below the upper bound
    are read (headers only), in offset order, and decided in one task (no shuffle, no pandas);
    partitions are packed into tasks by their bytes, so many small ones share a task."""
    units: dict = {}
    for unit in scan.units:
        units.setdefault((unit.topic, unit.partition), []).append(unit)
    partitions = [
        (
            s.topic,
            s.partition,
            s.aborted_txns,
            s.active_producers,
            s.upper_bound,
            {seg.base_offset: facts[s.topic, s.partition, seg.base_offset].number for seg in s.segments},
            sorted(units.get((s.topic, s.partition), ()), key=lambda u: (u.segment_base_offset, u.start)),
        )
        for s in plan.chosen
    ]
    tasks = pack_tasks(spark, partitions, lambda p: sum(u.nbytes for u in p[-1]))
    root, now = scan.root, plan.now

    def task(i: int):
        for partition in tasks[i]:
            yield _decide_partition(root, *partition, now)

    return task_frame(spark, len(tasks), task, spark_schema(DECIDED))


def _decide_partition(
    root: str, topic: str, partition: int, aborted, active, upper: int, numbers: dict, units, now: int
) -> pa.RecordBatch:
    """The DECIDED rows of one partition's batches below `upper`; `numbers` are its segments'.
    CRCs are left to the record scan, which reads every one of these batches."""
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted(aborted)
    rows = []
    for headers in read_task(root, units, "batches", ScanFilter.of(end_offset=upper), verify_crc=False):
        c = headers.to_pydict()
        for i in range(headers.num_rows):
            meta = BatchMeta(
                c["baseOffset"][i],
                c["lastOffset"][i],
                c["producerId"][i],
                c["producerEpoch"][i],
                c["isTransactional"][i],
                c["isControl"][i],
                c["controlType"][i],
            )
            horizon = c["deleteHorizonMs"][i]
            kept_before = len(tracker.kept_aborted)
            d = decide_batch(
                meta, tracker, delete_horizon_ms=horizon, active_producers=active, upper_bound=upper, now=now
            )
            rows.append(
                (
                    topic,
                    partition,
                    c["segmentBaseOffset"][i],
                    numbers[c["segmentBaseOffset"][i]],
                    c["position"][i],
                    meta.last_offset,
                    c["count"][i],
                    c["magic"][i],
                    horizon,
                    d.retention.value,
                    d.discard_records,
                    d.contains_marker_for_empty_txn,
                    len(tracker.kept_aborted) > kept_before,
                )
            )
    columns = zip(*rows) if rows else [()] * len(DECIDED)
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, DECIDED)], schema=DECIDED)


def _record_fates(spark, plan, scan: ScanPlan, decided, facts: dict):
    """What the records come to, per run of 64 offsets of a batch (see `_batch_outcomes`), with the
    latest offset per key over the cleanable dirty range as a window. Each scan task decides in
    Python, as it reads them, everything about its records but superseding across tasks
    (`record_fates`), and then supersedes what its own records supersede (`_combine`): so only the
    latest record per key of a partition spread over several tasks enters the JVM and the window's
    shuffle, one by one, and the rest leaves the task already aggregated. A task gets, as its input
    rows, the batches of its segments whose records all go (aborted transactions, removed markers):
    batch-sized facts, which never pass through the driver. Not cached: `_batch_outcomes` is its
    one reader."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    count = len(scan.tasks)
    readers = {
        (facts[u.topic, u.partition, u.segment_base_offset].number, t)
        for t, task in enumerate(scan.tasks)
        for u in task
    }
    discarded = (
        decided.where("discard_records")
        .select("segment", "position")
        .join(F.broadcast(spark.createDataFrame(sorted(readers), "segment int, task int")), "segment")
    )
    every_task = spark.createDataFrame([(None, None, t) for t in range(count)], "segment int, position long, task int")
    inputs = discarded.unionByName(every_task).repartitionById(count, "task")
    root, flt, now, tasks = scan.root, scan.flt, plan.now, scan.tasks

    def decide_task(batches):
        given = pa.Table.from_batches(list(batches))
        (task,) = set(given["task"].to_pylist())  # repartitionById: a task's rows are its own
        gone: dict = {}
        for segment, position in zip(given["segment"].to_pylist(), given["position"].to_pylist()):
            if segment is not None:
                gone.setdefault(segment, []).append(position)

        def fates():
            for batch in read_task(root, tasks[task], "narrow", flt):
                segment = facts[_segment_of(batch)]
                yield record_fates(batch, segment, gone.get(segment.number, ()), now)

        solo = task << 32  # run numbers unique over the tasks
        for table, split in _chunks(fates(), COMBINE_ROWS):
            out, solo = _combine(table, split, solo)
            yield from out

    combined = inputs.mapInArrow(decide_task, spark_schema(COMBINED))
    # The window sorts its rows by their partition columns, comparing rows by a prefix of the first
    # one: the key's hash first makes that prefix tell nearly all rows apart (keys with a common
    # prefix would leave almost every comparison to the whole row). The groups are the same. A run
    # row (no key) is a group of its own, by its `solo` number.
    by_key = Window.partitionBy(F.xxhash64("key", "solo"), "tp", "key", "solo")
    latest = F.coalesce(F.max("map_offset").over(by_key), F.lit(-1))
    record = F.col("offset").isNotNull()
    fate = F.when((F.col("fate") <= EXPIRE_TOMBSTONE) & (F.col("offset") < latest), F.lit(SUPERSEDED).cast("byte"))
    fate = fate.otherwise(F.col("fate"))
    gone = ~fate.isin(*FATES_OF["kept"])
    bit = F.expr("shiftleft(1L, cast(offset & 63 as int))")

    def of_record(value, column: str):
        return F.when(record, value).otherwise(F.col(column)).alias(column)

    return combined.select(
        "segment",
        "position",
        "run",
        of_record(F.when(gone, bit).otherwise(0), "bits"),
        of_record(fate == KEEP_TOMBSTONE, "has_tombstone"),
        of_record(F.when(gone, F.col("recordSpanSize").cast("long")), "bytes_removed"),
        *[of_record(F.when(fate.isin(*fates_), 1).otherwise(0).cast("long"), r) for r, fates_ in FATES_OF.items()],
    )


def _segment_of(batch: pa.RecordBatch) -> tuple[str, int, int]:
    """The segment of a scan's Arrow batch: the reader's batches are each of one work unit."""
    return batch["topic"][0].as_py(), batch["partition"][0].as_py(), batch["segmentBaseOffset"][0].as_py()


def record_fates(batch: pa.RecordBatch, facts: SegmentFacts, discarded: Sequence[int], now: int) -> pa.RecordBatch:
    """The fates of one narrow Arrow batch's records below the upper bound, as Kafka's cleaner gives
    them before superseding: a record of a batch whose records all go (`discarded` positions) is an
    aborted record or a removed marker; a control record stays; an unkeyed one goes; a tombstone
    stays while its delete horizon (v2: the batch's; v0/v1: the segment's mtime against the
    partition's legacy horizon) is not past. `map_offset` is the offset of a keyed record in the
    cleanable dirty range, which supersedes older records of its key. The columns `_combine` reads."""
    import numpy as np

    offset = batch["offset"].to_numpy()
    batch = batch.filter(pa.array(offset < facts.upper_bound))
    offset = batch["offset"].to_numpy()
    position = batch["position"].to_numpy()
    control = batch["isControl"].to_numpy(zero_copy_only=False)
    horizon = batch["deleteHorizonMs"]
    retain = np.where(
        batch["magic"].to_numpy() >= 2,
        horizon.is_null().to_numpy(zero_copy_only=False) | (now < horizon.fill_null(0).to_numpy()),
        facts.mtime_ms > facts.legacy_horizon_ms,
    )
    tombstone = batch["valueIsNull"].to_numpy(zero_copy_only=False)
    discard = np.isin(position, np.asarray(discarded, np.int64))
    fate = np.select(
        [
            discard & control,
            discard,
            control,
            batch["key"].is_null().to_numpy(zero_copy_only=False),
            tombstone & retain,
            tombstone,
        ],
        [MARKER, ABORTED, CONTROL, UNKEYED, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE],
        KEEP,
    ).astype(np.int8)
    in_map = (offset >= facts.first_dirty) & (fate <= EXPIRE_TOMBSTONE)
    n = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, facts.tp, np.int32)),
            pa.array(np.full(n, facts.number, np.int32)),
            batch["position"],
            batch["offset"],
            batch["key"],
            batch["recordSpanSize"],
            pa.array(fate),
            pa.array(offset, mask=~in_map),
            pa.array(np.full(n, facts.whole)),
        ],
        names=["tp", "segment", "position", "offset", "key", "recordSpanSize", "fate", "map_offset", "whole"],
    )


# What a scan task hands the window (`_combine`): the records it cannot decide alone (key, offset,
# map_offset, fate, span; `solo` null) and runs of what it decided (offset null; a `solo` number
# of their own; the aggregates of `_batch_outcomes`' first step).
COMBINED = pa.schema(
    [
        ("tp", pa.int32()),
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("run", pa.int64()),
        ("key", pa.binary()),
        ("offset", pa.int64()),
        ("map_offset", pa.int64()),
        ("fate", pa.int8()),
        ("recordSpanSize", pa.int32()),
        ("solo", pa.int64()),
        ("bits", pa.int64()),
        ("has_tombstone", pa.bool_()),
        ("bytes_removed", pa.int64()),
        *[(r, pa.int64()) for r in REASONS],
    ]
)


def _chunks(batches, max_rows: int):
    """A scan task's records as (table, split) chunks of about `max_rows` rows, cut where one
    partition's rows (`tp`) end and the next begin, so that a partition read whole stays whole in one
    chunk; `split` holds the partitions whose rows alone filled a chunk and so span several (the
    window decides their keys). The scan yields each partition's rows together, in order; a
    partition seen again after its chunk was combined whole is refused, as its keys would have been
    decided without those rows."""
    import numpy as np

    held: list[pa.RecordBatch] = []
    rows = 0
    split: set[int] = set()
    done: set[int] = set()

    def chunk(table: pa.Table) -> tuple[pa.Table, set[int]]:
        tps = set(np.unique(table["tp"].to_numpy()).tolist())
        if tps & done:
            raise RuntimeError(f"the scan's rows of partitions {sorted(tps & done)} are not together")
        done.update(tps - split)
        return table, split

    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        if rows < max_rows:
            continue
        table = pa.Table.from_batches(held)
        tp = table["tp"].to_numpy()
        changes = np.flatnonzero(tp[1:] != tp[:-1])
        cut = int(changes[-1]) + 1 if len(changes) else rows  # the last partition's rows may go on
        if cut == rows:
            split.add(int(tp[-1]))
        yield chunk(table.slice(0, cut))
        held, rows = table.slice(cut).to_batches(), rows - cut
    if rows:
        yield chunk(pa.Table.from_batches(held))


def _combine(table: pa.Table, split: set[int], solo: int) -> tuple[list[pa.RecordBatch], int]:
    """One chunk of a scan task's records: the latest offset of each key among them, by pyarrow's
    hash aggregation. A record older than that is superseded whatever other chunks and tasks hold;
    in a partition this task reads whole (`whole`) and this chunk holds whole (not in `split`), every
    record is decided. Decided records leave as runs of 64 offsets of a batch, aggregated, numbered from
    `solo`; the others (the latest of each key of a partition read by several tasks or chunks, and
    its records not superseded here) leave one by one for the window. Returns the batches and the
    next free run number."""
    import numpy as np
    import pyarrow.compute as pc

    out: list[pa.RecordBatch] = []
    keyed = pc.less_equal(table["fate"], EXPIRE_TOMBSTONE)
    latest = table.filter(keyed).group_by(["tp", "key"]).aggregate([("map_offset", "max")])
    table = table.join(latest, ["tp", "key"], join_type="left outer")
    offset = table["offset"].to_numpy()
    fate = table["fate"].to_numpy()
    is_keyed = fate <= EXPIRE_TOMBSTONE
    superseded = is_keyed & (offset < table["map_offset_max"].fill_null(-1).to_numpy())
    fate = np.where(superseded, np.int8(SUPERSEDED), fate).astype(np.int8)
    tps = table["tp"].to_numpy()
    whole = table["whole"].to_numpy() & ~np.isin(tps, list(split))
    undecided = is_keyed & ~superseded & ~whole
    run = offset >> 6
    pending = table.filter(pa.array(undecided))
    if pending.num_rows:
        n = pending.num_rows
        out.append(
            pa.RecordBatch.from_arrays(
                [
                    pending["tp"].combine_chunks(),
                    pending["segment"].combine_chunks(),
                    pending["position"].combine_chunks(),
                    pa.array(run[undecided]),
                    pending["key"].combine_chunks(),
                    pa.array(offset[undecided]),
                    pending["map_offset"].combine_chunks(),
                    pa.array(fate[undecided], pa.int8()),
                    pending["recordSpanSize"].combine_chunks(),
                    *[pa.nulls(n, f.type) for f in COMBINED][9:],
                ],
                schema=COMBINED,
            )
        )
    decided = ~undecided
    if not decided.any():
        return out, solo
    # the decided records' runs, aggregated: rows sorted by run, then reduced at each run's start
    segment, position = table["segment"].to_numpy()[decided], table["position"].to_numpy()[decided]
    fate, offset, span = fate[decided], offset[decided], table["recordSpanSize"].to_numpy()[decided]
    order = np.lexsort((offset, position, segment))
    segment, position, fate, offset, span = segment[order], position[order], fate[order], offset[order], span[order]
    tp, run = tps[decided][order], offset >> 6
    starts = np.flatnonzero(
        np.concatenate(
            [[True], (segment[1:] != segment[:-1]) | (position[1:] != position[:-1]) | (run[1:] != run[:-1])]
        )
    )
    gone = ~np.isin(fate, FATES_OF["kept"])
    bits = np.where(gone, np.left_shift(np.uint64(1), (offset & 63).astype(np.uint64)), np.uint64(0))
    removed = np.add.reduceat(np.where(gone, span, 0).astype(np.int64), starts)
    n = len(starts)
    out.append(
        pa.RecordBatch.from_arrays(
            [
                pa.array(tp[starts], pa.int32()),
                pa.array(segment[starts], pa.int32()),
                pa.array(position[starts], pa.int64()),
                pa.array(run[starts], pa.int64()),
                *[
                    pa.nulls(n, COMBINED.field(c).type)
                    for c in ("key", "offset", "map_offset", "fate", "recordSpanSize")
                ],
                pa.array(solo + np.arange(n, dtype=np.int64)),
                pa.array(np.bitwise_or.reduceat(bits, starts).view(np.int64)),
                pa.array(np.logical_or.reduceat(fate == KEEP_TOMBSTONE, starts)),
                pa.array(removed, mask=~np.logical_or.reduceat(gone, starts)),  # null where nothing goes, as Spark sums
                *[
                    pa.array(np.add.reduceat(np.isin(fate, fates_).astype(np.int64), starts))
                    for fates_ in FATES_OF.values()
                ],
            ],
            schema=COMBINED,
        )
    )
    return out, solo + n


def _batch_outcomes(fates, decided):
    """Per batch below the upper bound: its decision and what becomes of its records: the offsets
    that go, whether a kept tombstone needs a horizon, records per reason and the record bytes
    removed. Plans, changed segments and the report all come from this small table (a batch
    without records has nulls).

    The records are aggregated first per run of 64 offsets of a batch, the offsets that go as the
    bits of a long: that aggregation is of fixed-size values, hashed and combined before its
    shuffle (collecting the offsets themselves would sort every record). A batch's runs with
    offsets that go are its `removed` (`spark/rewrite.removed_run`): the rewrite task turns them
    into offsets, in numpy (a Spark lambda over every run's 64 bits cost seconds in one task)."""
    from pyspark.sql import functions as F

    runs = fates.groupBy("segment", "position", "run").agg(
        F.bit_or("bits").alias("bits"),
        F.max("has_tombstone").alias("has_tombstone"),
        F.sum("bytes_removed").alias("bytes_removed"),
        *[F.sum(r).alias(r) for r in REASONS],
    )
    per_batch = runs.groupBy("segment", "position").agg(
        F.collect_list(F.when(F.col("bits") != 0, F.struct("run", "bits"))).alias("removed"),
        F.max("has_tombstone").alias("has_tombstone"),
        F.sum("bytes_removed").alias("bytes_removed"),
        *[F.sum(r).alias(r) for r in REASONS],
    )
    return decided.join(per_batch, ["segment", "position"], "left").drop("segment")


def _changes():
    """Whether a batch changes: it goes, records of it go, or it gains a horizon."""
    from pyspark.sql import functions as F

    no_horizon = F.col("deleteHorizonMs").isNull() & (F.col("magic") >= 2)
    return (
        (F.col("retention") == BatchRetention.DELETE.value)
        | (F.size(F.coalesce(F.col("removed"), F.array())) > 0)
        | ((F.col("count") == 0) & (F.col("retention") == BatchRetention.DELETE_EMPTY.value))
        | ((F.coalesce(F.col("has_tombstone"), F.lit(False)) | F.col("marker_for_empty_txn")) & no_horizon)
    )


def batch_plans(outcomes):
    """One row per batch that changes: its retention, removed offsets and horizon needs."""
    return outcomes.where(_changes())


def decide(spark, plan):
    """Steps 2 and 3 over the plan's chosen partitions: (decided, outcomes), both cached (the
    decisions feed both the record fates and the per-batch table, which every later step reads; the
    records themselves are aggregated once, as they come out of the window)."""
    scan = _scan(spark, plan)
    facts = _segment_facts(plan, _whole(scan))
    decided = _batch_decisions(spark, plan, scan, facts).cache()
    outcomes = _batch_outcomes(_record_fates(spark, plan, scan, decided, facts), decided).cache()
    return decided, outcomes


def segment_summaries(decided, outcomes) -> list:
    """Per source segment below the upper bound, in one small collect: records per reason, the
    record bytes (their uncompressed spans) that go, whether any batch changes, and the ABORT
    markers whose `.txnindex` entry stays (data of their transaction is still in the log).

    The cached batch decisions are materialized first, in a job of their own: both branches of the
    plan read them, and two query stages that reach a cache not yet built both compute it."""
    from pyspark.sql import functions as F

    decided.count()
    return (
        outcomes.groupBy("topic", "partition", "segmentBaseOffset")
        .agg(
            *[F.coalesce(F.sum(r), F.lit(0)).alias(r) for r in REASONS],
            F.sum("bytes_removed").alias("bytes_removed"),
            F.max(_changes()).alias("changed"),
            F.collect_list(F.when(F.col("keeps_txn_index_entry"), F.col("lastOffset"))).alias("kept_txn_markers"),
        )
        .collect()
    )
