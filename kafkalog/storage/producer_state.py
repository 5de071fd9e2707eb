"""Producer state replay, as a log reload computes it: last sequences per producer, open
and completed transactions, the last stable offset, and what goes into `.snapshot` and `.txnindex`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..codec.batch import NO_SEQUENCE, RecordBatch
from ..codec.control import ControlType, control_record
from ..rules.aborted_txn import AbortedTxn
from .segment import log_end_offset
from .snapshot import ProducerSnapshot, ProducerStateEntry

NUM_BATCHES_TO_RETAIN = 5  # Kafka remembers the last 5 batches of each producer for duplicate checks
NO_OFFSET = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class BatchMetadata(NamedTuple):
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def to_entry(self) -> ProducerStateEntry:
        last = self.batches[-1] if self.batches else None
        return ProducerStateEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_sequence=last.last_sequence if last else NO_SEQUENCE,
            last_offset=last.last_offset if last else NO_OFFSET,
            offset_delta=last.offset_delta if last else 0,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    @classmethod
    def from_entry(cls, entry: ProducerStateEntry) -> ProducerState:
        state = cls(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.timestamp,
            entry.current_txn_first_offset,
        )
        if entry.last_offset >= 0:
            state.batches.append(
                BatchMetadata(entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp)
            )
        return state

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:  # a new epoch starts a new sequence history
            self.batches.clear()
            self.producer_epoch = epoch


class ProducerStateManager:
    """Replays v2 batches in offset order. Legacy batches and batches without a producer id only
    advance the map end offset."""

    def __init__(self, map_end_offset: int = 0):
        self.producers: dict[int, ProducerState] = {}
        self.map_end_offset = map_end_offset

    @classmethod
    def from_snapshot(
        cls, snapshot: ProducerSnapshot, now: int | None = None, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> ProducerStateManager:
        """State as of the snapshot's offset; with `now`, producers already expired are skipped."""
        manager = cls(snapshot.offset)
        for entry in snapshot.entries:
            state = ProducerState.from_entry(entry)
            if now is None or not manager._is_expired(state, now, expiration_ms):
                manager.producers[state.producer_id] = state
        return manager

    # -- replay ---------------------------------------------------------------------------------
    def append(self, batch) -> CompletedTxn | None:
        """Apply one batch; returns the transaction an end marker completed, if any. As Kafka's
        ProducerAppendInfo.appendEndTxnMarker, a marker whose transaction has no data (none written,
        or all of it removed by the cleaner) completes none: it has no `.txnindex` entry and no
        effect on the last stable offset."""
        completed = None
        if isinstance(batch, RecordBatch) and batch.has_producer_id:
            if batch.is_control:
                completed = self._append_control(batch)
            else:
                self._append_data(batch)
        self.map_end_offset = batch.last_offset + 1
        return completed

    def _append_data(self, batch: RecordBatch) -> None:
        state = self.producers.get(batch.producer_id)
        if state is None:
            state = self.producers[batch.producer_id] = ProducerState(batch.producer_id, batch.producer_epoch)
        state._set_epoch(batch.producer_epoch)
        state.batches.append(
            BatchMetadata(
                batch.last_sequence, batch.last_offset, batch.last_offset - batch.base_offset, batch.max_timestamp
            )
        )
        state.last_timestamp = batch.max_timestamp
        if batch.is_transactional and state.current_txn_first_offset == NO_OFFSET:
            state.current_txn_first_offset = batch.base_offset

    def _append_control(self, batch: RecordBatch) -> CompletedTxn | None:
        marker = control_record(batch)
        if marker is None or marker.type not in (ControlType.ABORT, ControlType.COMMIT):
            return None  # an emptied control batch, or not a transaction marker: no producer state
        state = self.producers.get(batch.producer_id)
        if state is None:
            state = self.producers[batch.producer_id] = ProducerState(batch.producer_id, batch.producer_epoch)
        first = state.current_txn_first_offset
        state._set_epoch(batch.producer_epoch)
        assert marker.coordinator_epoch is not None  # an ABORT or COMMIT marker has one
        state.coordinator_epoch = marker.coordinator_epoch
        state.current_txn_first_offset = NO_OFFSET
        state.last_timestamp = marker.timestamp
        if first == NO_OFFSET:
            return None  # an empty transaction: Kafka emits no CompletedTxn for it
        return CompletedTxn(batch.producer_id, first, marker.offset, marker.type == ControlType.ABORT)

    # -- transactions -------------------------------------------------------------------------------
    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return {
            pid: s.current_txn_first_offset
            for pid, s in self.producers.items()
            if s.current_txn_first_offset != NO_OFFSET
        }

    def first_unstable_offset(self) -> int | None:
        firsts = self.open_transactions().values()
        return min(firsts) if firsts else None

    def aborted_txn(self, completed: CompletedTxn) -> AbortedTxn:
        """The `.txnindex` entry of an abort just applied. Its last stable offset is the first offset
        of the earliest other transaction still open, else the marker's offset + 1 (the marker only
        closed its own producer's transaction, so the others are as they were before it)."""
        others = [first for pid, first in self.open_transactions().items() if pid != completed.producer_id]
        lso = min(others) if others else completed.last_offset + 1
        return AbortedTxn(
            producer_id=completed.producer_id,
            first_offset=completed.first_offset,
            last_offset=completed.last_offset,
            last_stable_offset=lso,
        )

    # -- what the cleaner and snapshots need ---------------------------------------------------------
    def active_producers(self) -> dict[int, tuple[int, int]]:
        """producer id -> (last data offset or -1, epoch): `lastRecordsOfActiveProducers`."""
        return {pid: (s.last_data_offset, s.producer_epoch) for pid, s in self.producers.items()}

    def remove_expired(self, now: int, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producers = {pid: s for pid, s in self.producers.items() if not self._is_expired(s, now, expiration_ms)}

    @staticmethod
    def _is_expired(state: ProducerState, now: int, expiration_ms: int) -> bool:
        return state.current_txn_first_offset == NO_OFFSET and now - state.last_timestamp >= expiration_ms

    def snapshot(self) -> ProducerSnapshot:
        entries = [self.producers[pid].to_entry() for pid in sorted(self.producers)]
        return ProducerSnapshot(offset=self.map_end_offset, entries=entries)


def replay_partition(part) -> tuple[ProducerStateManager, int]:
    """Producer state at the log end offset of a storage Partition, and that offset: from the
    latest readable snapshot, replaying the batches after it (the whole log when there is none)."""
    from ..errors import CorruptSnapshotError

    manager, start = ProducerStateManager(part.segments[0].base_offset if part.segments else 0), None
    for offset in sorted(part.snapshots, reverse=True):
        try:
            snapshot = ProducerSnapshot.from_bytes(
                part.fs.read_bytes(part.snapshots[offset].path), offset, file=part.snapshots[offset].path
            )
        except CorruptSnapshotError:  # Kafka deletes it and falls back to the previous one
            continue
        manager, start = ProducerStateManager.from_snapshot(snapshot), offset
        break
    for seg in _segments_from(part, start):  # as Kafka's rebuildProducerState, from the snapshot's offset on
        # headers alone: a control batch, whose marker the replay reads, comes whole
        batches = seg.batches(headers_only=True) if start is None else seg.batches_from(start, headers_only=True)
        for _, batch in batches:
            if start is None or batch.last_offset >= start:
                manager.append(batch)
    return manager, max(log_end_offset(part.segments), start or 0)


def replay_bytes(part) -> int:
    """The `.log` bytes `replay_partition` reads of a storage Partition when its latest snapshot is
    readable (every segment when it has none): what a replay costs, from the listing and the last
    offset-index entry of the snapshot's segment (which its tail reads anyway), where the read starts
    when the snapshot is at or past it (a broker's snapshot at the log end, say). On a local disk a
    large batch's records are skipped, so that it costs less than the bytes say."""
    start = max(part.snapshots, default=None)
    segments = _segments_from(part, start)
    total = sum(seg.size for seg in segments)
    entry = segments[0].last_offset_index_entry if start is not None and segments else None
    return total - entry.position if entry is not None and entry.offset <= start else total


def _segments_from(part, offset: int | None) -> list:
    """The segments whose batches a replay from a snapshot at `offset` reads (None: every one): the
    one holding `offset` and those after it; the last always, for the log end offset."""
    segments = part.segments
    if offset is None:
        return list(segments)
    return [
        seg
        for seg, following in zip(segments, segments[1:] + [None])
        if following is None or following.base_offset > offset
    ]
