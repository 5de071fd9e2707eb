"""Compaction with Kafka's semantics as a Spark plan (DESIGN.md, data flow of a compaction).

1. Inventory (driver): per compacted partition, `LogToClean` from metadata, index tails and
   producer state: the cleanable range, dirty ratio, active producers, aborted transactions.
2. Scan (executors): the batch view and the narrow record view of the segments to clean.
3. Decide: batch fates with Kafka's transaction tracker, one task per partition; record fates as
   column expressions, with the latest offset per key over the cleanable dirty range as a window
   over (partition, key); the fates aggregated per batch as they leave the window. Only batches that
   change get a plan; changed segments and the report's counts come from the same per-batch table.
4. Group (driver): source segments into output segments, as Kafka groups them.
5. Rewrite (executors): one task per output segment writes `.cleaned` files; untouched batches are
   copied byte for byte.
6. Commit (driver): the swap protocol per partition, then `cleaner-offset-checkpoint`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pyarrow as pa

from ..codec.filter import BatchRetention
from ..config import ConfigResolver
from ..rules.cleaner import (BatchMeta, CleanedTransactionMetadata, LogToClean, decide_batch,
                               group_segments_by_size, log_to_clean)
from ..errors import KafkaLogError
from ..storage.destination import Destination, destination
from ..storage.logdir import LogDir
from ..storage.naming import (CLEANER_OFFSET_CHECKPOINT, KRAFT_METADATA_NOT_REWRITTEN, OFFSET_CHECKPOINT_FILES,
                              is_kraft_metadata, partition_of_file)
from ..storage.swap import FaultHook, recover_partition
from .errors import from_spark_error, raises_kafkalog_errors
from .rewrite import OutputSegment, OutputStats, swap_in, write_outputs
from .scan import ScanFilter, narrow_scan, pack_tasks, plan_scan, read_task, spark_schema

log = logging.getLogger("kafkalog")

# One row per batch below the upper bound: its fate, and whether its ABORT marker keeps the
# transaction's .txnindex entry (data of the transaction is still in the log).
DECIDED = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("segment_base_offset", pa.int64()),
    ("batch_position", pa.int64()), ("last_offset", pa.int64()), ("record_count", pa.int32()), ("magic", pa.int8()),
    ("delete_horizon_ms", pa.int64()), ("retention", pa.string()), ("discard_records", pa.bool_()),
    ("marker_for_empty_txn", pa.bool_()), ("keeps_txn_index_entry", pa.bool_())])
# The narrow view's columns that record fates read.
FATE_INPUTS = ("topic", "partition", "segment_base_offset", "batch_position", "offset", "key", "value_is_null",
               "record_span_size", "is_control", "delete_horizon_ms", "magic")
# A record's fate as a small integer: fates travel through the window's shuffle, where a string per
# record would cost. The first three are keyed data records, in the offset map, whose fate the
# window may still turn into SUPERSEDED.
KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE, CONTROL, MARKER, ABORTED, UNKEYED, SUPERSEDED = range(8)
FATES_OF = {"kept": (KEEP, KEEP_TOMBSTONE, CONTROL), "superseded": (SUPERSEDED,),
            "tombstone_expired": (EXPIRE_TOMBSTONE,), "aborted_transaction": (ABORTED,), "marker_removed": (MARKER,),
            "unkeyed": (UNKEYED,)}
REASONS = tuple(FATES_OF)


@dataclass
class CompactionPlan:
    log_dir: str
    now: int
    logs: list[LogToClean] = field(default_factory=list)
    # (topic, partition) -> the error that makes it uncleanable: it cannot be read whole (KIP-346)
    uncleanable: dict[tuple[str, int], KafkaLogError] = field(default_factory=dict)
    # (topic, partition) -> why kafkalog never cleans it, whatever its configuration
    excluded: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def chosen(self) -> list[LogToClean]:
        return [log for log in self.logs if log.eligible and (log.topic, log.partition) not in self.uncleanable]

    def mark_uncleanable(self, err: KafkaLogError) -> bool:
        """Make the chosen partition whose file `err` names uncleanable; False when it names none."""
        tp = partition_of_file(err.file) if err.file else None
        if tp is None or tp not in {(s.topic, s.partition) for s in self.chosen}:
            return False
        self.uncleanable[tp] = err
        log.warning("compact: %s-%d is uncleanable and is left as it is: %s", tp[0], tp[1], err)
        return True

    def partitions(self) -> list[dict]:
        """Why each compacted partition was or was not chosen: the plan's partition table."""
        rows = [{"topic": s.topic, "partition": s.partition, "chosen": s.eligible, "reason": s.reason,
                 "first_dirty_offset": s.range.first_dirty, "first_uncleanable_offset": s.range.first_uncleanable,
                 "log_start_offset": s.log_start_offset, "log_end_offset": s.log_end_offset,
                 "last_stable_offset": s.last_stable_offset, "clean_bytes": s.stats.clean_bytes,
                 "cleanable_bytes": s.stats.cleanable_bytes, "dirty_ratio": round(s.stats.cleanable_ratio, 6),
                 "max_compaction_delay_secs": s.max_compaction_delay_ms // 1000} for s in self.logs]
        planned = {(s.topic, s.partition) for s in self.logs}
        rows += [{"topic": t, "partition": p, "chosen": False, "reason": reason}
                 for (t, p), reason in self.excluded.items()]
        rows += [{"topic": t, "partition": p} for t, p in self.uncleanable if (t, p) not in planned]
        for row in rows:
            err = self.uncleanable.get((row["topic"], row["partition"]))
            if err is not None:
                row.update(chosen=False, reason=f"uncleanable: {err}")
        return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def plan_compaction(log_dir: str, resolver: ConfigResolver, now: int, *, force: bool = False,
                    topics=None) -> CompactionPlan:
    """Step 1 for every partition whose cleanup.policy contains compact (driver, metadata only)."""
    opened = LogDir.open(log_dir)
    checkpoints = {name: opened.read_checkpoint(name) for name in OFFSET_CHECKPOINT_FILES}
    plan = CompactionPlan(log_dir, now)
    for topic, partition in opened.topic_partitions:
        if is_kraft_metadata(topic):  # listed, never chosen, whatever the configuration; not even read
            if not topics or topic in topics:
                plan.excluded[(topic, partition)] = KRAFT_METADATA_NOT_REWRITTEN
            continue
        config = resolver.for_topic(topic)
        if not config.compact or (topics and topic not in topics):
            continue
        try:
            part = opened.partition(topic, partition)
            part.ensure_settled()
            if part.segments:
                plan.logs.append(log_to_clean(part, checkpoints, config, now, force=force))
        except KafkaLogError as err:  # its metadata or producer state cannot be read: uncleanable
            plan.uncleanable[(topic, partition)] = err
    return plan


# -- step 3: decide ------------------------------------------------------------------------------------

def _scan_scope(plan: CompactionPlan) -> dict:
    """What the scans must read: the chosen partitions below their first uncleanable offset (the
    joins that follow narrow it to exactly that; this prunes whole segments before they are opened)."""
    chosen = plan.chosen
    return {"topics": sorted({s.topic for s in chosen}), "partitions": sorted({s.partition for s in chosen}),
            "end_offset": max(s.upper_bound for s in chosen)}


def _batch_decisions(spark, plan: CompactionPlan):
    """Batch fates with Kafka's transaction tracker: each partition's batches below the upper bound
    are read (headers only), in offset order, and decided in one task (no shuffle, no pandas);
    partitions are packed into tasks by their bytes, so many small ones share a task."""
    scan = plan_scan(plan.log_dir, ScanFilter.of(**_scan_scope(plan)), pack=False)
    units: dict = {}
    for unit in scan.units:
        units.setdefault((unit.topic, unit.partition), []).append(unit)
    partitions = [(s.topic, s.partition, s.aborted_txns, s.active_producers, s.upper_bound,
                   sorted(units.get((s.topic, s.partition), ()), key=lambda u: (u.segment_base_offset, u.start)))
                  for s in plan.chosen]
    tasks = pack_tasks(spark, partitions, lambda p: sum(u.nbytes for u in p[-1]))
    root, now = scan.root, plan.now

    def run(ids):
        for batch in ids:
            for i in batch.column(0).to_pylist():
                for partition in tasks[i]:
                    yield _decide_partition(root, *partition, now)
    return spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(run, spark_schema(DECIDED))


def _decide_partition(root: str, topic: str, partition: int, aborted, active, upper: int, units,
                      now: int) -> pa.RecordBatch:
    """The DECIDED rows of one partition's batches below `upper`. CRCs are left to the record scan,
    which reads every one of these batches."""
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted(aborted)
    rows = []
    for headers in read_task(root, units, "batches", ScanFilter.of(end_offset=upper), verify_crc=False):
        c = headers.to_pydict()
        for i in range(headers.num_rows):
            meta = BatchMeta(c["base_offset"][i], c["last_offset"][i], c["producer_id"][i], c["producer_epoch"][i],
                             c["is_transactional"][i], c["is_control"][i], c["control_type"][i])
            horizon = c["delete_horizon_ms"][i]
            kept_before = len(tracker.kept_aborted)
            d = decide_batch(meta, tracker, delete_horizon_ms=horizon, active_producers=active, upper_bound=upper,
                             now=now)
            rows.append((topic, partition, c["segment_base_offset"][i], c["batch_position"][i], meta.last_offset,
                         c["record_count"][i], c["magic"][i], horizon, d.retention.value, d.discard_records,
                         d.contains_marker_for_empty_txn, len(tracker.kept_aborted) > kept_before))
    columns = zip(*rows) if rows else [()] * len(DECIDED)
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, DECIDED)], schema=DECIDED)


def _segments(spark, plan: CompactionPlan):
    """One row per source segment of the chosen partitions, with a number of its own (`segment`)
    and its partition's (`tp`), which stand for the topic, partition and segment in the window's
    shuffle; and what record fates read of it and of its partition."""
    rows = [(s.topic, s.partition, tp, seg.base_offset, seg.mtime_ms, s.range.first_dirty, s.upper_bound,
             s.legacy_delete_horizon_ms) for tp, s in enumerate(plan.chosen) for seg in s.segments]
    return spark.createDataFrame(
        [r[:4] + (i,) + r[4:] for i, r in enumerate(rows)],
        "topic string, partition int, tp int, segment_base_offset long, segment int, segment_mtime long, "
        "first_dirty long, upper_bound long, legacy_horizon long")


def _record_fates(spark, plan: CompactionPlan, decided, segments):
    """Per record: its fate (spec §5.8), with the latest offset per key over the cleanable dirty
    range as a window. Everything but superseding is decided before the window, so that the
    shuffle carries numbers: the record's segment, batch position, offset, key, span size and fate.
    Not cached: `_batch_outcomes` is its one reader."""
    from pyspark.sql import Window, functions as F
    # The batch-level tables are broadcast: the window over keys is the one shuffle of the records.
    # Of the batch decisions only the few batches whose records all go are looked up, by numbers.
    discarded = (_numbered(decided, segments).where("discard_records")
                 .select("segment", "batch_position", "discard_records"))
    records = (narrow_scan(spark, plan.log_dir, **_scan_scope(plan), columns=FATE_INPUTS)
               .join(F.broadcast(segments), ["topic", "partition", "segment_base_offset"])
               .where(F.col("offset") < F.col("upper_bound"))
               .join(F.broadcast(discarded), ["segment", "batch_position"], "left"))
    retain_deletes = F.when(F.col("magic") >= 2, F.col("delete_horizon_ms").isNull()
                            | (F.lit(plan.now) < F.col("delete_horizon_ms"))) \
        .otherwise(F.col("segment_mtime") > F.col("legacy_horizon"))
    fate = (F.when(F.col("discard_records").isNotNull(), F.when(F.col("is_control"), MARKER).otherwise(ABORTED))
            .when(F.col("is_control"), CONTROL)
            .when(F.col("key").isNull(), UNKEYED)
            .when(F.col("value_is_null"), F.when(retain_deletes, KEEP_TOMBSTONE).otherwise(EXPIRE_TOMBSTONE))
            .otherwise(KEEP).cast("byte"))
    in_map = (F.col("offset") >= F.col("first_dirty")) & (fate <= EXPIRE_TOMBSTONE)
    records = records.select("tp", "segment", "batch_position", "offset", "key", "record_span_size",
                             fate.alias("fate"), F.when(in_map, F.col("offset")).alias("map_offset"))
    # The window sorts every record by its partition columns, comparing rows by a prefix of the first
    # one: the key's hash first makes that prefix tell nearly all rows apart (keys with a common
    # prefix would leave almost every comparison to the whole row). The groups are the same.
    by_key = Window.partitionBy(F.xxhash64("key"), "tp", "key")
    latest = F.coalesce(F.max("map_offset").over(by_key), F.lit(-1))
    superseded = (F.col("fate") <= EXPIRE_TOMBSTONE) & (F.col("offset") < latest)
    return records.select("segment", "batch_position", "offset", "record_span_size",
                          F.when(superseded, F.lit(SUPERSEDED).cast("byte")).otherwise(F.col("fate")).alias("fate"))


def _batch_outcomes(fates, decided, segments):
    """Per batch below the upper bound: its decision and what becomes of its records: the offsets
    that go, whether a kept tombstone needs a horizon, records per reason and the record bytes
    removed. Plans, changed segments and the report all come from this small table (a batch
    without records has nulls).

    The records are aggregated first per run of 64 offsets of a batch, the offsets that go as the
    bits of a long: that aggregation is of fixed-size values, hashed and combined before its
    shuffle (collecting the offsets themselves would sort every record). The runs of a batch then
    become its list of offsets."""
    from pyspark.sql import functions as F
    gone = ~F.col("fate").isin(*FATES_OF["kept"])
    bit = F.expr("shiftleft(1L, cast(offset & 63 as int))")
    runs = fates.groupBy("segment", "batch_position", F.expr("offset >> 6").alias("run")).agg(
        F.bit_or(F.when(gone, bit).otherwise(0)).alias("bits"),
        F.max(F.col("fate") == KEEP_TOMBSTONE).alias("has_tombstone"),
        F.sum(F.when(gone, F.col("record_span_size"))).alias("bytes_removed"),
        *[F.count(F.when(F.col("fate").isin(*fates_), True)).alias(r) for r, fates_ in FATES_OF.items()])
    per_batch = runs.groupBy("segment", "batch_position").agg(
        F.flatten(F.collect_list(F.expr("filter(sequence(run << 6, (run << 6) + 63), "
                                        "o -> (bits >> cast(o & 63 as int)) & 1 = 1)"))).alias("removed"),
        F.max("has_tombstone").alias("has_tombstone"), F.sum("bytes_removed").alias("bytes_removed"),
        *[F.sum(r).alias(r) for r in REASONS])
    return _numbered(decided, segments).join(per_batch, ["segment", "batch_position"], "left").drop("segment")


def _numbered(decided, segments):
    """The batch decisions with their segment's number."""
    from pyspark.sql import functions as F
    return decided.join(F.broadcast(segments.select("topic", "partition", "segment_base_offset", "segment")),
                        ["topic", "partition", "segment_base_offset"])


def _changes():
    """Whether a batch changes: it goes, records of it go, or it gains a horizon."""
    from pyspark.sql import functions as F
    no_horizon = F.col("delete_horizon_ms").isNull() & (F.col("magic") >= 2)
    return ((F.col("retention") == BatchRetention.DELETE.value)
            | (F.size(F.coalesce(F.col("removed"), F.array())) > 0)
            | ((F.col("record_count") == 0) & (F.col("retention") == BatchRetention.DELETE_EMPTY.value))
            | ((F.coalesce(F.col("has_tombstone"), F.lit(False)) | F.col("marker_for_empty_txn")) & no_horizon))


def _batch_plans(outcomes):
    """One row per batch that changes: its retention, removed offsets and horizon needs."""
    return outcomes.where(_changes())


# -- steps 4-7 ----------------------------------------------------------------------------------------

@dataclass
class CompactionResult:
    plan: CompactionPlan
    report: list[dict]  # per partition: records and bytes by reason
    segments: list[dict] = field(default_factory=list)  # per output segment: records and bytes in and out
    outputs: dict = field(default_factory=dict)  # (topic, partition) -> base offsets of the written segments


def compact(spark, log_dir: str, resolver: ConfigResolver, now: int, *, force: bool = False, topics=None,
            dry_run: bool = False, output: str | None = None, fault: FaultHook | None = None) -> CompactionResult:
    """One Kafka cleaning pass over every chosen partition of `log_dir`, in place with the swap protocol,
    or into `output`, a complete copy of `log_dir` that leaves it untouched. A partition that cannot
    be read whole is uncleanable (KIP-346): it is left as it is, named in `plan.uncleanable` with its
    error, and the others are cleaned. `fault` is a test hook called at each commit step (see
    kafkalog/storage/swap.py)."""
    with destination(log_dir, output, dry_run=dry_run) as target:
        return _compact(spark, target, resolver, now, force=force, topics=topics, dry_run=dry_run, fault=fault)


@raises_kafkalog_errors  # inside the destination's block, so that it can name the input's files
def _compact(spark, target: Destination, resolver: ConfigResolver, now: int, *, force: bool, topics, dry_run: bool,
             fault: FaultHook | None) -> CompactionResult:
    """The pass over `target.path`, rewritten in place (the input, or the staged output)."""
    opened = LogDir.open(target.path)
    if not dry_run:
        for tp in opened.topic_partitions:
            if resolver.for_topic(tp[0]).compact:
                recover_partition(opened.fs, opened.partition_paths[tp])
    plan = plan_compaction(target.path, resolver, now, force=force, topics=topics)
    decision = _decide_cleanable(spark, plan, target)
    if decision is None:
        return CompactionResult(plan, [])
    decided, outcomes, summaries = decision
    try:
        changed = {(r.topic, r.partition, r.segment_base_offset) for r in summaries if r.changed}
        kept = {(r.topic, r.partition, o) for r in summaries for o in r.kept_txn_markers}
        outputs = _output_segments(plan, resolver, kept, changed)
        counts = [r for r in summaries if sum(r[k] for k in REASONS)]
        if dry_run:
            return CompactionResult(plan, _partition_report(counts), _segment_report(counts, outputs, []))
        log.info("compact: rewriting %d output segments on executors", len(outputs))
        written = _write(spark, opened, outputs, _batch_plans(outcomes))
    finally:
        for df in (outcomes, decided):
            df.unpersist()
    _fault(fault, "rewritten")
    swap_in(opened, outputs, fault)
    _fault(fault, "swapped")
    opened.update_checkpoint(CLEANER_OFFSET_CHECKPOINT, {(s.topic, s.partition): s.upper_bound for s in plan.chosen})
    log.info("compact: %d partitions cleaned, cleaner-offset-checkpoint updated", len(plan.chosen))
    result = CompactionResult(plan, _partition_report(counts), _segment_report(counts, outputs, written))
    for o in outputs:
        result.outputs.setdefault((o.topic, o.partition), []).append(o.base_offset)
    return result


def _decide_cleanable(spark, plan: CompactionPlan, target: Destination):
    """Steps 2 and 3 over the chosen partitions: (decided, outcomes, segment summaries), the first
    two cached; None when no partition is chosen. A partition whose batches cannot be read whole
    becomes uncleanable and the pass is decided again without it, as Kafka's cleaner marks a
    partition uncleanable and goes on with the others (KIP-346)."""
    while plan.chosen:
        log.info("compact: %d of %d compacted partitions chosen; deciding", len(plan.chosen), len(plan.logs))
        # Cached: the decisions feed both the record fates and the per-batch table, which every later
        # step reads; the records themselves are aggregated once, as they come out of the window.
        decided = _batch_decisions(spark, plan).cache()
        segments = _segments(spark, plan)
        outcomes = _batch_outcomes(_record_fates(spark, plan, decided, segments), decided, segments).cache()
        try:
            return decided, outcomes, _segment_summaries(outcomes)
        except Exception as err:
            for df in (outcomes, decided):
                df.unpersist()
            found = err if isinstance(err, KafkaLogError) else from_spark_error(err)
            if found is None or not plan.mark_uncleanable(target.relocate(found)):
                raise
    return None


def _write(spark, opened: LogDir, outputs: list[OutputSegment], plans) -> list[OutputStats]:
    """Step 5; a failure leaves no `.cleaned` file behind (recovery deletes them)."""
    try:
        return write_outputs(spark, opened.path, outputs, plans)
    except BaseException:
        for tp in sorted({(o.topic, o.partition) for o in outputs}):
            recover_partition(opened.fs, opened.partition_paths[tp])
        raise


def _fault(hook: FaultHook | None, step: str) -> None:
    if hook is not None:
        hook(step, "")


def _output_segments(plan: CompactionPlan, resolver: ConfigResolver, kept: set[tuple],
                     changed: set[tuple]) -> list[OutputSegment]:
    """Step 4 (driver): source segments grouped into output segments as Kafka's cleaner groups them.
    A lone segment none of whose batches changes is left alone: rewriting it would give the same bytes."""
    outputs = []
    for state in plan.chosen:
        config = resolver.for_topic(state.topic)
        aborted = tuple(tuple(t) for t in state.aborted_txns if (state.topic, state.partition, t.last_offset) in kept)
        for group in group_segments_by_size(state.cleanable_segments(), config.segment_bytes,
                                            config.segment_index_bytes, state.upper_bound):
            if len(group) == 1 and (state.topic, state.partition, group[0].base_offset) not in changed:
                continue
            outputs.append(OutputSegment(state.topic, state.partition, tuple(s.base_offset for s in group),
                                         plan.now + config.delete_retention_ms,
                                         config.index_interval_bytes, aborted, nbytes=sum(s.size for s in group)))
    return outputs


# -- step 7: report -----------------------------------------------------------------------------------

def _segment_summaries(outcomes) -> list:
    """Per source segment below the upper bound, in one small collect: records per reason, the
    record bytes (their uncompressed spans) that go, whether any batch changes, and the ABORT
    markers whose `.txnindex` entry stays (data of their transaction is still in the log)."""
    from pyspark.sql import functions as F
    return (outcomes.groupBy("topic", "partition", "segment_base_offset")
            .agg(*[F.coalesce(F.sum(r), F.lit(0)).alias(r) for r in REASONS],
                 F.sum("bytes_removed").alias("bytes_removed"), F.max(_changes()).alias("changed"),
                 F.collect_list(F.when(F.col("keeps_txn_index_entry"), F.col("last_offset"))).alias("kept_txn_markers"))
            .collect())


def _partition_report(counts: list) -> list[dict]:
    """Per partition: records by reason, and the record bytes that go."""
    out: dict = {}
    for r in counts:
        entry = out.setdefault((r.topic, r.partition), {"topic": r.topic, "partition": r.partition,
                                                        **{k: 0 for k in REASONS}, "bytes_removed": 0})
        for k in REASONS:
            entry[k] += r[k]
        entry["bytes_removed"] += r.bytes_removed or 0
    return [out[k] for k in sorted(out)]


def _segment_report(counts: list, outputs: list[OutputSegment], written: list[OutputStats]) -> list[dict]:
    """Per output segment: its sources, records by reason, and (once written) records and file bytes
    in and out."""
    owner = {(o.topic, o.partition, b): o for o in outputs for b in o.bases}
    stats = {(w.topic, w.partition, w.base_offset): w.to_dict() for w in written}
    out = {}
    for o in outputs:
        key = (o.topic, o.partition, o.base_offset)
        out[key] = {"topic": o.topic, "partition": o.partition, "base_offset": o.base_offset,
                    "source_segments": len(o.bases), **{k: 0 for k in REASONS}}
        out[key].update({k: v for k, v in stats.get(key, {}).items() if k not in out[key]})
    for r in counts:
        o = owner.get((r.topic, r.partition, r.segment_base_offset))
        if o is not None:
            for k in REASONS:
                out[(o.topic, o.partition, o.base_offset)][k] += r[k]
    return [out[k] for k in sorted(out)]
