"""Rewriting one batch with some of its records, as Kafka's MemoryRecords.filterTo does for its cleaner.

The caller decides which records stay and what happens to a batch left with none; this module
turns that decision into bytes: the original batch copied verbatim, a re-encoded batch (same base
offset and offset range, producer fields, codec and flags; the KIP-534 delete horizon installed
where a retained tombstone or an emptied transaction's marker needs one), a 61-byte empty batch, or
nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterator, Sequence, Set
from typing import Any, NamedTuple

import numpy as np

from ..errors import CorruptBatchError
from .batch import NO_TIMESTAMP, RecordBatch, TimestampType, build_batch, build_batch_of_section, build_empty_batch
from .legacy import build_legacy_batch
from .records import Record
from .splice import read_spans, splice

# Below this many records, decoding and encoding a batch costs less than the fixed numpy cost of a splice.
SPLICE_THRESHOLD = 16


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch, whatever its records
    DELETE_EMPTY = "delete_empty"  # keep it if a record survives
    RETAIN_EMPTY = "retain_empty"  # keep it, as an empty batch if no record survives


class Outcome(enum.Enum):
    VERBATIM = "verbatim"
    REENCODED = "reencoded"
    EMPTY = "empty"
    DROPPED = "dropped"


class FilteredBatch(NamedTuple):
    outcome: Outcome
    data: bytes  # empty when dropped
    horizon_set: bool


def filter_batch(
    batch,
    retained: Sequence[Record],
    *,
    retention: BatchRetention,
    delete_horizon_ms: int,
    contains_marker_for_empty_txn: bool = False,
    all_retained: bool | None = None,
    legacy_as_v2: bool = False,
) -> FilteredBatch:
    """Write `batch` keeping `retained` (its records, in order, some left out or changed).

    `delete_horizon_ms` (the pass's start time + delete.retention.ms) is installed on a v2 batch that
    keeps a tombstone, or is the marker of an emptied transaction, and has no horizon yet.
    `all_retained` spares a record count when the caller knows nothing was removed or changed.
    `legacy_as_v2` writes a legacy batch as v2 even when it keeps every record, as Kafka 4.x's cleaner
    does (its filterTo copies only v2 batches).
    A re-encoded CreateTime batch's max timestamp is its retained records' largest, as Kafka's
    MemoryRecords.filterTo sets it (the time index and offsetsForTimes read it)."""
    if retention is BatchRetention.DELETE:
        return FilteredBatch(Outcome.DROPPED, b"", False)
    if not retained:
        if retention is BatchRetention.RETAIN_EMPTY:
            return FilteredBatch(Outcome.EMPTY, _empty_like(batch), False)
        return FilteredBatch(Outcome.DROPPED, b"", False)
    v2 = isinstance(batch, RecordBatch)
    set_horizon = (
        (legacy_as_v2 if not v2 else not batch.has_delete_horizon)  # only a v2 batch has a horizon
        and (contains_marker_for_empty_txn or any(r.value is None for r in retained))
    )
    if all_retained is None:
        all_retained = len(retained) == batch.records_count
    # Kafka 4.x rewrites every legacy batch it visits as v2; before, only one whose inner messages
    # disagree with the wrapper's magic (KAFKA-4298)
    copyable = v2 or not (legacy_as_v2 or batch.has_inconsistent_inner_magic)
    if all_retained and copyable and not set_horizon:
        return FilteredBatch(Outcome.VERBATIM, batch.data, False)
    return FilteredBatch(
        Outcome.REENCODED,
        _reencode(batch, retained, delete_horizon_ms if set_horizon else None, legacy_as_v2),
        set_horizon,
    )


def _reencode(batch, retained: Sequence[Record], new_horizon_ms: int | None, legacy_as_v2: bool) -> bytes:
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    if not isinstance(batch, RecordBatch) and legacy_as_v2:
        return _legacy_as_v2(batch, retained, new_horizon_ms)
    if not isinstance(batch, RecordBatch):  # legacy: base and wrapper offset follow the retained records
        return build_legacy_batch(
            retained,
            magic=batch.magic,
            codec=batch.codec,
            timestamp_type=batch.timestamp_type,
            log_append_time=batch.max_timestamp if log_append else None,
        )
    horizon = new_horizon_ms if new_horizon_ms is not None else batch.delete_horizon_ms
    return build_batch(
        retained,
        log_append_time=batch.max_timestamp if log_append else None,
        delete_horizon_ms=horizon,
        **_kept_fields(batch),
    )


def _legacy_as_v2(batch, retained: Sequence[Record], horizon_ms: int | None) -> bytes:
    """What Kafka 4.x's MemoryRecords.buildRetainedRecordsInto writes for a legacy batch: one v2 batch
    of the retained records, based at the first of them (a legacy batch has no last offset delta to
    keep), in the batch's codec, with CreateTime for v0's absent timestamp type, no producer or leader
    epoch (a legacy batch has none), and the delete horizon of this pass if it keeps a tombstone."""
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        retained,
        codec=batch.codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=batch.max_timestamp if log_append else None,
        delete_horizon_ms=horizon_ms,
    )


def _kept_fields(batch: RecordBatch) -> dict:
    """What a rewritten v2 batch keeps of the original."""
    return dict(
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset_delta,
        codec=batch.codec,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
    )


class Offsets(Set):
    """Offsets of one batch's records (those that go), as a sorted int64 array: 8 bytes an offset where
    a frozenset of Python ints takes some 60, and a range's rewrite holds those of every changed batch
    of its range (millions where records are small) until it writes."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def __contains__(self, offset) -> bool:
        at = int(np.searchsorted(self.array, offset))
        return at < len(self.array) and self.array[at] == offset

    def __iter__(self) -> Iterator[int]:
        return iter(self.array.tolist())

    def __len__(self) -> int:
        return len(self.array)


def offsets_array(offsets: Collection[int]) -> np.ndarray:
    """`offsets` (an Offsets or any collection of ints) as an int64 array."""
    return offsets.array if isinstance(offsets, Offsets) else np.fromiter(offsets, np.int64, len(offsets))


class SpliceJob(NamedTuple):
    """A v2 batch that loses the records at offsets `removed` and keeps the others as they are."""

    batch: RecordBatch
    removed: Collection[int]
    retention: BatchRetention
    contains_marker_for_empty_txn: bool = False
    spans: Any = None  # int array: each record's span as the read that decided found it (or None)


def splice_batches(jobs: Sequence[SpliceJob], *, delete_horizon_ms: int) -> list[FilteredBatch | None]:
    """`filter_batch` for batches of one partition, without decoding a record: the retained
    records' bytes are reused (`splice.splice`), the batches read and written together, and the
    result is the same. None for a batch where that cannot be done (a small one, or one with a
    record not written as Kafka writes it): the caller decodes it and calls `filter_batch`."""
    out: list[FilteredBatch | None] = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        if job.retention is BatchRetention.DELETE:
            out[i] = FilteredBatch(Outcome.DROPPED, b"", False)
        elif job.batch.records_count >= SPLICE_THRESHOLD:
            todo.append(i)
    done = _splice([jobs[i] for i in todo], delete_horizon_ms) if todo else []
    if done is None:  # a record somewhere is not as Kafka writes it: each batch on its own
        done = [(_splice([jobs[i]], delete_horizon_ms) or [None])[0] for i in todo]
    for i, result in zip(todo, done):
        out[i] = result
    return out


def _splice(jobs: Sequence[SpliceJob], delete_horizon_ms: int) -> list | None:
    batches = [job.batch for job in jobs]
    appended = [b.timestamp_type == TimestampType.LOG_APPEND_TIME for b in batches]
    spans = read_spans(
        [b.records_section() for b in batches],
        [b.records_count for b in batches],
        [b.base_offset for b in batches],
        [b.base_timestamp for b in batches],
        [b.log_append_time for b in batches],
        None if any(job.spans is None for job in jobs) else np.concatenate([job.spans for job in jobs]),
    )
    if spans is None:
        return None
    removed = np.concatenate([offsets_array(job.removed) for job in jobs])  # unique in a partition
    keep = ~np.isin(spans.offset, removed)
    kept = np.add.reduceat(keep, spans.starts).tolist()
    keeps_null = np.logical_or.reduceat(keep & spans.null_value, spans.starts).tolist()
    kept_at = np.flatnonzero(keep)
    first = (
        spans.timestamp[kept_at[np.minimum(np.searchsorted(kept_at, spans.starts), len(kept_at) - 1)]]
        if len(kept_at)
        else spans.starts
    )
    largest = np.maximum.reduceat(np.where(keep, spans.timestamp, NO_TIMESTAMP), spans.starts).tolist()
    out: list[FilteredBatch | None] = [None] * len(jobs)
    horizons = {}  # batch index -> (whether its horizon is new, its horizon) of the batches written again
    bases = np.zeros(len(jobs), np.int64)
    for i, (job, batch) in enumerate(zip(jobs, batches)):
        set_horizon = not batch.has_delete_horizon and (job.contains_marker_for_empty_txn or keeps_null[i])
        if not kept[i]:
            out[i] = filter_batch(batch, [], retention=job.retention, delete_horizon_ms=delete_horizon_ms)
        elif kept[i] == batch.records_count and not set_horizon:
            out[i] = FilteredBatch(Outcome.VERBATIM, batch.data, False)
        else:
            horizon = delete_horizon_ms if set_horizon else batch.delete_horizon_ms
            bases[i] = horizon if horizon is not None else first[i]
            horizons[i] = set_horizon, horizon
    if not horizons:
        return out
    rewritten = np.zeros(len(jobs), bool)
    rewritten[list(horizons)] = True
    sections = splice(spans, keep & rewritten[spans.batch], bases)
    if sections is None:
        return None
    for i, (set_horizon, horizon) in horizons.items():
        batch = batches[i]
        max_timestamp = batch.max_timestamp if appended[i] else largest[i]
        data = build_batch_of_section(
            sections[i],
            kept[i],
            base_timestamp=int(bases[i]),
            max_timestamp=max_timestamp,
            has_delete_horizon=horizon is not None,
            **_kept_fields(batch),
        )
        out[i] = FilteredBatch(Outcome.REENCODED, data, set_horizon)
    return out


def _empty_like(batch) -> bytes:
    if not isinstance(batch, RecordBatch):
        # Kafka throws IllegalStateException here and the cleaning pass fails.
        raise CorruptBatchError(
            "empty batches are only supported for magic v2 and above: a legacy batch "
            "that must be retained lost all its records",
            position=batch.position,
            offset=batch.last_offset,
        )
    return build_empty_batch(
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset_delta,
        max_timestamp=batch.max_timestamp,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
    )
