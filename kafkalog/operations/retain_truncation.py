"""--truncate-below-start: the records below the log start offset leave the segment that holds it,
offsets preserved: the plan of each batch of that one segment, which retain_swap.py writes as a
`.cleaned` segment and swaps in."""

from __future__ import annotations

from dataclasses import dataclass

from ..codec.filter import BatchRetention
from ..errors import KafkaLogError
from ..storage.rewrite import BatchPlan
from ..storage.segment import LogSegment, locate


@dataclass
class TruncationPlan:
    """--truncate-below-start: the records below the log start offset leave the segment that holds
    the log start offset. Offsets are kept; batches of idempotent and transactional producers stay
    as empty batches (their producer state), markers stay, other batches below the start go. The
    batch that straddles the start is re-encoded with its own codec (a retained tombstone then gets
    the KIP-534 delete horizon, as Kafka's filterTo gives it)."""

    base_offset: int
    log_start_offset: int
    plans: dict[tuple[int, int], BatchPlan]
    records_removed: int = 0
    batches_dropped: int = 0
    batches_emptied: int = 0
    batches_reencoded: int = 0

    def to_dict(self) -> dict:
        return {
            "segment": self.base_offset,
            "belowOffset": self.log_start_offset,
            "recordsRemoved": self.records_removed,
            "batchesDropped": self.batches_dropped,
            "batchesEmptied": self.batches_emptied,
            "batchesReencoded": self.batches_reencoded,
        }


def plan_truncation(segment: LogSegment, log_start_offset: int) -> TruncationPlan | None:
    """The batch plans that remove every record below `log_start_offset` from `segment`; None when
    nothing is below it (a second run finds nothing)."""
    plan = TruncationPlan(segment.base_offset, log_start_offset, {})
    for position, batch in segment.batches():
        try:  # what is decoded here (a legacy wrapper's first offset, the straddling batch) is named in the file
            if not _plan_batch(plan, segment.base_offset, position, batch, log_start_offset):
                break
        except KafkaLogError as err:
            raise locate(err, segment.log_path, position, batch) from None
    return plan if plan.plans else None


def _plan_batch(plan: TruncationPlan, base: int, position: int, batch, log_start_offset: int) -> bool:
    """Add the plan of one batch of the segment at `base` to `plan`; False at the first batch at or
    above `log_start_offset` (nothing from there on is truncated)."""
    if batch.base_offset >= log_start_offset:
        return False
    v2_producer = batch.has_producer_id
    if batch.last_offset < log_start_offset:
        if batch.is_control or (v2_producer and batch.records_count == 0):
            return True  # a marker, or already an empty producer batch: no record data
        count = batch.records_count
        if v2_producer:
            every = frozenset(range(batch.base_offset, batch.last_offset + 1))
            plan.plans[(base, position)] = BatchPlan(BatchRetention.RETAIN_EMPTY, every)
            plan.batches_emptied += 1
        else:
            plan.plans[(base, position)] = BatchPlan(BatchRetention.DELETE)
            plan.batches_dropped += 1
        plan.records_removed += count
        return True
    # straddles the log start offset: keep the records at or above it
    if batch.is_control:
        return True
    batch.verify()  # the one batch decoded whole here: its damage stops the run
    below = frozenset(r.offset for r in batch.records() if r.offset < log_start_offset)
    if below:
        retention = BatchRetention.RETAIN_EMPTY if v2_producer else BatchRetention.DELETE_EMPTY
        plan.plans[(base, position)] = BatchPlan(retention, below)
        plan.batches_reencoded += 1
        plan.records_removed += len(below)
    return True
