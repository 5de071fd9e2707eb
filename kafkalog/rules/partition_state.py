"""A partition's offsets as the broker that owned its log dir would load them: Kafka's UnifiedLog
view (log start offset, high watermark, last stable offset, log end offset) and its producer state.

The rules, restated from Kafka's UnifiedLog and Partition:
- the log start offset is the checkpointed one (`log-start-offset-checkpoint`), never below the
  first local segment's base offset, except for a tiered partition (`remote.storage.enable`), whose
  log start offset may lie in remote storage; its local log start offset is the first local segment's;
- the high watermark is the checkpointed one (`replication-offset-checkpoint`) kept between the log
  start offset and the log end offset (UnifiedLog.updateHighWatermark); a partition the checkpoint
  does not name is taken as wholly replicated (its log end offset), what a broker reaches once its
  followers catch up;
- the last stable offset is the first offset of the oldest open transaction, never past the high
  watermark.

No I/O: `partition_state` takes the replay of the partition's producer state (storage's
`replay_partition`, or one run on an executor) and the checkpointed values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    log_start_offset: int
    local_log_start_offset: int  # the first local segment's base offset (the log start when not tiered)
    log_end_offset: int
    high_watermark: int
    high_watermark_checkpointed: bool  # False: no checkpoint entry, the log end offset taken
    last_stable_offset: int
    producers: Any  # the ProducerStateManager at the log end offset

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition


def partition_state(
    part,
    replay: Callable[[Any], tuple[Any, int]],
    *,
    log_start_checkpoint: int | None = None,
    high_watermark_checkpoint: int | None = None,
    tiered: bool = False,
) -> PartitionState:
    """The state of `part` (a storage Partition: its topic, partition and segments) from `replay(part)`
    (producer state and log end offset) and the checkpointed offsets of it (None: not named)."""
    producers, log_end = replay(part)
    local_start = part.segments[0].base_offset if part.segments else log_end
    log_start = log_start_checkpoint if log_start_checkpoint is not None else local_start
    if not tiered:
        log_start = max(log_start, local_start)
    high_watermark = log_end if high_watermark_checkpoint is None else high_watermark_checkpoint
    high_watermark = min(max(high_watermark, log_start), log_end)
    unstable = producers.first_unstable_offset()
    return PartitionState(
        part.topic,
        part.partition,
        log_start,
        local_start,
        log_end,
        high_watermark,
        high_watermark_checkpoint is not None,
        high_watermark if unstable is None else min(unstable, high_watermark),
        producers,
    )
