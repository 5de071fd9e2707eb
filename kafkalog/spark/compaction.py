"""Compaction with Kafka's semantics as a Spark plan (DESIGN.md, data flow of a compaction).

1. Inventory (driver): per compacted partition, `LogToClean` from metadata, index tails and
   producer state: the cleanable range, dirty ratio, active producers, aborted transactions.
2. Scan (executors): the batch view and the narrow record view of the segments to clean.
3. Decide: batch fates with Kafka's transaction tracker, one task per partition; the latest offset
   per key over the cleanable dirty range as a window over (topic, partition, key); record fates as
   column expressions, aggregated per batch as they leave the window. Only batches that change get a
   plan; the report's counts come from the same per-batch table.
4. Group (driver): source segments into output segments, as Kafka groups them.
5. Rewrite (executors): one task per output segment writes `.cleaned` files; untouched batches are
   copied byte for byte.
6. Commit (driver): the swap protocol per partition, then `cleaner-offset-checkpoint`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..codec.filter import BatchRetention
from ..config import ConfigResolver
from ..storage.cleaner import (BatchMeta, CleanedTransactionMetadata, LogToClean, decide_batch,
                               group_segments_by_size, log_to_clean)
from ..storage.logdir import LogDir, copy_log_dir
from ..storage.naming import CLEANER_OFFSET_CHECKPOINT, OFFSET_CHECKPOINT_FILES
from ..storage.swap import FaultHook, recover_partition
from .errors import raises_kafkalog_errors
from .rewrite import OutputSegment, OutputStats, swap_in, write_outputs
from .scan import narrow_scan, read_batches

log = logging.getLogger("kafkalog")

# One row per batch below the upper bound: its fate, and whether its ABORT marker keeps the
# transaction's .txnindex entry (data of the transaction is still in the log).
DECIDED_SCHEMA = ("topic string, partition int, segment_base_offset long, batch_position long, last_offset long, "
                  "record_count int, magic int, delete_horizon_ms long, retention string, discard_records boolean, marker_for_empty_txn boolean, "
                  "keeps_txn_index_entry boolean")
DECIDED_COLUMNS = [c.split()[0] for c in DECIDED_SCHEMA.split(", ")]
# The batch view's columns that Kafka's transaction tracker reads.
TRACKER_INPUTS = ("topic", "partition", "segment_base_offset", "batch_position", "base_offset", "last_offset",
                  "record_count", "producer_id", "producer_epoch", "is_transactional", "is_control", "control_type",
                  "delete_horizon_ms", "magic")
# The narrow view's columns that record fates, plans and the report read.
FATE_INPUTS = ("topic", "partition", "segment_base_offset", "batch_position", "offset", "key", "value_is_null",
               "record_span_size", "is_control", "delete_horizon_ms", "magic")
BATCH_KEYS = ("topic", "partition", "segment_base_offset", "batch_position")
REASONS = ("kept", "superseded", "tombstone_expired", "aborted_transaction", "marker_removed", "unkeyed")


@dataclass
class CompactionPlan:
    log_dir: str
    now: int
    logs: list[LogToClean] = field(default_factory=list)

    @property
    def chosen(self) -> list[LogToClean]:
        return [log for log in self.logs if log.eligible]

    def partitions(self) -> list[dict]:
        """Why each compacted partition was or was not chosen: the plan's partition table."""
        return [{"topic": s.topic, "partition": s.partition, "chosen": s.eligible, "reason": s.reason,
                 "first_dirty_offset": s.range.first_dirty, "first_uncleanable_offset": s.range.first_uncleanable,
                 "log_start_offset": s.log_start_offset, "log_end_offset": s.log_end_offset,
                 "last_stable_offset": s.last_stable_offset, "clean_bytes": s.stats.clean_bytes,
                 "cleanable_bytes": s.stats.cleanable_bytes, "dirty_ratio": round(s.stats.cleanable_ratio, 6),
                 "max_compaction_delay_secs": s.max_compaction_delay_ms // 1000} for s in self.logs]


def plan_compaction(log_dir: str, resolver: ConfigResolver, now: int, *, force: bool = False,
                    topics=None) -> CompactionPlan:
    """Step 1 for every partition whose cleanup.policy contains compact (driver, metadata only)."""
    opened = LogDir.open(log_dir)
    checkpoints = {name: opened.read_checkpoint(name) for name in OFFSET_CHECKPOINT_FILES}
    plan = CompactionPlan(log_dir, now)
    for topic, partition in opened.topic_partitions:
        config = resolver.for_topic(topic)
        if not config.compact or (topics and topic not in topics):
            continue
        part = opened.partition(topic, partition)
        part.ensure_settled()
        if part.segments:
            plan.logs.append(log_to_clean(part, checkpoints, config, now, force=force))
    return plan


# -- step 3: decide ------------------------------------------------------------------------------------

def _scan_scope(plan: CompactionPlan) -> dict:
    """What the scans must read: the chosen partitions below their first uncleanable offset (the
    joins that follow narrow it to exactly that; this prunes whole segments before they are opened)."""
    chosen = plan.chosen
    return {"topics": sorted({s.topic for s in chosen}), "partitions": sorted({s.partition for s in chosen}),
            "end_offset": max(s.upper_bound for s in chosen)}


def _batch_decisions(spark, plan: CompactionPlan):
    """Batch fates per partition with Kafka's transaction tracker (one task per partition)."""
    import pandas as pd
    from pyspark.sql import functions as F
    chosen = {(s.topic, s.partition): s for s in plan.chosen}
    params = spark.sparkContext.broadcast({tp: (s.aborted_txns, s.active_producers, s.upper_bound)
                                           for tp, s in chosen.items()})
    now = plan.now
    batches = read_batches(spark, plan.log_dir, **_scan_scope(plan))
    bounds = spark.createDataFrame([(t, p, s.upper_bound) for (t, p), s in chosen.items()],
                                   "topic string, partition int, upper_bound long")
    # Only the header fields the tracker reads are shuffled to it and converted to pandas.
    batches = (batches.join(bounds, ["topic", "partition"]).where(F.col("base_offset") < F.col("upper_bound"))
               .select(*TRACKER_INPUTS))

    def decide(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values("base_offset")
        topic, partition = pdf["topic"].iloc[0], int(pdf["partition"].iloc[0])
        aborted, active, upper = params.value[(topic, partition)]
        tracker = CleanedTransactionMetadata()
        tracker.add_aborted(aborted)
        rows = []
        for b in pdf.itertuples(index=False):
            control = None if pd.isna(b.control_type) else int(b.control_type)
            horizon = None if pd.isna(b.delete_horizon_ms) else int(b.delete_horizon_ms)
            meta = BatchMeta(int(b.base_offset), int(b.last_offset), int(b.producer_id), int(b.producer_epoch),
                             bool(b.is_transactional), bool(b.is_control), control)
            kept_before = len(tracker.kept_aborted)
            d = decide_batch(meta, tracker, delete_horizon_ms=horizon, active_producers=active, upper_bound=upper,
                             now=now)
            rows.append((topic, partition, int(b.segment_base_offset), int(b.batch_position), meta.last_offset,
                         int(b.record_count), int(b.magic), horizon, d.retention.value, d.discard_records,
                         d.contains_marker_for_empty_txn, len(tracker.kept_aborted) > kept_before))
        out = pd.DataFrame(rows, columns=DECIDED_COLUMNS)
        return out.astype({"delete_horizon_ms": "Int64"})  # nullable: most batches have no horizon

    decided = batches.groupBy("topic", "partition").applyInPandas(decide, DECIDED_SCHEMA)
    return decided


def _record_fates(spark, plan: CompactionPlan, decided):
    """Per record: retained or the reason it goes (spec §5.8), with the latest offset per key over the
    cleanable dirty range as a window. Not cached: `_batch_outcomes` is its one reader."""
    from pyspark.sql import Window, functions as F
    chosen = plan.chosen
    ranges = spark.createDataFrame(
        [(s.topic, s.partition, s.range.first_dirty, s.upper_bound, s.legacy_delete_horizon_ms) for s in chosen],
        "topic string, partition int, first_dirty long, upper_bound long, legacy_horizon long")
    segment_mtimes = spark.createDataFrame(
        [(s.topic, s.partition, seg.base_offset, seg.mtime_ms) for s in chosen for seg in s.segments],
        "topic string, partition int, segment_base_offset long, segment_mtime long")
    # Only the columns the decision needs travel through the shuffles, and the batch-level tables
    # are broadcast: the window over keys is then the one shuffle of the records.
    batch_fates = decided.select("topic", "partition", "segment_base_offset", "batch_position", "retention",
                                 "discard_records")
    records = (narrow_scan(spark, plan.log_dir, **_scan_scope(plan), columns=FATE_INPUTS)
               .join(F.broadcast(ranges), ["topic", "partition"]).where(F.col("offset") < F.col("upper_bound"))
               .join(F.broadcast(batch_fates), ["topic", "partition", "segment_base_offset", "batch_position"])
               .join(F.broadcast(segment_mtimes), ["topic", "partition", "segment_base_offset"]))
    in_map = (F.col("offset") >= F.col("first_dirty")) & F.col("key").isNotNull() & ~F.col("is_control") \
        & ~F.col("discard_records")
    # The window sorts every record by its partition columns, comparing rows by a prefix of the first
    # one: the key's hash first makes that prefix tell nearly all rows apart (the topic, or keys with
    # a common prefix, would leave almost every comparison to the whole row). The groups are the same.
    by_key = Window.partitionBy(F.xxhash64("key"), "topic", "partition", "key")
    latest = F.max(F.when(in_map, F.col("offset"))).over(by_key)
    retain_deletes = F.when(F.col("magic") >= 2, F.col("delete_horizon_ms").isNull()
                            | (F.lit(plan.now) < F.col("delete_horizon_ms"))) \
        .otherwise(F.col("segment_mtime") > F.col("legacy_horizon"))
    latest_or_none = F.coalesce(F.col("latest_offset"), F.lit(-1))
    reason = (F.when(F.col("discard_records"), F.when(F.col("is_control"), "marker_removed")
                     .otherwise("aborted_transaction"))
              .when(F.col("is_control"), "kept")
              .when(F.col("key").isNull(), "unkeyed")
              .when(F.col("offset") < latest_or_none, "superseded")
              .when(F.col("value_is_null") & ~F.col("retain_deletes"), "tombstone_expired")
              .otherwise("kept"))
    # retain_deletes before the window: its one column replaces four in the window's shuffle.
    return (records.withColumn("retain_deletes", retain_deletes).withColumn("latest_offset", latest)
            .withColumn("reason", reason)
            .select(*BATCH_KEYS, "offset", "value_is_null", "is_control", "record_span_size", "reason"))


def _batch_outcomes(fates, decided):
    """Per batch below the upper bound: its decision and what becomes of its records, in one
    aggregation of the record fates: the offsets that go, whether a kept tombstone needs a horizon,
    records per reason and the record bytes removed. Plans, changed segments and the report all
    come from this small table (a batch without records has nulls)."""
    from pyspark.sql import functions as F
    gone = F.col("reason") != "kept"
    kept_tombstone = ~gone & F.col("value_is_null") & ~F.col("is_control")
    # Past 128 groups (spark.sql.objectHashAggregate.sortBased.fallbackThreshold) collect_list's
    # aggregation sorts its rows by the grouping columns, comparing a prefix of the first: the batch
    # position tells rows apart, the topic would not.
    per_batch = fates.groupBy("batch_position", "segment_base_offset", "partition", "topic").agg(
        F.collect_list(F.when(gone, F.col("offset"))).alias("removed"),
        F.max(kept_tombstone).alias("has_tombstone"),
        F.sum(F.when(gone, F.col("record_span_size"))).alias("bytes_removed"),
        *[F.count(F.when(F.col("reason") == r, True)).alias(r) for r in REASONS])
    return decided.join(per_batch, list(BATCH_KEYS), "left")


def _batch_plans(outcomes):
    """One row per batch that changes: its retention, removed offsets and horizon needs."""
    from pyspark.sql import functions as F
    no_horizon = F.col("delete_horizon_ms").isNull() & (F.col("magic") >= 2)
    changes = ((F.col("retention") == BatchRetention.DELETE.value)
               | (F.size(F.coalesce(F.col("removed"), F.array())) > 0)
               | ((F.col("record_count") == 0) & (F.col("retention") == BatchRetention.DELETE_EMPTY.value))
               | ((F.coalesce(F.col("has_tombstone"), F.lit(False)) | F.col("marker_for_empty_txn")) & no_horizon))
    return outcomes.where(changes)


# -- steps 4-7 ----------------------------------------------------------------------------------------

@dataclass
class CompactionResult:
    plan: CompactionPlan
    report: list[dict]  # per partition: records and bytes by reason
    segments: list[dict] = field(default_factory=list)  # per output segment: records and bytes in and out
    outputs: dict = field(default_factory=dict)  # (topic, partition) -> base offsets of the written segments


@raises_kafkalog_errors
def compact(spark, log_dir: str, resolver: ConfigResolver, now: int, *, force: bool = False, topics=None,
            dry_run: bool = False, output: str | None = None, fault: FaultHook | None = None) -> CompactionResult:
    """One Kafka cleaning pass over every chosen partition of `log_dir`, in place with the swap protocol,
    or into `output`, a complete copy of `log_dir` that leaves it untouched. `fault` is a test hook
    called at each commit step (see kafkalog/storage/swap.py)."""
    if output and not dry_run:
        copy_log_dir(log_dir, output)
        log_dir = output
    opened = LogDir.open(log_dir)
    if not dry_run:
        opened.ensure_unlocked()
        for tp in opened.topic_partitions:
            if resolver.for_topic(tp[0]).compact:
                recover_partition(opened.fs, opened.partition_paths[tp])
    plan = plan_compaction(log_dir, resolver, now, force=force, topics=topics)
    if not plan.chosen:
        return CompactionResult(plan, [])
    log.info("compact: %d of %d compacted partitions chosen; deciding", len(plan.chosen), len(plan.logs))
    # Cached: the decisions feed both the record fates and the per-batch table, which every later
    # step reads; the records themselves are aggregated once, as they come out of the window.
    decided = _batch_decisions(spark, plan).cache()
    outcomes = _batch_outcomes(_record_fates(spark, plan, decided), decided).cache()
    try:
        plans = _batch_plans(outcomes)
        changed = {tuple(r) for r in plans.select("topic", "partition", "segment_base_offset").distinct().collect()}
        outputs = _output_segments(plan, resolver, _kept_txn_index_entries(outcomes), changed)
        counts = _segment_counts(outcomes)
        if dry_run:
            return CompactionResult(plan, _partition_report(counts), _segment_report(counts, outputs, []))
        log.info("compact: rewriting %d output segments on executors", len(outputs))
        written = write_outputs(spark, log_dir, outputs, plans)
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


def _fault(hook: FaultHook | None, step: str) -> None:
    if hook is not None:
        hook(step, "")


def _kept_txn_index_entries(outcomes) -> set[tuple]:
    """(topic, partition, marker offset) of the ABORT markers whose `.txnindex` entry stays."""
    rows = outcomes.where("keeps_txn_index_entry").select("topic", "partition", "last_offset").collect()
    return {(r.topic, r.partition, r.last_offset) for r in rows}


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
                                         config.index_interval_bytes, aborted))
    return outputs


# -- step 7: report -----------------------------------------------------------------------------------

def _segment_counts(outcomes) -> list:
    """Per source segment with records: records per reason and the record bytes (their uncompressed
    spans) that go. Small."""
    from pyspark.sql import functions as F
    records = sum(F.col(r) for r in REASONS)
    return (outcomes.groupBy("topic", "partition", "segment_base_offset")
            .agg(*[F.sum(r).alias(r) for r in REASONS], F.sum("bytes_removed").alias("bytes_removed"))
            .where(records > 0).collect())


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
