"""Rewriting one batch with some of its records, as Kafka's MemoryRecords.filterTo does (spec §5.8, §5.9).

The caller decides which records stay and what happens to a batch left with none; this module
turns that decision into bytes: the original batch copied verbatim, a re-encoded batch (same base
offset and offset range, producer fields, codec and flags; the KIP-534 delete horizon installed
where a retained tombstone or an emptied transaction's marker needs one), a 61-byte empty batch, or
nothing.
"""
from __future__ import annotations

import enum
from typing import Collection, NamedTuple, Sequence

import numpy as np

from ..errors import CorruptBatchError
from .batch import NO_TIMESTAMP, RecordBatch, TimestampType, build_batch, build_batch_of_section, build_empty_batch
from .layout import read_spans, splice
from .legacy import build_legacy_batch
from .records import Record

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


def filter_batch(batch, retained: Sequence[Record], *, retention: BatchRetention, delete_horizon_ms: int,
                 contains_marker_for_empty_txn: bool = False, all_retained: bool | None = None,
                 keep_max_timestamp: bool = False) -> FilteredBatch:
    """Write `batch` keeping `retained` (its records, in order, some left out or changed).

    `delete_horizon_ms` (the pass's start time + delete.retention.ms) is installed on a v2 batch that
    keeps a tombstone, or is the marker of an emptied transaction, and has no horizon yet.
    `all_retained` spares a record count when the caller knows nothing was removed or changed.
    `keep_max_timestamp`: a re-encoded v2 batch keeps its max timestamp instead of taking its
    retained records' largest (producer state, which a reload takes from it, stays as it was)."""
    if retention is BatchRetention.DELETE:
        return FilteredBatch(Outcome.DROPPED, b"", False)
    if not retained:
        if retention is BatchRetention.RETAIN_EMPTY:
            return FilteredBatch(Outcome.EMPTY, _empty_like(batch), False)
        return FilteredBatch(Outcome.DROPPED, b"", False)
    v2 = isinstance(batch, RecordBatch)
    set_horizon = (v2 and not batch.has_delete_horizon
                   and (contains_marker_for_empty_txn or any(r.value is None for r in retained)))
    if all_retained is None:
        all_retained = len(retained) == batch.records_count
    consistent = v2 or not batch.has_inconsistent_inner_magic
    if all_retained and consistent and not set_horizon:
        return FilteredBatch(Outcome.VERBATIM, batch.data, False)
    return FilteredBatch(Outcome.REENCODED, _reencode(batch, retained, delete_horizon_ms if set_horizon else None,
                                                      keep_max_timestamp), set_horizon)


def _reencode(batch, retained: Sequence[Record], new_horizon_ms: int | None, keep_max_timestamp: bool) -> bytes:
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    if not isinstance(batch, RecordBatch):  # legacy: base and wrapper offset follow the retained records
        return build_legacy_batch(retained, magic=batch.magic, codec=batch.codec, timestamp_type=batch.timestamp_type,
                                  log_append_time=batch.max_timestamp if log_append else None)
    horizon = new_horizon_ms if new_horizon_ms is not None else batch.delete_horizon_ms
    return build_batch(retained, log_append_time=batch.max_timestamp if log_append else None, delete_horizon_ms=horizon,
                       max_timestamp=batch.max_timestamp if keep_max_timestamp else None, **_kept_fields(batch))


def _kept_fields(batch: RecordBatch) -> dict:
    """What a rewritten v2 batch keeps of the original."""
    return dict(base_offset=batch.base_offset, last_offset_delta=batch.last_offset_delta, codec=batch.codec,
                timestamp_type=batch.timestamp_type, partition_leader_epoch=batch.partition_leader_epoch,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                is_transactional=batch.is_transactional, is_control=batch.is_control)


def splice_batch(batch: RecordBatch, removed: Collection[int], *, retention: BatchRetention, delete_horizon_ms: int,
                 contains_marker_for_empty_txn: bool = False, keep_max_timestamp: bool = False) -> FilteredBatch | None:
    """`filter_batch` for a v2 batch that loses the records at offsets `removed` and keeps the others
    as they are, without decoding them: the retained records' bytes are reused (layout.splice) and
    the result is the same. None where that cannot be done (a record not written as Kafka writes
    it, a small batch): the caller decodes the batch and calls `filter_batch`."""
    if retention is BatchRetention.DELETE:
        return FilteredBatch(Outcome.DROPPED, b"", False)
    count = batch.records_count
    if count < SPLICE_THRESHOLD:
        return None
    section = batch.records_section()
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    spans = read_spans(section, count, batch.base_offset, batch.base_timestamp,
                       batch.max_timestamp if log_append else None)
    if spans is None:
        return None
    keep = np.fromiter([offset not in removed for offset in spans.offset.tolist()], bool, count)
    kept = int(np.count_nonzero(keep))
    if not kept:
        return filter_batch(batch, [], retention=retention, delete_horizon_ms=delete_horizon_ms)
    set_horizon = not batch.has_delete_horizon and (contains_marker_for_empty_txn or bool(spans.null_value[keep].any()))
    if kept == count and not set_horizon:
        return FilteredBatch(Outcome.VERBATIM, batch.data, False)
    horizon = delete_horizon_ms if set_horizon else batch.delete_horizon_ms
    base_timestamp = horizon if horizon is not None else int(spans.timestamp[keep][0])
    records = splice(section, spans, keep, base_timestamp)
    if records is None:
        return None
    largest = (batch.max_timestamp if log_append or keep_max_timestamp
               else max(NO_TIMESTAMP, int(spans.timestamp[keep].max())))
    data = build_batch_of_section(records, kept, base_timestamp=base_timestamp, max_timestamp=largest,
                                  has_delete_horizon=horizon is not None, **_kept_fields(batch))
    return FilteredBatch(Outcome.REENCODED, data, set_horizon)


def _empty_like(batch) -> bytes:
    if not isinstance(batch, RecordBatch):
        # Kafka throws IllegalStateException here and the cleaning pass fails.
        raise CorruptBatchError("empty batches are only supported for magic v2 and above: a legacy batch "
                                "that must be retained lost all its records", position=batch.position,
                                offset=batch.last_offset)
    return build_empty_batch(base_offset=batch.base_offset, last_offset_delta=batch.last_offset_delta,
                             max_timestamp=batch.max_timestamp, partition_leader_epoch=batch.partition_leader_epoch,
                             producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                             base_sequence=batch.base_sequence, timestamp_type=batch.timestamp_type,
                             is_transactional=batch.is_transactional, is_control=batch.is_control)
