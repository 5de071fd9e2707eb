"""A topic's effective configuration, as Kafka's `LogConfig` instance holds it: one attribute per
definition of `KEYS`, whose default it takes from there (written once, in definitions.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .definitions import KEYS, attr_name, format_value


def default(name: str) -> Any:
    """The default of configuration `name`, as KEYS defines it."""
    return KEYS[name].default


@dataclass(frozen=True)
class TopicConfig:
    """The effective configuration of one topic; attribute names are Kafka's with '_' for '.'.

    `segment_bytes` is the segment size Kafka uses (LogConfig.segmentSize()): internal.segment.bytes
    when that is set, else segment.bytes."""

    cleanup_policy: tuple = default("cleanup.policy")
    retention_ms: int = default("retention.ms")
    retention_bytes: int = default("retention.bytes")
    segment_bytes: int = default("segment.bytes")
    internal_segment_bytes: int | None = default("internal.segment.bytes")
    segment_ms: int = default("segment.ms")
    segment_jitter_ms: int = default("segment.jitter.ms")
    segment_index_bytes: int = default("segment.index.bytes")
    index_interval_bytes: int = default("index.interval.bytes")
    min_cleanable_dirty_ratio: float = default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = default("max.compaction.lag.ms")
    delete_retention_ms: int = default("delete.retention.ms")
    file_delete_delay_ms: int = default("file.delete.delay.ms")
    max_message_bytes: int = default("max.message.bytes")
    message_timestamp_type: str = default("message.timestamp.type")
    compression_type: str = default("compression.type")
    preallocate: bool = default("preallocate")
    producer_id_expiration_ms: int = default("producer.id.expiration.ms")
    retention_commitoffset_enable: bool = default("retention.commitoffset.enable")
    retention_commitoffset_ms: int = default("retention.commitoffset.ms")
    remote_storage_enable: bool = default("remote.storage.enable")
    remote_log_copy_disable: bool = default("remote.log.copy.disable")
    local_retention_ms: int = default("local.retention.ms")
    local_retention_bytes: int = default("local.retention.bytes")
    compaction_strategy: str = default("compaction.strategy")
    compaction_strategy_header: str = default("compaction.strategy.header")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def get(self, name: str):
        return getattr(self, attr_name(name))

    def as_properties(self) -> dict[str, str]:
        return {name: format_value(KEYS[name], self.get(name)) for name in KEYS if self.get(name) is not None}


# one attribute per definition, no more and no fewer (a definition added without its attribute, or the
# reverse, fails on import rather than at the first topic that sets it)
assert [f.name for f in dataclasses.fields(TopicConfig)] == [attr_name(n) for n in KEYS], "TopicConfig != KEYS"
