"""A partition's offsets as the broker that owned its log dir would load them: Kafka's UnifiedLog
view (log start offset, high watermark, last stable offset, log end offset) and its producer state.

The rules, restated from Kafka's LogManager, LogLoader, UnifiedLog and Partition:
- the log start offset is the checkpointed one (`log-start-offset-checkpoint`, 0 when it names none),
  never below the first local segment's base offset, except for a tiered partition
  (`remote.storage.enable`), whose log start offset may lie in remote storage; its local log start
  offset is the first local segment's;
- the high watermark is the checkpointed one (`replication-offset-checkpoint`) kept between the log
  start offset and the log end offset (UnifiedLog.updateHighWatermark). A partition the checkpoint
  does not name is taken as wholly replicated (its log end offset), what a broker reaches once its
  followers catch up, or, as retention asks by default, as the broker loads it (0, raised to the log
  start offset);
- the last stable offset is the first offset of the oldest open transaction, never past the high
  watermark.

No I/O: `partition_state` takes the replay of the partition's producer state (storage's
`replay_partition`, or one run on an executor) and the checkpointed values (storage's
`OffsetCheckpoints.of`). A caller that knows the log end offset without a replay (retention reads
it from the last segment) hands it in, and the replay runs only if the producer state or the last
stable offset is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

# where a partition that replication-offset-checkpoint does not name has its high watermark
UNNAMED_AT_LOG_END, UNNAMED_AT_LOG_START = "log-end", "log-start"


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    log_start_offset: int
    local_log_start_offset: int  # the first local segment's base offset (the log start when not tiered)
    log_end_offset: int
    high_watermark: int
    high_watermark_checkpointed: bool  # False: no checkpoint entry, the log end (or start) offset taken
    replay: Callable[[], Any] = field(repr=False, compare=False)  # the producer state at the log end offset

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    @cached_property
    def producers(self) -> Any:
        """The ProducerStateManager at the log end offset, replayed once, when first asked for."""
        return self.replay()

    @cached_property
    def last_stable_offset(self) -> int:
        unstable = self.producers.first_unstable_offset()
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)


def loaded_log_start(checkpointed: int | None, local_start: int, *, tiered: bool = False) -> int:
    """The log start offset a broker loads (LogManager: the checkpoint's entry or 0; LogLoader: never
    below the first local segment's base offset `local_start`, but where remote storage holds more)."""
    start = checkpointed if checkpointed is not None else 0
    return start if tiered else max(start, local_start)


def partition_state(
    part,
    replay: Callable[[Any], tuple[Any, int]],
    *,
    log_start_checkpoint: int | None = None,
    high_watermark_checkpoint: int | None = None,
    tiered: bool = False,
    log_end_offset: int | None = None,
    unnamed_high_watermark: str = UNNAMED_AT_LOG_END,
) -> PartitionState:
    """The state of `part` (a storage Partition: its topic, partition and segments) from `replay(part)`
    (producer state and log end offset) and the checkpointed offsets of it (None: not named).
    `log_end_offset`: the log end offset when the caller has it (then `replay` runs only when the
    producer state is asked for); `unnamed_high_watermark`: UNNAMED_AT_LOG_END or UNNAMED_AT_LOG_START."""
    if unnamed_high_watermark not in (UNNAMED_AT_LOG_END, UNNAMED_AT_LOG_START):
        raise ValueError(f"unnamed_high_watermark {unnamed_high_watermark!r}")
    if log_end_offset is None:
        producers, log_end = replay(part)
        replayed = partial(_given, producers)  # partials of module functions: the state pickles
    else:
        log_end, replayed = log_end_offset, partial(_producers_of, replay, part)
    local_start = part.segments[0].base_offset if part.segments else log_end
    log_start = loaded_log_start(log_start_checkpoint, local_start, tiered=tiered)
    if high_watermark_checkpoint is not None:
        high_watermark = high_watermark_checkpoint
    else:
        high_watermark = log_end if unnamed_high_watermark == UNNAMED_AT_LOG_END else 0
    return PartitionState(
        part.topic,
        part.partition,
        log_start,
        local_start,
        log_end,
        min(max(high_watermark, log_start), log_end),
        high_watermark_checkpoint is not None,
        replayed,
    )


def _given(producers: Any) -> Any:
    return producers


def _producers_of(replay: Callable[[Any], tuple[Any, int]], part) -> Any:
    return replay(part)[0]
