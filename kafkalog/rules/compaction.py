"""Kafka's Cleaner, record by record and batch by batch, as pure functions over Arrow columns.

Read next to Kafka's `Cleaner`: `decide_batches` is `cleanInto`'s batch loop (the transaction
tracker and `checkBatchRetention`, rules/cleaner.py), `record_fates` is `shouldRetainRecord` before
the offset map is asked, and `supersede` / `combine` are the offset map: a keyed record older than
its key's latest offset in the cleanable dirty range goes (or, under a KIP-280 strategy, of lower
precedence than its key's winner: rules/compaction_strategy.py). `partition_outcome` gathers a partition
read whole into what the rewrite and the report need. No I/O and no Spark: the Spark plumbing
(spark/compaction.py) and the one-task path both call these.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.batch import RECORD_BATCH_OVERHEAD
from ..codec.filter import BatchRetention, Offsets
from ..errors import KafkaLogError
from .cleaner import BatchMeta, CleanedTransactionMetadata, LogToClean, decide_batch
from .compaction_strategy import OFFSET, CompactionStrategy, superseded, versions

# -- the vocabulary -------------------------------------------------------------------------------------

# A record's fate as a small integer: fates travel through the window's shuffle, where a string per
# record would cost. The first three are keyed data records, in the offset map, whose fate the
# offset map may still turn into SUPERSEDED.
KEEP, KEEP_TOMBSTONE, EXPIRE_TOMBSTONE, CONTROL, MARKER, ABORTED, UNKEYED, SUPERSEDED = range(8)
# the report's reasons, and the fates each counts
FATES_OF = {
    "kept": (KEEP, KEEP_TOMBSTONE, CONTROL),
    "superseded": (SUPERSEDED,),
    "tombstone_expired": (EXPIRE_TOMBSTONE,),
    "aborted_transaction": (ABORTED,),
    "marker_removed": (MARKER,),
    "unkeyed": (UNKEYED,),
}
REASONS = tuple(FATES_OF)
GONE = np.array([f for r, fates in FATES_OF.items() if r != "kept" for f in fates], np.int8)


# -- the plan of a pass -----------------------------------------------------------------------------------


@dataclass
class CompactionPlan:
    """A cleaning pass, decided from metadata and handed down: the rest of the pass reads the
    segments listed here (`segments`, the opened partitions' LogSegments) and nothing else."""

    log_dir: str
    now: int
    root: str = ""  # the log directory as executors reach it
    is_local: bool = True
    logs: list[LogToClean] = field(default_factory=list)
    segments: dict[tuple[str, int], list] = field(default_factory=dict)  # storage LogSegments
    # (topic, partition) -> the error that makes it uncleanable: it cannot be read whole (KIP-346)
    uncleanable: dict[tuple[str, int], KafkaLogError] = field(default_factory=dict)
    # (topic, partition) -> why kafkalog never cleans it, whatever its configuration
    excluded: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def chosen(self) -> list[LogToClean]:
        return [log for log in self.logs if log.eligible and (log.topic, log.partition) not in self.uncleanable]

    def scanned(self, log: LogToClean | None = None) -> list:
        """The segments the scan reads: the chosen partitions' (or `log`'s) below their first
        uncleanable offset."""
        return [
            seg
            for s in (self.chosen if log is None else [log])
            for seg in self.segments[(s.topic, s.partition)]
            if seg.base_offset < s.upper_bound
        ]

    def mark_uncleanable(self, tp: tuple[str, int] | None, err: KafkaLogError) -> bool:
        """Make the chosen partition `tp` (the one whose file `err` names) uncleanable; False when
        it is none of the chosen."""
        if tp is None or tp not in {(s.topic, s.partition) for s in self.chosen}:
            return False
        self.uncleanable[tp] = err
        return True

    def partitions(self) -> list[dict]:
        """Why each compacted partition was or was not chosen: the plan's partition table."""
        rows: list[dict[str, Any]]
        rows = [
            {
                "topic": s.topic,
                "partition": s.partition,
                "chosen": s.eligible,
                "reason": s.reason,
                "first_dirty_offset": s.range.first_dirty,
                "first_uncleanable_offset": s.range.first_uncleanable,
                "log_start_offset": s.log_start_offset,
                "log_end_offset": s.log_end_offset,
                "last_stable_offset": s.last_stable_offset,
                "clean_bytes": s.stats.clean_bytes,
                "cleanable_bytes": s.stats.cleanable_bytes,
                "dirty_ratio": round(s.stats.cleanable_ratio, 6),
                "max_compaction_delay_secs": s.max_compaction_delay_ms // 1000,
                "compaction_strategy": str(s.strategy),
            }
            for s in self.logs
        ]
        planned = {(s.topic, s.partition) for s in self.logs}
        rows += [
            {"topic": t, "partition": p, "chosen": False, "reason": reason} for (t, p), reason in self.excluded.items()
        ]
        rows += [{"topic": t, "partition": p} for t, p in self.uncleanable if (t, p) not in planned]
        for row in rows:
            err = self.uncleanable.get((row["topic"], row["partition"]))
            if err is not None:
                row.update(chosen=False, reason=f"uncleanable: {err}")
        return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


# -- batches: the transaction tracker and checkBatchRetention -------------------------------------------

# One row per batch below the upper bound: its fate, and whether its ABORT marker keeps the
# transaction's .txnindex entry (data of the transaction is still in the log).
DECIDED = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segmentBaseOffset", pa.int64()),
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("size", pa.int32()),
        ("lastOffset", pa.int64()),
        ("count", pa.int32()),
        ("magic", pa.int8()),
        ("compresscodec", pa.int8()),
        ("deleteHorizonMs", pa.int64()),
        ("retention", pa.string()),
        ("discard_records", pa.bool_()),
        ("marker_for_empty_txn", pa.bool_()),
        ("keeps_txn_index_entry", pa.bool_()),
    ]
)


def decide_batches(
    headers: Iterable[pa.RecordBatch],
    log: LogToClean,
    numbers: dict[int, int],
    now: int,
) -> pa.RecordBatch:
    """The DECIDED rows of one partition's batches below its upper bound: `headers` are its batch
    headers (the scan's `batches` view) in offset order, `numbers` its segments' numbers by base
    offset. One tracker runs over them all, as Kafka's cleaner runs one over a cleaning pass."""
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted(log.aborted_txns)
    upper = log.upper_bound
    rows = []
    for batch in headers:
        c = batch.to_pydict()
        for i in range(batch.num_rows):
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
                meta,
                tracker,
                delete_horizon_ms=horizon,
                active_producers=log.active_producers,
                upper_bound=upper,
                now=now,
            )
            rows.append(
                (
                    log.topic,
                    log.partition,
                    c["segmentBaseOffset"][i],
                    numbers[c["segmentBaseOffset"][i]],
                    c["position"][i],
                    c["size"][i],
                    meta.last_offset,
                    c["count"][i],
                    c["magic"][i],
                    c["compresscodec"][i],
                    horizon,
                    d.retention.value,
                    d.discard_records,
                    d.contains_marker_for_empty_txn,
                    len(tracker.kept_aborted) > kept_before,
                )
            )
    columns = zip(*rows) if rows else [()] * len(DECIDED)
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, DECIDED)], schema=DECIDED)


# -- records: shouldRetainRecord before the offset map ----------------------------------------------------


@dataclass(frozen=True)
class SegmentFacts:
    """What the record fates read of a source segment and of its partition. Its own number and its
    partition's (`tp`) stand for the topic, partition and segment in the window's shuffle; `whole`:
    one task reads the whole partition."""

    tp: int
    number: int
    mtime_ms: int
    first_dirty: int
    upper_bound: int
    legacy_horizon_ms: int
    whole: bool
    strategy: CompactionStrategy = OFFSET


# `record_fates`' rows
FATES = pa.schema(
    [
        ("tp", pa.int32()),
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("recordSpanSize", pa.int32()),
        ("fate", pa.int8()),
        ("map_offset", pa.int64()),
        ("whole", pa.bool_()),
        ("rank", pa.int8()),
        ("version", pa.int64()),
        ("invalid_header", pa.bool_()),
    ]
)


def record_fates(batch: pa.RecordBatch, facts: SegmentFacts, discarded: Sequence[int], now: int) -> pa.RecordBatch:
    """The fates of one narrow Arrow batch's records below the upper bound, as Kafka's cleaner gives
    them before superseding: a record of a batch whose records all go (`discarded` positions) is an
    aborted record or a removed marker; a control record stays; an unkeyed one goes; a tombstone
    stays while its delete horizon (v2: the batch's; v0/v1: the segment's mtime against the
    partition's legacy horizon) is not past. `map_offset` is the offset of a keyed record in the
    cleanable dirty range, which supersedes older records of its key; `rank` and `version` the
    record's precedence under the partition's strategy, `invalid_header` a version header that is
    not 8 bytes (`versions`). The columns `combine` reads."""
    offset = batch["offset"].to_numpy()
    if offset.size and offset[-1] >= facts.upper_bound:  # offsets grow along a segment's rows
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
    rank, version, invalid = versions(batch, facts.strategy)
    invalid &= fate <= EXPIRE_TOMBSTONE  # counted where a version decides: keyed data records
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
            pa.array(rank),
            pa.array(version),
            pa.array(invalid),
        ],
        schema=FATES,
    )


# -- the offset map ----------------------------------------------------------------------------------------


def supersede(fates: pa.Table) -> np.ndarray:
    """The final fates of one whole partition's records (`record_fates` rows): a keyed record
    older than the latest `map_offset` of its key (under a KIP-280 strategy: of lower precedence
    than its key's winner) goes as SUPERSEDED. The keys are hashed once by Arrow (dictionary
    encoding) and the winners found in numpy over their codes (an Arrow group-by costs
    milliseconds a call before it reads a row: many small partitions). (A range of a partition is
    superseded with the partition's winners of keys won elsewhere by rules/ranges.range_fates.)"""
    fate = fates["fate"].to_numpy()
    if not len(fate):
        return fate.astype(np.int8)
    gone, _ = _superseded(fates, fate, np.zeros(len(fate), np.int64))
    return np.where(gone, np.int8(SUPERSEDED), fate).astype(np.int8)


def _superseded(fates: pa.Table, fate: np.ndarray, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`superseded` over `record_fates` rows of the partitions numbered `tp` (a key is its
    partition's): their keyed records that lose to their key's winner, and each row's key's latest
    offset in the map."""
    encoded = pc.dictionary_encode(fates["key"].combine_chunks())
    keyed = fate <= EXPIRE_TOMBSTONE
    map_offset = fates["map_offset"].fill_null(-1).to_numpy()
    # the codes of keyed rows are never null; the last code stands for null keys (never keyed rows)
    code = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy().astype(np.int64)
    group = code if not tp.any() else np.unique(tp * (len(encoded.dictionary) + 1) + code, return_inverse=True)[1]
    return superseded(
        group,
        keyed,
        keyed & (map_offset >= 0),
        fates["rank"].to_numpy(),
        fates["version"].to_numpy(),
        fates["offset"].to_numpy(),
    )


# What a scan task hands the window (`combine`): the records it cannot decide alone (key, offset,
# map_offset, fate, span; `solo` null) and runs of what it decided (offset null; a `solo` number
# of their own; the aggregates of the per-batch outcomes' first step).
COMBINED = pa.schema(
    [
        ("tp", pa.int32()),
        ("segment", pa.int32()),
        ("position", pa.int64()),
        ("run", pa.int64()),
        ("key", pa.binary()),
        ("offset", pa.int64()),
        ("map_offset", pa.int64()),
        ("rank", pa.int8()),
        ("version", pa.int64()),
        ("fate", pa.int8()),
        ("recordSpanSize", pa.int32()),
        ("solo", pa.int64()),
        ("bits", pa.int64()),
        ("has_tombstone", pa.bool_()),
        ("bytes_removed", pa.int64()),
        *[(r, pa.int64()) for r in REASONS],
        ("invalid_headers", pa.int64()),
    ]
)


def combine(table: pa.Table, split: set[int], solo: int) -> tuple[list[pa.RecordBatch], int]:
    """One chunk of a scan task's records (`record_fates` rows): the latest offset of each key among
    them, by pyarrow's hash aggregation (under a KIP-280 strategy, each key's winner among them, by
    `superseded`). A record older than that (that loses to it, where the key is in the chunk's map) is
    superseded whatever other chunks and tasks hold; the rows that leave for the window carry their
    key's latest offset in the chunk's map, so that the window knows the key is in a map. In a
    partition this task reads whole (`whole`) and this chunk holds whole (not in `split`), every
    record is decided. Decided records leave as runs of 64 offsets of a batch,
    aggregated, numbered from `solo`; the others (the latest of each key of a partition read by
    several tasks or chunks, and its records not superseded here) leave one by one for the window.
    Returns the batches (`COMBINED`) and the next free run number."""
    out: list[pa.RecordBatch] = []
    if pc.any(pc.not_equal(table["rank"], 0)).as_py() or pc.any(pc.not_equal(table["version"], 0)).as_py():
        fate = table["fate"].to_numpy()
        gone, latest = _superseded(table, fate, table["tp"].to_numpy().astype(np.int64))
        key_map_offset = pa.array(latest, mask=latest < 0)
    else:  # offset order alone: the latest offset per key by Arrow's hash aggregation
        keyed = pc.less_equal(table["fate"], EXPIRE_TOMBSTONE)
        aggregated = table.filter(keyed).group_by(["tp", "key"]).aggregate([("map_offset", "max")])
        table = table.join(aggregated, ["tp", "key"], join_type="left outer")
        key_map_offset = table["map_offset_max"].combine_chunks()
        fate = table["fate"].to_numpy()
        gone = (fate <= EXPIRE_TOMBSTONE) & (
            table["offset"].to_numpy() < table["map_offset_max"].fill_null(-1).to_numpy()
        )
    offset = table["offset"].to_numpy()
    is_keyed = fate <= EXPIRE_TOMBSTONE
    fate = np.where(gone, np.int8(SUPERSEDED), fate).astype(np.int8)
    invalid = table["invalid_header"].to_numpy(zero_copy_only=False)
    tps = table["tp"].to_numpy()
    whole = table["whole"].to_numpy() & ~np.isin(tps, list(split))
    undecided = is_keyed & ~gone & ~whole
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
                    key_map_offset.filter(pa.array(undecided)),
                    pending["rank"].combine_chunks(),
                    pending["version"].combine_chunks(),
                    pa.array(fate[undecided], pa.int8()),
                    pending["recordSpanSize"].combine_chunks(),
                    *[pa.nulls(n, f.type) for f in COMBINED][11:-1],
                    pa.array(invalid[undecided].astype(np.int64)),
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
    invalid = invalid[decided][order]
    tp, run = tps[decided][order], offset >> 6
    starts = np.flatnonzero(
        np.concatenate(
            [[True], (segment[1:] != segment[:-1]) | (position[1:] != position[:-1]) | (run[1:] != run[:-1])]
        )
    )
    gone = np.isin(fate, GONE)
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
                    for c in ("key", "offset", "map_offset", "rank", "version", "fate", "recordSpanSize")
                ],
                pa.array(solo + np.arange(n, dtype=np.int64)),
                pa.array(np.bitwise_or.reduceat(bits, starts).view(np.int64)),
                pa.array(np.logical_or.reduceat(fate == KEEP_TOMBSTONE, starts)),
                pa.array(removed, mask=~np.logical_or.reduceat(gone, starts)),  # null where nothing goes, as Spark sums
                *[
                    pa.array(np.add.reduceat(np.isin(fate, fates_).astype(np.int64), starts))
                    for fates_ in FATES_OF.values()
                ],
                pa.array(np.add.reduceat(invalid.astype(np.int64), starts)),
            ],
            schema=COMBINED,
        )
    )
    return out, solo + n


# -- the bytes a pass removes, as its decisions tell them -------------------------------------------------


def estimated_bytes_removed(size, count, magic, codec, retention, gone, gone_spans) -> np.ndarray:
    """Per batch (numpy arrays of DECIDED's columns, then its records that go and their spans in its
    decompressed records section), the `.log` bytes a pass removes, as a dry run can tell them before
    anything is written: all of a batch that goes (DELETE, or every record gone); all but the v2 header
    of one kept empty (RETAIN_EMPTY); the spans of the records an uncompressed v2 batch loses; a
    compressed or legacy batch's share of its records that go (how the rest compresses again is not
    known; legacy records have no spans). New delete horizons and `--legacy-as-v2` are not counted.
    Never negative, never more than the batch's size."""
    size = np.asarray(size, np.int64)
    count, gone = np.asarray(count, np.int64), np.asarray(gone, np.int64)
    retention = np.asarray(retention, object)
    v2 = np.asarray(magic) >= 2
    records = np.maximum(size - np.where(v2, RECORD_BATCH_OVERHEAD, 0), 0)
    emptied = gone >= count
    kept_empty = emptied & v2 & (retention == BatchRetention.RETAIN_EMPTY.value)
    whole = (retention == BatchRetention.DELETE.value) | (emptied & ~kept_empty)
    exact = v2 & (np.asarray(codec) == 0)
    share = np.where(exact, np.asarray(gone_spans, np.int64), records * gone // np.maximum(count, 1))
    return np.where(whole, size, np.where(kept_empty, records, np.clip(share, 0, records)))


# -- a partition read whole: what the rewrite and the report take ------------------------------------------


class BatchChange(NamedTuple):
    """A batch that changes (the rewrite's BatchPlan, in this module's terms)."""

    retention: BatchRetention
    removed: Collection[int]  # offsets of its records that go (codec.filter.Offsets)
    marker_for_empty_txn: bool
    has_tombstone: bool  # a record that stays is a tombstone (the batch gets a horizon if it has none)
    spans: Any = None  # its records' spans (int array), as the read that decided found them


@dataclass
class PartitionOutcome:
    """What one partition's pass comes to: the batches that change, by (segment base offset, file
    position), and per source segment the report's row (records per reason, the `.log` bytes that
    go as `estimated_bytes_removed` tells them, whether a batch changes, the ABORT markers whose
    `.txnindex` entry stays)."""

    changes: dict[tuple[int, int], BatchChange]
    segments: list[dict]

    @property
    def changed(self) -> set[int]:
        return {s["segmentBaseOffset"] for s in self.segments if s["changed"]}

    @property
    def kept_txn_markers(self) -> set[int]:
        return {o for s in self.segments for o in s["kept_txn_markers"]}


def partition_outcome(log: LogToClean, decided: pa.RecordBatch, fates: pa.Table, fate=None) -> PartitionOutcome:
    """The outcome of a partition whose batches (`decide_batches`) and records (`record_fates`, in
    file order) were all read by one task: the records superseded there (`supersede`; or of a
    range of it, their final `fate` given: rules/ranges.py), then aggregated per batch in numpy, as
    the Spark path aggregates them after its window. A batch changes when it goes, records of it
    go, or it is to gain a delete horizon."""
    fate = supersede(fates) if fate is None else fate
    gone = np.isin(fate, GONE)
    # each batch's records are one run of rows (the rows come in file order), keyed by segment and position
    run_key = (fates["segment"].to_numpy().astype(np.int64) << 40) | fates["position"].to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], run_key[1:] != run_key[:-1]]))[: len(run_key)]
    run_key = run_key[starts]

    def per_run(values: np.ndarray, reduce=np.add) -> list:
        return reduce.reduceat(values, starts).tolist() if len(starts) else []

    per_reason = {r: per_run(np.isin(fate, fates_).astype(np.int64)) for r, fates_ in FATES_OF.items()}
    has_tombstone = per_run(fate == KEEP_TOMBSTONE, np.logical_or)
    invalid_headers = per_run(fates["invalid_header"].to_numpy(zero_copy_only=False).astype(np.int64))
    gone_spans = np.append(per_run(np.where(gone, fates["recordSpanSize"].to_numpy().astype(np.int64), 0)), 0)
    gone_counts = np.append(per_run(gone.astype(np.int64)), 0)  # [-1]: a batch without records
    gone_ends = np.cumsum(gone_counts[:-1]).tolist()  # run i's gone offsets end there
    gone_offsets = fates["offset"].to_numpy()[gone]
    span_size = fates["recordSpanSize"].fill_null(-1).to_numpy().astype(np.int64)  # the splice's hint (codec/filter.py)
    run_ends = np.append(starts[1:], len(span_size)).tolist()
    run_starts = starts.tolist()
    # the batches of `decided` (every batch, with records or not) matched to their record runs
    d = decided.to_pydict()
    batch_key = (np.asarray(d["segment"], np.int64) << 40) | np.asarray(d["position"], np.int64)
    at = np.searchsorted(run_key, batch_key)
    found = at < len(run_key)
    found[found] = run_key[at[found]] == batch_key[found]
    runs = np.where(found, at, -1)
    removed_bytes = estimated_bytes_removed(
        d["size"], d["count"], d["magic"], d["compresscodec"], d["retention"], gone_counts[runs], gone_spans[runs]
    ).tolist()
    runs = runs.tolist()
    changes: dict[tuple[int, int], BatchChange] = {}
    segments: dict[int, dict] = {}
    for i, run in enumerate(runs):
        base, retention = d["segmentBaseOffset"][i], BatchRetention(d["retention"][i])
        row = segments.get(base)
        if row is None:
            row = segments[base] = {
                "topic": log.topic,
                "partition": log.partition,
                "segmentBaseOffset": base,
                **{r: 0 for r in REASONS},
                "bytes_removed": 0,
                "invalid_headers": 0,
                "changed": False,
                "kept_txn_markers": [],
            }
        removed: Collection[int] = frozenset()
        tombstone, spans = False, None
        if run >= 0:
            spans = span_size[run_starts[run] : run_ends[run]]
            for r in REASONS:
                row[r] += per_reason[r][run]
            row["invalid_headers"] += invalid_headers[run]
            tombstone = has_tombstone[run]
            removed = Offsets(gone_offsets[gone_ends[run - 1] if run else 0 : gone_ends[run]])
        row["bytes_removed"] += removed_bytes[i]
        marker = d["marker_for_empty_txn"][i]
        needs_horizon = (tombstone or marker) and d["deleteHorizonMs"][i] is None and d["magic"][i] >= 2
        if (
            retention is BatchRetention.DELETE
            or removed
            or (d["count"][i] == 0 and retention is BatchRetention.DELETE_EMPTY)
            or needs_horizon
        ):
            row["changed"] = True
            changes[base, d["position"][i]] = BatchChange(retention, removed, marker, tombstone, spans)
        if d["keeps_txn_index_entry"][i]:
            row["kept_txn_markers"].append(d["lastOffset"][i])
    return PartitionOutcome(changes, [segments[b] for b in sorted(segments)])
