"""What `kafkalog validate` carries from batch to batch and segment to segment of one partition: a
replay of producer state (compared with the producer snapshots as the walk reaches their
offsets), the highest offset seen so far, and the batches' leader epochs (compared with the
leader-epoch-checkpoint).

The replay starts from the snapshot at the first segment's base offset when there is one, else
empty. Without that snapshot, and with a first segment above offset 0, history before the log
start is unknown (`complete` False): snapshot fields other than the last batch's are then not
compared.
"""

from __future__ import annotations

from bisect import bisect_right

from ..codec.batch import RecordBatch
from ..storage.checkpoint import EpochEntry
from ..storage.fs import FileEntry
from ..storage.producer_state import NO_OFFSET, ProducerStateManager
from ..storage.snapshot import ENTRY_SIZE as SNAPSHOT_ENTRY_SIZE
from ..storage.snapshot import HEADER_SIZE as SNAPSHOT_HEADER_SIZE
from ..storage.snapshot import ProducerSnapshot
from .validate_report import ERROR, INFO, WARNING, Findings

# without a complete replay: the fields of the producer's last batch, which the replay knows
_LAST_BATCH_FIELDS = ("producer_epoch", "last_sequence", "last_offset", "offset_delta", "timestamp")


class ReplayState:
    """Per partition: the producer-state replay, the offsets seen so far, the checks that span segments."""

    def __init__(
        self,
        manager: ProducerStateManager,
        complete: bool,
        snapshots: list[tuple[FileEntry, ProducerSnapshot]],
        epochs: list[EpochEntry] | None,
        epoch_file: str | None,
    ):
        self.manager = manager
        self.complete = complete  # the replay knows every transaction open at its start
        self.snapshots = snapshots  # to compare, ascending offset
        self.next_snapshot = 0
        self.seen_pids: set[int] = set()
        self.last_offset: int | None = None  # the highest last offset of any batch so far
        self.last_file: str | None = None
        self.epochs = epochs
        self.epoch_starts = [e.start_offset for e in epochs] if epochs else []
        self.epoch_file = epoch_file
        self.epoch_text = ""
        self.epoch_mismatches = 0
        self.epoch_first_mismatch: tuple | None = None
        self.log_start = 0
        self.compacted = False  # snapshots may describe batches the cleaner has since removed
        # compacted partitions only: where each producer's open transaction may have begun
        self.floor_default = -1  # below the first segment's base offset
        self.last_of_producer: dict[int, int] = {}  # last offset of the producer's latest batch
        self.txn_floor: dict[int, int] = {}  # producer -> last offset of its batch before its open transaction
        self._was_open = False

    def before_batch(self, pid: int) -> None:
        producer = self.manager.producers.get(pid)
        self._was_open = producer is not None and producer.current_txn_first_offset != NO_OFFSET

    def after_batch(self, pid: int, last: int) -> None:
        producer = self.manager.producers.get(pid)
        if not self._was_open and producer is not None and producer.current_txn_first_offset != NO_OFFSET:
            self.txn_floor[pid] = self.last_of_producer.get(pid, self.floor_default)
        self.last_of_producer[pid] = last

    def txn_start_cleaned(self, pid: int, stored: int, replayed: int) -> bool:
        """A snapshot's currentTxnFirstOffset `stored` below the replay's: the transaction's first
        batches were removed by the cleaner after the snapshot was taken (Kafka's cleaner keeps
        snapshots as they are, and a replay starts the transaction at its first batch left). It must
        still lie after the producer's previous batch, which is not part of the transaction."""
        floor = self.txn_floor.get(pid)
        return floor is not None and NO_OFFSET not in (stored, replayed) and floor < stored < replayed

    def check_epoch(self, batch, pos: int, path: str) -> None:
        """Count a v2 batch whose partitionLeaderEpoch is not the checkpoint's epoch for its offset
        (the first such batch is kept to name it); `finish_epochs` reports them."""
        if not self.epochs or not isinstance(batch, RecordBatch) or batch.partition_leader_epoch < 0:
            return
        if batch.last_offset < self.log_start:
            return  # below the log start: Kafka has truncated the epochs of that data from the cache
        offset = max(batch.base_offset, self.log_start)
        i = bisect_right(self.epoch_starts, offset) - 1
        expected = self.epochs[i].epoch if i >= 0 else None
        if expected != batch.partition_leader_epoch:
            self.epoch_mismatches += 1
            if self.epoch_first_mismatch is None:
                self.epoch_first_mismatch = (
                    offset,
                    batch.partition_leader_epoch,
                    "no epoch" if expected is None else f"epoch {expected}",
                    path,
                    pos,
                )


# -- producer snapshots --------------------------------------------------------------------------------


def compare_snapshots(findings: Findings, state: ReplayState, next_first_offset: int | None, deep: bool) -> None:
    """Compare the snapshots whose offset the replay has reached (every batch below it applied);
    `next_first_offset` None: the end of the log."""
    while state.next_snapshot < len(state.snapshots):
        entry, snap = state.snapshots[state.next_snapshot]
        if next_first_offset is not None and snap.offset > next_first_offset:
            return
        state.next_snapshot += 1
        if next_first_offset is None and state.last_offset is not None and snap.offset > state.last_offset + 1:
            continue  # above the log end: snapshot.range reports it
        if deep:
            _compare_snapshot(findings, state, entry, snap)


def _compare_snapshot(findings: Findings, state: ReplayState, entry: FileEntry, snap: ProducerSnapshot) -> None:
    in_snapshot = {e.producer_id: e for e in snap.entries}
    absent = []
    for pid in sorted(state.seen_pids):
        replayed = state.manager.producers.get(pid)
        if replayed is None:
            continue
        stored = in_snapshot.get(pid)
        if stored is None:
            absent.append(pid)
            continue
        expected = replayed.to_entry()
        findings.counts["snapshot_producers_compared"] += 1
        if not state.complete and expected.last_offset < 0:
            continue
        fields = _fields_to_compare(state, pid, stored, expected)
        diffs = [
            f"{f} {getattr(stored, f)} (replay: {getattr(expected, f)})"
            for f in fields
            if getattr(stored, f) != getattr(expected, f)
        ]
        if diffs:
            i = snap.entries.index(stored)
            findings.add(
                "snapshot.state",
                ERROR,
                f"producer {pid}: " + ", ".join(diffs),
                entry.path,
                SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * i,
                snap.offset,
            )
    if absent:
        shown = ", ".join(map(str, absent[:5])) + (", ..." if len(absent) > 5 else "")
        findings.add(
            "snapshot.producer_absent",
            INFO,
            f"{len(absent)} producers with batches below offset "
            f"{snap.offset} are not in the snapshot ({shown}): expired, as Kafka drops producers idle "
            "for producer.id.expiration.ms",
            entry.path,
            None,
            snap.offset,
        )


def _fields_to_compare(state: ReplayState, pid: int, stored, expected) -> list[str]:
    """The fields of a producer's snapshot entry `stored` that must equal the replay's `expected`."""
    fields = list(expected._fields if state.complete else _LAST_BATCH_FIELDS)
    if state.compacted and stored.last_offset > expected.last_offset:
        # the snapshot describes a batch the cleaner has since removed: it may only be ahead
        return [f for f in ("producer_epoch",) if getattr(stored, f) < getattr(expected, f)]
    if state.compacted or stored.timestamp > expected.timestamp:
        # a rewrite (the cleaner, a purge) sets a rewritten batch's max timestamp to its
        # kept records' largest; the snapshot keeps the one it had, as Kafka leaves it
        fields = [f for f in fields if f != "timestamp"]
    if (
        state.compacted
        and "current_txn_first_offset" in fields
        and state.txn_start_cleaned(pid, stored.current_txn_first_offset, expected.current_txn_first_offset)
    ):
        fields.remove("current_txn_first_offset")
    return fields


# -- leader epochs -----------------------------------------------------------------------------------


def finish_epochs(findings: Findings, state: ReplayState, log_end: int | None) -> None:
    """At the end of the partition: checkpoint entries above the log end, and the batches whose
    leader epoch disagrees with the checkpoint (one finding for all)."""
    if state.epochs and log_end is not None:
        for i, e in enumerate(state.epochs):
            if e.start_offset > log_end:
                findings.add(
                    "leader_epoch.range",
                    ERROR,
                    f"epoch {e.epoch} starts at {e.start_offset}, above the log "
                    f"end offset {log_end}: the log has lost data written in that epoch",
                    state.epoch_file,
                    _line_position(state.epoch_text, i + 2),
                    e.start_offset,
                )
    if state.epoch_mismatches and state.epoch_first_mismatch is not None:  # set with the first mismatch
        offset, epoch, expected, file, position = state.epoch_first_mismatch
        more = f" ({state.epoch_mismatches - 1} more batches disagree)" if state.epoch_mismatches > 1 else ""
        findings.add(
            "leader_epoch.batches",
            WARNING,
            f"the batch at offset {offset} ({file}, byte {position}) has partitionLeaderEpoch {epoch} but "
            f"the checkpoint gives {expected}{more}",
            state.epoch_file,
            None,
            offset,
        )


def _line_position(text: str, n: int) -> int | None:
    """The byte position of the 0-based line `n` of `text`."""
    position = 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if i == n:
            return position
        position += len(line.encode("utf-8"))
    return None
