"""Writing one output segment of a rewrite (compaction, purge, record-level retention) from its
source segments, staged under `.cleaned` names for the swap protocol.

The decide step hands over a `BatchPlan` only for batches that change; every other batch is copied
byte for byte without being decoded. Changed batches are decoded, filtered and re-encoded with
their own codec (codec/filter.py); so is every legacy batch when it is to be written as v2.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import tuning
from ..codec.batch import RecordBatch
from ..codec.filter import BatchRetention, FilteredBatch, Outcome, SpliceJob, filter_batch, splice_batches
from ..codec.records import Record
from ..errors import KafkaLogError
from ..rules.aborted_txn import AbortedTxn
from .fs import LogFileSystem
from .naming import segment_file_name
from .segment import LogSegment, locate
from .segment_writer import SegmentWriter, WrittenSegment
from .swap import SEGMENT_KINDS

CLEANED = ".cleaned"


class BatchPlan(NamedTuple):
    """What happens to one batch: which records go or change, and whether it stays when none is left."""

    retention: BatchRetention
    removed: Collection[int] = frozenset()  # offsets of the records that go (a frozenset, or codec.filter.Offsets)
    marker_for_empty_txn: bool = False  # a marker whose transaction has no data left (gets a horizon)
    has_tombstone: bool = False  # a retained record is a tombstone (gets a horizon if it has none)
    tombstoned: frozenset = frozenset()  # offsets of records that stay as tombstones: value and headers dropped
    redacted: frozenset = frozenset()  # offsets of records that stay with no key, value or headers
    spans: Any = None  # int array: each record's span as the read that decided found it (the splice's hint)

    @property
    def changes_records(self) -> bool:
        return bool(self.removed or self.tombstoned or self.redacted)

    def apply(self, records: Sequence[Record]) -> list[Record]:
        """The records that stay, as they stay."""
        out = []
        for r in records:
            if r.offset in self.removed:
                continue
            if r.offset in self.tombstoned:
                r = r._replace(value=None, headers=())
            elif r.offset in self.redacted:
                r = r._replace(key=None, value=None, headers=())
            out.append(r)
        return out


@dataclass
class RewriteStats:
    batches: Counter = field(default_factory=Counter)  # by Outcome value
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    horizons_set: int = 0


def rewrite_segments(
    fs: LogFileSystem,
    partition_dir: str,
    sources: Sequence[LogSegment],
    plans: Mapping[tuple[int, int], BatchPlan],
    *,
    delete_horizon_ms: int,
    index_interval_bytes: int,
    aborted_txns: Sequence[AbortedTxn] = (),
    suffix: str = CLEANED,
    legacy_as_v2: bool = False,
) -> tuple[WrittenSegment, RewriteStats]:
    """Write the output segment based at `sources[0].base_offset`. `plans` is keyed by
    (source segment base offset, file position of the batch). `aborted_txns` are the transactions
    whose `.txnindex` entries survive; those whose marker lands in this segment are indexed.
    `legacy_as_v2` writes every legacy batch as v2, planned or not (codec/filter.py).
    The output's mtime is the last source segment's, as Kafka's cleaner sets it."""
    stats = RewriteStats()
    writer = SegmentWriter(
        fs, partition_dir, sources[0].base_offset, index_interval_bytes=index_interval_bytes, suffix=suffix
    )
    with writer:
        for source in sources:
            for window in _windows(source.batches()):
                window_plans = [plans.get((source.base_offset, position)) for position, _ in window]
                spliced = _splice(window, window_plans, delete_horizon_ms)
                for (position, batch), plan, done in zip(window, window_plans, spliced):
                    try:
                        data, outcome, horizon = _apply(batch, plan, done, delete_horizon_ms, stats, legacy_as_v2)
                    except KafkaLogError as err:
                        raise locate(err, source.log_path, position, batch) from None
                    stats.batches[outcome.value] += 1
                    stats.bytes_in += batch.size
                    stats.horizons_set += horizon
                    if data:
                        writer.append(data)
                        stats.bytes_out += len(data)
        end = writer.next_offset
        for txn in aborted_txns:
            if writer.base_offset <= txn.last_offset < end:
                writer.append_aborted_txn(txn)
        return writer.close(mtime_ms=sources[-1].mtime_ms), stats


def remove_staged(fs: LogFileSystem, partition_dir: str, base_offset: int, suffix: str = CLEANED) -> None:
    """Delete whatever `rewrite_segments` staged for the output segment at `base_offset`."""
    for kind in SEGMENT_KINDS:
        path = fs.join(partition_dir, segment_file_name(base_offset, kind + suffix))
        if fs.exists(path):
            fs.delete(path)


def _windows(batches):
    """Lists of up to tuning.SPLICE_WINDOW_BATCHES consecutive (position, batch) pairs."""
    size = tuning.SPLICE_WINDOW_BATCHES
    window = []
    for item in batches:
        window.append(item)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def _splice(window, plans, delete_horizon_ms: int) -> list:
    """The window's batches that only lose records, spliced together (codec/filter.py); None for the others."""
    jobs, where = [], []
    for i, ((_, batch), plan) in enumerate(zip(window, plans)):
        if _reads_records(batch, plan) and isinstance(batch, RecordBatch) and not (plan.tombstoned or plan.redacted):
            jobs.append(SpliceJob(batch, plan.removed, plan.retention, plan.marker_for_empty_txn, plan.spans))
            where.append(i)
    out: list[FilteredBatch | None] = [None] * len(window)
    try:
        done = splice_batches(jobs, delete_horizon_ms=delete_horizon_ms)
    except KafkaLogError:  # a batch that cannot be read: the batch-by-batch path names it
        return out
    for i, result in zip(where, done):
        out[i] = result
    return out


def _reads_records(batch, plan: BatchPlan | None) -> bool:
    """Whether a batch's records must be read: some go or change, it gains a horizon, or it is empty."""
    if plan is None or plan.retention is BatchRetention.DELETE:
        return False
    needs_horizon = (plan.marker_for_empty_txn or plan.has_tombstone) and not batch.has_delete_horizon
    return plan.changes_records or needs_horizon or batch.records_count == 0


def _apply(
    batch,
    plan: BatchPlan | None,
    spliced: FilteredBatch | None,
    delete_horizon_ms: int,
    stats: RewriteStats,
    legacy_as_v2: bool,
):
    count = batch.records_count
    stats.records_in += count
    convert = legacy_as_v2 and not isinstance(batch, RecordBatch)
    if plan is None and not convert:  # untouched: copied, never decoded
        stats.records_out += count
        return batch.data, Outcome.VERBATIM, False
    plan = plan or BatchPlan(BatchRetention.DELETE_EMPTY)
    if plan.retention is BatchRetention.DELETE:
        return b"", Outcome.DROPPED, False
    if not (convert or _reads_records(batch, plan)):
        stats.records_out += count
        return batch.data, Outcome.VERBATIM, False
    if spliced is not None:
        stats.records_out += RecordBatch(spliced.data).records_count if spliced.data else 0
        return spliced.data, spliced.outcome, spliced.horizon_set
    records = batch.records()
    retained = plan.apply(records) if plan.changes_records else records
    out = filter_batch(
        batch,
        retained,
        retention=plan.retention,
        delete_horizon_ms=delete_horizon_ms,
        contains_marker_for_empty_txn=plan.marker_for_empty_txn,
        all_retained=retained == records,
        legacy_as_v2=legacy_as_v2,
    )
    stats.records_out += len(retained) if out.data else 0
    return out.data, out.outcome, out.horizon_set
