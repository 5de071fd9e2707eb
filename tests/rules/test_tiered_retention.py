"""Retention of partitions with tiered storage (rules/retention.py), as UnifiedLog.deleteOldSegments
applies it when remote storage is enabled: local retention settings, only uploaded segments go, the
global log start offset stays."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafkalog.config import TopicConfig
from kafkalog.rules.retention import (
    LOCAL_SIZE_BREACH,
    LOCAL_TIME_BREACH,
    LOG_START_OFFSET_BREACH,
    TIME_BREACH,
    RemoteLog,
    delete_old_segments,
    effective_config,
    local_retention_bytes,
    local_retention_ms,
    remote_log_enabled,
)
from kafkalog.rules.segment_meta import SegmentMeta

NOW = 10_000_000
OLD = NOW - 1_000_000  # older than every retention below
TIERED = TopicConfig(retention_ms=-1, remote_storage_enable=True, local_retention_ms=1000)


def _segments(*bases: int, size: int = 100, ts: int = OLD) -> list[SegmentMeta]:
    return [SegmentMeta(b, size, ts) for b in bases]


def _run(config: TopicConfig, remote: RemoteLog | None, *, log_start: int = 0, hw: int = 40, segments=None):
    return delete_old_segments(
        segments or _segments(0, 10, 20, 30),
        config=config,
        log_start_offset=log_start,
        log_end_offset=40,
        high_watermark=hw,
        now_ms=NOW,
        remote=remote,
    )


def test_local_retention_settings_and_their_defaults():
    remote = RemoteLog(10)
    # -2 (the default) means the topic's retention.ms / retention.bytes
    plain = TopicConfig(retention_ms=5000, retention_bytes=300, remote_storage_enable=True)
    assert (local_retention_ms(plain, remote), local_retention_bytes(plain, remote)) == (5000, 300)
    own = replace(plain, local_retention_ms=7, local_retention_bytes=-1)
    assert (local_retention_ms(own, remote), local_retention_bytes(own, remote)) == (7, -1)
    # copying off (remote.log.copy.disable) or no remote log: the topic's retention
    for off in (None, RemoteLog(10, copy_enabled=False)):
        assert (local_retention_ms(own, off), local_retention_bytes(own, off)) == (5000, 300)


def test_only_uploaded_segments_go_and_the_log_start_offset_stays():
    out = _run(TIERED, RemoteLog(highest_offset=19))
    assert [(d.segment.base_offset, d.reason) for d in out.deleted] == [(0, LOCAL_TIME_BREACH), (10, LOCAL_TIME_BREACH)]
    assert [s.base_offset for s in out.segments] == [20, 30]
    assert out.log_start_offset == 0  # offsets 0..19 are still read from remote storage
    # one offset short of the second segment's end: only the first is uploaded wholly
    assert [d.segment.base_offset for d in _run(TIERED, RemoteLog(18)).deleted] == [0]


def test_nothing_uploaded_or_known_deletes_nothing_by_time_or_size():
    for config in (TIERED, replace(TIERED, local_retention_bytes=0)):
        out = _run(config, RemoteLog(-1))
        assert out.deleted == [] and out.log_start_offset == 0
    # without tiered storage the same topic would lose everything old
    assert len(_run(replace(TIERED, retention_ms=1000), None).deleted) == 4


def test_segments_below_the_log_start_offset_go_uploaded_or_not():
    out = _run(TIERED, RemoteLog(-1), log_start=25)
    assert [(d.segment.base_offset, d.reason) for d in out.deleted] == [
        (0, LOG_START_OFFSET_BREACH),
        (10, LOG_START_OFFSET_BREACH),
    ]
    assert out.log_start_offset == 25


def test_local_retention_bytes():
    config = replace(TIERED, local_retention_ms=-1, local_retention_bytes=150)
    out = _run(config, RemoteLog(39))
    # 400 bytes, 150 kept: 250 over, two whole segments of 100 go (the active one never: not uploaded)
    assert [(d.segment.base_offset, d.reason) for d in out.deleted] == [(0, LOCAL_SIZE_BREACH), (10, LOCAL_SIZE_BREACH)]
    assert out.log_start_offset == 0


def test_the_high_watermark_still_bounds_deletion():
    out = _run(TIERED, RemoteLog(39), hw=15)
    assert [d.segment.base_offset for d in out.deleted] == [0]


def test_copy_disabled_applies_topic_retention_and_moves_the_log_start_offset():
    config = replace(TIERED, retention_ms=1000, local_retention_ms=50, remote_log_copy_disable=True)
    out = _run(config, RemoteLog(-1, copy_enabled=False))
    assert [(d.segment.base_offset, d.reason) for d in out.deleted][:3] == [
        (0, TIME_BREACH),
        (10, TIME_BREACH),
        (20, TIME_BREACH),
    ]
    assert out.log_start_offset == 40  # rolled: every segment was old


@pytest.mark.parametrize(
    "topic, config, enabled",
    [
        ("orders", TopicConfig(remote_storage_enable=True), True),
        ("orders", TopicConfig(), False),
        ("orders", TopicConfig(remote_storage_enable=True, cleanup_policy=("compact", "delete")), False),
        ("__consumer_offsets", TopicConfig(remote_storage_enable=True), False),
        ("__remote_log_metadata", TopicConfig(remote_storage_enable=True), False),
        ("__cluster_metadata", TopicConfig(remote_storage_enable=True), False),
    ],
)
def test_which_topics_have_a_remote_log(topic, config, enabled):
    assert remote_log_enabled(config, topic) is enabled


def test_remote_log_metadata_topic_is_kept_forever_unless_configured():
    broker_default = TopicConfig(retention_ms=604_800_000)
    assert effective_config(broker_default, "__remote_log_metadata", {}).retention_ms == -1
    explicit = TopicConfig(retention_ms=1000)
    assert effective_config(explicit, "__remote_log_metadata", {"retention.ms": "1000"}).retention_ms == 1000
    assert effective_config(broker_default, "orders", {}).retention_ms == 604_800_000
