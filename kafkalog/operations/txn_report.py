"""What an operator needs to know about a partition's transactions before compacting it:
the transactions still open, the hanging ones among them, the last stable offset and the producer
holding it, the transactions that ended with no data, and the aborted ones.

Open transactions and the last stable offset are what a broker computes when it loads the log
(`replay_partition`: the latest snapshot, then the batches after it). Ended transactions come from a
replay of the whole log, seeded from the snapshot at the first segment's base offset when there is
one, so that a transaction begun below the first segment keeps its first offset.

A transaction is hanging when it is open and `now - lastTimestamp > transaction.max.timeout.ms`,
where lastTimestamp is the producer's latest append: the rule of `kafka-transactions.sh
find-hanging`. No transaction can legitimately stay open that long, since the coordinator aborts
it after at most transaction.max.timeout.ms; a hanging one holds the last stable offset, and with it
READ_COMMITTED consumers and the cleaner, until it is aborted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..codec.batch import RecordBatch
from ..codec.control import ControlType, control_record
from ..errors import CorruptSnapshotError
from ..rules.partition_state import PartitionState, partition_state
from ..storage.logdir import LogDir, OffsetCheckpoints
from ..storage.partition import Partition
from ..storage.producer_state import ProducerStateManager, replay_partition
from ..storage.snapshot import ProducerSnapshot

DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000  # the broker's transaction.max.timeout.ms (15 minutes)


@dataclass(frozen=True)
class OpenTxn:
    """A transaction with data in the log and no marker yet."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    last_timestamp: int  # the producer's latest append
    age_ms: int  # now - last_timestamp
    hanging: bool

    def to_dict(self) -> dict:
        return {
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "firstOffset": self.first_offset,
            "lastTimestamp": self.last_timestamp,
            "ageMs": self.age_ms,
            "hanging": self.hanging,
        }


@dataclass(frozen=True)
class EndedTxn:
    """A transaction its COMMIT or ABORT marker ended. `first_offset` is the replay's: the marker's own
    offset when the replay knows no data of it. `data_batches` counts its data batches in the log."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    marker_offset: int
    aborted: bool
    data_batches: int

    @property
    def empty(self) -> bool:
        """No data before the marker: nothing was written, or the cleaner removed all of it."""
        return self.first_offset == self.marker_offset

    def to_dict(self) -> dict:
        return {
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "firstOffset": self.first_offset,
            "lastOffset": self.marker_offset,
            "marker": "ABORT" if self.aborted else "COMMIT",
            "dataBatches": self.data_batches,
            "dataInLog": self.data_batches > 0,
        }


@dataclass
class PartitionTxnReport:
    topic: str
    partition: int
    log_end_offset: int
    high_watermark: int
    high_watermark_source: str  # "checkpoint" (replication-offset-checkpoint) or "logEnd"
    last_stable_offset: int
    open: list[OpenTxn] = field(default_factory=list)
    ended: list[EndedTxn] = field(default_factory=list)

    @property
    def blocking(self) -> OpenTxn | None:
        """The open transaction that holds the last stable offset below the high watermark."""
        first = min(self.open, key=lambda t: t.first_offset, default=None)
        return first if first is not None and first.first_offset < self.high_watermark else None

    @property
    def hanging(self) -> list[OpenTxn]:
        return [t for t in self.open if t.hanging]

    @property
    def aborted(self) -> list[EndedTxn]:
        return [t for t in self.ended if t.aborted]

    @property
    def empty(self) -> list[EndedTxn]:
        return [t for t in self.ended if t.empty]

    @property
    def committed(self) -> int:
        return sum(not t.aborted for t in self.ended)

    @property
    def has_transactions(self) -> bool:
        return bool(self.open or self.ended)

    def summary(self) -> dict:
        """One line of counts, for a table."""
        blocking = self.blocking
        return {
            "topic": self.topic,
            "partition": self.partition,
            "lastStableOffset": self.last_stable_offset,
            "highWatermark": self.high_watermark,
            "blockingProducerId": "" if blocking is None else blocking.producer_id,
            "open": len(self.open),
            "hanging": len(self.hanging),
            "aborted": len(self.aborted),
            "empty": len(self.empty),
            "committed": self.committed,
        }

    def to_dict(self) -> dict:
        blocking = self.blocking
        return {
            "topic": self.topic,
            "partition": self.partition,
            "logEndOffset": self.log_end_offset,
            "highWatermark": self.high_watermark,
            "highWatermarkSource": self.high_watermark_source,
            "lastStableOffset": self.last_stable_offset,
            "blockingProducerId": None if blocking is None else blocking.producer_id,
            "committed": self.committed,
            "open": [t.to_dict() for t in self.open],
            "aborted": [t.to_dict() for t in self.aborted],
            "empty": [t.to_dict() for t in self.empty],
        }


@dataclass
class TxnReport:
    now_ms: int
    transaction_max_timeout_ms: int
    partitions: list[PartitionTxnReport] = field(default_factory=list)

    @property
    def hanging(self) -> list[tuple[PartitionTxnReport, OpenTxn]]:
        return [(p, t) for p in self.partitions for t in p.hanging]

    def to_dict(self) -> dict:
        return {
            "nowMs": self.now_ms,
            "transactionMaxTimeoutMs": self.transaction_max_timeout_ms,
            "hanging": len(self.hanging),
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass
class TxnReportPlan:
    """The partitions a transaction report reads (each opened as the run reaches it) and their
    checkpointed offsets, from one listing of the log dir (`plan_txn_report`)."""

    log_dir: LogDir
    topic_partitions: list[tuple[str, int]]
    checkpoints: OffsetCheckpoints
    now_ms: int
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS


def plan_txn_report(
    log_dir: LogDir,
    *,
    now_ms: int,
    topics: Iterable[str] | None = None,
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
) -> TxnReportPlan:
    """The partitions of the opened `log_dir` (of `topics`, each refused when it has none here) and
    the checkpoint files read once."""
    log_dir.check_topics(topics)
    wanted = set(topics) if topics else None
    selected = [tp for tp in log_dir.topic_partitions if wanted is None or tp[0] in wanted]
    return TxnReportPlan(log_dir, selected, log_dir.offset_checkpoints(), now_ms, transaction_max_timeout_ms)


def run_txn_report(plan: TxnReportPlan) -> TxnReport:
    """The transactions of every partition of the plan."""
    report = TxnReport(plan.now_ms, plan.transaction_max_timeout_ms)
    for tp in plan.topic_partitions:
        part = plan.log_dir.partition(*tp)
        part.ensure_settled()  # the live files of a half-swapped partition may not be its log
        # a checkpoint ahead of the log (data lost since) cannot make unwritten offsets stable
        state = partition_state(part, replay_partition, **plan.checkpoints.of(tp))
        report.partitions.append(partition_txn_report(part, state, plan.now_ms, plan.transaction_max_timeout_ms))
    return report


def txn_report(
    log_dir: str | LogDir,
    *,
    now_ms: int,
    topics: Iterable[str] | None = None,
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
) -> TxnReport:
    """The transactions of every partition of `log_dir` (a path, URI or LogDir), or of `topics`:
    `run_txn_report` of `plan_txn_report`."""
    log = log_dir if isinstance(log_dir, LogDir) else LogDir.open(log_dir)
    plan = plan_txn_report(log, now_ms=now_ms, topics=topics, transaction_max_timeout_ms=transaction_max_timeout_ms)
    return run_txn_report(plan)


def partition_txn_report(
    part: Partition,
    state: PartitionState,
    now_ms: int,
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
) -> PartitionTxnReport:
    """The transactions of `part`, whose offsets and producer state are `state`."""
    manager = state.producers
    source = "checkpoint" if state.high_watermark_checkpointed else "logEnd"
    report = PartitionTxnReport(
        part.topic, part.partition, state.log_end_offset, state.high_watermark, source, state.last_stable_offset
    )
    for pid, first in sorted(manager.open_transactions().items(), key=lambda item: item[1]):
        producer = manager.producers[pid]
        age = now_ms - producer.last_timestamp
        report.open.append(
            OpenTxn(
                pid,
                producer.producer_epoch,
                first,
                producer.last_timestamp,
                age,
                hanging=age > transaction_max_timeout_ms,
            )
        )
    report.ended = ended_transactions(part)
    return report


def ended_transactions(part: Partition) -> list[EndedTxn]:
    """Every transaction a marker in the log ended, in marker order, with its data batches in the log."""
    manager = _replay_start(part)
    data_batches: dict[int, int] = {}  # producer id -> data batches of its current transaction
    ended = []
    for segment in part.segments:
        for _, batch in segment.batches(headers_only=True):  # a marker comes whole
            if not isinstance(batch, RecordBatch) or not batch.has_producer_id:
                continue  # legacy and non-idempotent batches have no transactions
            if batch.is_transactional and not batch.is_control:
                data_batches[batch.producer_id] = data_batches.get(batch.producer_id, 0) + 1
            completed = manager.append(batch)
            if completed is not None:
                ended.append(
                    EndedTxn(
                        completed.producer_id,
                        batch.producer_epoch,
                        completed.first_offset,
                        completed.last_offset,
                        completed.is_aborted,
                        data_batches.pop(completed.producer_id, 0),
                    )
                )
            elif batch.is_control:  # a marker completes no transaction when the replay knows no data of it
                marker = control_record(batch)
                if marker is not None and marker.type in (ControlType.ABORT, ControlType.COMMIT):
                    ended.append(
                        EndedTxn(
                            batch.producer_id,
                            batch.producer_epoch,
                            marker.offset,
                            marker.offset,
                            marker.type == ControlType.ABORT,
                            data_batches.pop(batch.producer_id, 0),
                        )
                    )
    return ended


def _replay_start(part: Partition) -> ProducerStateManager:
    """Producer state at the first segment's base offset: its snapshot, else nothing known (as for
    Kafka, a corrupt snapshot counts as none)."""
    base = part.segments[0].base_offset if part.segments else 0
    entry = part.snapshots.get(base)
    if entry is not None:
        try:
            snapshot = ProducerSnapshot.from_bytes(part.fs.read_bytes(entry.path), base, file=entry.path)
            return ProducerStateManager.from_snapshot(snapshot)
        except CorruptSnapshotError:
            pass
    return ProducerStateManager(base)
