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

A partition small enough (`tuning.ONE_TASK_BYTES`) skips all of that: one task reads its segments once,
decides, and writes its `.cleaned` segments (`clean_partition`); Spark only spreads such
partitions over the executors. A larger one takes the range path (spark/ranges.py), or, with
`tuning.LARGE_PARTITIONS = "window"`, the steps above.

`plan` is a rules.compaction.CompactionPlan: what these functions read of it is its root (the log
directory as executors reach it), `now`, the chosen `LogToClean`s and their segments (`scanned()`).
The rules themselves (fates, the offset map, batch retention) are rules/compaction.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..codec.filter import BatchRetention
from ..errors import KafkaLogError
from ..rules.cleaner import LogToClean, group_segments_by_size
from ..rules.compaction import (
    COMBINED,
    DECIDED,
    EXPIRE_TOMBSTONE,
    FATES_OF,
    KEEP_TOMBSTONE,
    REASONS,
    SUPERSEDED,
    PartitionOutcome,
    SegmentFacts,
    combine,
    decide_batches,
    estimated_bytes_removed,
    partition_outcome,
    record_fates,
)
from ..rules.compaction_strategy import OFFSET
from ..scan.reader import read_task
from ..scan.scan_plan import ScanFilter, ScanPlan, plan_segments, plan_units
from ..scan.views import filesystem
from ..storage.fs import HeldFileSystem
from ..storage.outputs import OutputSegment
from .errors import worker_error
from .held import Cleaned, batch_headers, discarded_positions, held_fates, write_cleaned
from .scan import default_min_tasks, pack_tasks, spark_schema
from .tasks import run_tasks, task_frame

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
        max_bytes_per_task=tuning.COMPACTION_TASK_BYTES,
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
                s.strategy,
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
            s,
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


def _decide_partition(root: str, log: LogToClean, numbers: dict, units, now: int) -> pa.RecordBatch:
    """The DECIDED rows of one partition's batches below its upper bound; `numbers` are its
    segments'. CRCs are left to the record scan, which reads every one of these batches."""
    flt = ScanFilter.of(end_offset=log.upper_bound)
    return decide_batches(read_task(root, units, "batches", flt, verify_crc=False), log, numbers, now)


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
    headers = _version_headers(plan.chosen)
    combine_rows = tuning.COMBINE_ROWS  # read here: the task gets the driver's value

    def decide_task(batches):
        given = pa.Table.from_batches(list(batches))
        (task,) = set(given["task"].to_pylist())  # repartitionById: a task's rows are its own
        gone: dict = {}
        for segment, position in zip(given["segment"].to_pylist(), given["position"].to_pylist()):
            if segment is not None:
                gone.setdefault(segment, []).append(position)

        def fates():
            for batch in read_task(root, tasks[task], "narrow", flt, headers=headers):
                segment = facts[_segment_of(batch)]
                yield record_fates(batch, segment, gone.get(segment.number, ()), now)

        solo = task << 32  # run numbers unique over the tasks
        for table, split in _chunks(fates(), combine_rows):
            out, solo = combine(table, split, solo)
            yield from out

    combined = inputs.mapInArrow(decide_task, spark_schema(COMBINED))
    # The window sorts its rows by their partition columns, comparing rows by a prefix of the first
    # one: the key's hash first makes that prefix tell nearly all rows apart (keys with a common
    # prefix would leave almost every comparison to the whole row). The groups are the same. A run
    # row (no key) is a group of its own, by its `solo` number.
    by_key = Window.partitionBy(F.xxhash64("key", "solo"), "tp", "key", "solo")
    latest = F.coalesce(F.max("map_offset").over(by_key), F.lit(-1))
    loses = F.col("offset") < latest
    if any(s.strategy != OFFSET for s in plan.chosen):  # KIP-280: the key's winner by (rank, version, offset)
        precedence = F.struct("rank", "version", "offset")
        loses = (latest >= 0) & (precedence < F.max(precedence).over(by_key))
    record = F.col("offset").isNotNull()
    fate = F.when((F.col("fate") <= EXPIRE_TOMBSTONE) & loses, F.lit(SUPERSEDED).cast("byte"))
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
        "invalid_headers",
    )


def _version_headers(logs) -> dict[str, bytes]:
    """The header key the narrow scan reads, by topic: the topics of the `header` strategy."""
    return {s.topic: key for s in logs for key in [s.strategy.header_key] if key is not None}


def _segment_of(batch: pa.RecordBatch) -> tuple[str, int, int]:
    """The segment of a scan's Arrow batch: the reader's batches are each of one work unit."""
    return batch["topic"][0].as_py(), batch["partition"][0].as_py(), batch["segmentBaseOffset"][0].as_py()


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


def _batch_outcomes(fates, decided):
    """Per batch below the upper bound: its decision and what becomes of its records: the offsets
    that go, whether a kept tombstone needs a horizon, records per reason and `bytes_removed`, the
    spans of the records that go (`segment_summaries` makes it the batch's estimate). Plans,
    changed segments and the report all come from this small table (a batch without records has
    nulls).

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
        *[F.sum(r).alias(r) for r in (*REASONS, "invalid_headers")],
    )
    per_batch = runs.groupBy("segment", "position").agg(
        F.collect_list(F.when(F.col("bits") != 0, F.struct("run", "bits"))).alias("removed"),
        F.max("has_tombstone").alias("has_tombstone"),
        F.sum("bytes_removed").alias("bytes_removed"),
        *[F.sum(r).alias(r) for r in (*REASONS, "invalid_headers")],
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
    `.log` bytes that go (`estimated_bytes_removed`, per batch), whether any batch changes, and the
    ABORT markers whose `.txnindex` entry stays (data of their transaction is still in the log).

    The cached batch decisions are materialized first, in a job of their own: both branches of the
    plan read them, and two query stages that reach a cache not yet built both compute it."""
    from pyspark.sql import functions as F

    decided.count()
    batches = outcomes.select(
        "topic",
        "partition",
        "segmentBaseOffset",
        *[F.coalesce(F.col(r), F.lit(0)).alias(r) for r in (*REASONS, "invalid_headers")],
        "size",
        "count",
        "magic",
        "compresscodec",
        "retention",
        F.coalesce("bytes_removed", F.lit(0)).alias("bytes_removed"),
        _changes().alias("changed"),
        F.when(F.col("keeps_txn_index_entry"), F.col("lastOffset")).alias("kept_txn_marker"),
    )
    return (
        batches.mapInArrow(_bytes_removed_estimates, batches.schema)
        .groupBy("topic", "partition", "segmentBaseOffset")
        .agg(
            *[F.sum(r).alias(r) for r in (*REASONS, "invalid_headers")],
            F.sum("bytes_removed").alias("bytes_removed"),
            F.max("changed").alias("changed"),
            F.collect_list("kept_txn_marker").alias("kept_txn_markers"),
        )
        .collect()
    )


def _bytes_removed_estimates(batches):
    """`segment_summaries`' batch rows with `bytes_removed`, the spans of the records that go, made
    the batch's `estimated_bytes_removed`."""
    for b in batches:
        gone = sum(b[r].to_numpy() for r in REASONS if r != "kept")
        decided = ("size", "count", "magic", "compresscodec", "retention")
        columns = [b[c].to_numpy(zero_copy_only=False) for c in decided]
        estimate = estimated_bytes_removed(*columns, gone, b["bytes_removed"].to_numpy())
        at = b.schema.get_field_index("bytes_removed")
        yield b.set_column(at, "bytes_removed", pa.array(estimate, pa.int64()))


# -- a partition in one task -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputSettings:
    """How the output segments of a topic's partitions are grouped and written: its configuration
    (segment.bytes, segment.index.bytes, index.interval.bytes), the horizon the pass gives batches
    that need one (now + delete.retention.ms), and whether legacy batches become v2."""

    segment_bytes: int
    segment_index_bytes: int
    delete_horizon_ms: int
    index_interval_bytes: int
    legacy_as_v2: bool = False

    @classmethod
    def of(cls, config, now: int, legacy_as_v2: bool = False) -> OutputSettings:
        """A topic's settings (`config`, its TopicConfig) for a pass at `now`."""
        return cls(
            config.segment_bytes,
            config.segment_index_bytes,
            now + config.delete_retention_ms,
            config.index_interval_bytes,
            legacy_as_v2,
        )


def partition_outputs(
    log: LogToClean, settings: OutputSettings, kept_markers: set[int], changed: set[int], files=None, groups=None
) -> list[OutputSegment]:
    """Step 4 for one partition: its source segments grouped into output segments as Kafka's
    cleaner groups them. A lone segment none of whose batches changes (not in `changed`) is left
    alone: rewriting it would give the same bytes (unless its legacy batches are to become v2: then
    every cleanable segment is rewritten, as Kafka's are). `kept_markers`: the last offsets of the
    ABORT markers whose `.txnindex` entry stays. `files`: the plan's (base offset, files, next base
    offset) of each segment by base offset, handed to the rewrite tasks (they do not list the partition).
    `groups`: those of `output_groups` to make (default: all)."""
    aborted = tuple(tuple(t) for t in log.aborted_txns if t.last_offset in kept_markers)
    outputs = []
    for group in output_groups(log, settings) if groups is None else groups:
        if len(group) == 1 and group[0].base_offset not in changed and not settings.legacy_as_v2:
            continue
        outputs.append(
            OutputSegment(
                log.topic,
                log.partition,
                tuple(s.base_offset for s in group),
                settings.delete_horizon_ms,
                settings.index_interval_bytes,
                aborted,
                nbytes=sum(s.size for s in group),
                legacy_as_v2=settings.legacy_as_v2,
                sources=tuple(files[s.base_offset] for s in group) if files else (),
            )
        )
    return outputs


def output_groups(log: LogToClean, settings: OutputSettings) -> list[list]:
    """The cleanable segments of `log` grouped into output segments, as Kafka's cleaner groups them."""
    return group_segments_by_size(
        log.cleanable_segments(), settings.segment_bytes, settings.segment_index_bytes, log.upper_bound
    )


@dataclass(frozen=True)
class OneTask:
    """What the task of a partition cleaned in one task takes from the plan: its LogToClean, its
    scanned segments' files as the plan listed them (no task lists the partition again), their
    work units (whole segments) and how its outputs are written."""

    log: LogToClean
    segments: tuple  # (base offset, {suffix: FileEntry}, next base offset) of each scanned segment
    units: tuple
    settings: OutputSettings

    @property
    def nbytes(self) -> int:
        return sum(size for _, files, _ in self.segments for size in [files[".log"].size])


def one_task_jobs(plan, settings: dict[str, OutputSettings]) -> list[OneTask]:
    """The chosen partitions of `plan` cleaned in one task: those whose scanned segments hold at
    most tuning.ONE_TASK_BYTES; `settings` by topic."""
    jobs = []
    for log in plan.chosen:
        segments = plan.scanned(log)
        if sum(s.size for s in segments) > tuning.ONE_TASK_BYTES:
            continue
        units = plan_units(segments, ScanFilter(), unit_bytes=tuning.ONE_TASK_BYTES)  # whole segments, no index read
        jobs.append(OneTask(log, tuple(segment_files(segments)), tuple(units), settings[log.topic]))
    return jobs


def segment_files(segments) -> list[tuple]:
    """(base offset, {suffix: FileEntry}, next base offset) of each LogSegment: what a task needs to
    open them without listing their partition."""
    return [(s.base_offset, dict(s.files), s.next_base_offset) for s in segments]


def clean_in_one_task(spark, plan, jobs: list[OneTask], *, write: bool, fault=None) -> list[Cleaned]:
    """`clean_partition` of each job on the executors, the jobs packed into tasks by their bytes
    (many small partitions share a task); Spark only spreads them. The results in the jobs' order."""
    root, now, records_at_most = plan.root, plan.now, tuning.ONE_TASK_RECORDS

    def work(job: OneTask) -> Cleaned:
        return clean_partition(filesystem(root), root, job, now, records_at_most, write=write, fault=fault)

    return run_tasks(spark, pack_tasks(spark, jobs, lambda j: j.nbytes), work)


def clean_partition(fs, root: str, job: OneTask, now: int, records_at_most: int, *, write: bool, fault=None) -> Cleaned:
    """Executor side: one partition's pass in one task. Each scanned segment's `.log` is read once
    into memory; its batches are decided (the transaction tracker), its records get their fates and
    the latest offset per key (rules/compaction.py, numpy and Arrow), and, with `write`, the output
    segments are written from the same bytes as `.cleaned` files (untouched batches copied as they
    are). `root` is the log directory as `fs` reaches it (for the errors' file names). A partition
    of more than `records_at_most` records is handed back (`spread`) once its batch headers are read."""

    log = job.log
    cleaned = Cleaned(log.topic, log.partition)
    try:
        entries = [files[".log"] for _, files, _ in job.segments]
        held = HeldFileSystem(fs, {e.path: fs.read_range(e.path, 0, e.size) for e in entries})
        outcome = _decide_whole(held, job, now, records_at_most)
    except KafkaLogError as err:
        cleaned.error = worker_error(err)
        return cleaned
    if outcome is None:
        cleaned.spread = True
        return cleaned
    cleaned.segments = outcome.segments
    files = {f[0]: f for f in job.segments}
    cleaned.outputs = partition_outputs(log, job.settings, outcome.kept_txn_markers, outcome.changed, files)
    if not write:
        return cleaned
    write_cleaned(fs, root, log.path, held, cleaned, outcome, fault)
    return cleaned


def _decide_whole(held, job: OneTask, now: int, records_at_most: int) -> PartitionOutcome | None:
    """The outcome of the partition of `job`, read from `held` (each segment's bytes in memory);
    None when its batches hold more than `records_at_most` records."""
    log = job.log
    numbers = {base: i for i, (base, _, _) in enumerate(job.segments)}
    decided = decide_batches(batch_headers(held, log, job.units), log, numbers, now)
    if (pc.sum(decided["count"]).as_py() or 0) > records_at_most:
        return None
    fates = held_fates(held, log, job.units, numbers, discarded_positions(decided), now)
    return partition_outcome(log, decided, fates)
