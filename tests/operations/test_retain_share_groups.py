"""Consumed retention with share groups (KIP-932): a share partition's start offset, read from the log
dir's own `__share_group_state`, holds retention back exactly as a consumer group's committed offset
does. The share-state records are built by hand from the share coordinator's schemas
(tests/codec/test_message.py)."""

from __future__ import annotations

import base64
import shutil

import pytest

from kafkalog.codec.records import Record
from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate
from kafkalog.operations.retain import retain
from kafkalog.operations.retain_partition import read_committed_offsets
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.remote_log import topic_id

from ..codec.test_message import i16, i32, share_snapshot, string

CONSUMED = {
    "retention.ms": str(10 * 24 * 3600 * 1000),
    "retention.commitoffset.enable": "true",
    "retention.commitoffset.ms": "60000",
}


@pytest.fixture(scope="module")
def events_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("share") / "log"
    spec = GeneratorSpec(
        seed=5,
        topics=[TopicSpec("events", partitions=1, records=300, keys=20, batch_records=(1, 3), segment_bytes=2048)],
        consumer_offsets=None,  # the share group is the only group
    )
    summary = generate(str(root), spec)
    return root, summary


def _with_share_state(src, tmp_path, start_offset):
    """A copy of the log dir whose `__share_group_state-0` holds a ShareSnapshot of group "sg" for
    events-0 at `start_offset`."""
    root = tmp_path / "log"
    shutil.copytree(src, root)
    log_dir = LogDir.open(str(root))
    events_id = base64.urlsafe_b64decode(topic_id(log_dir.partition("events", 0)) + "==")
    key = i16(0) + string("sg", False) + events_id + i32(0)
    writer = PartitionWriter(LogFileSystem.for_path(str(root))[0], str(root), "__share_group_state", 0)
    writer.append_records([Record(-1, 0, key, share_snapshot(start_offset))])
    writer.close()
    return str(root)


def test_a_share_groups_start_offset_holds_retention_back_like_a_committed_offset(events_log, tmp_path):
    src, summary = events_log
    alone = _with_share_state(src, tmp_path / "a", 100)
    assert read_committed_offsets(LogDir.open(alone)).offsets == {("sg", "events", 0): 100}
    report = retain(alone, now_ms=summary.end_ms, config=CONSUMED, dry_run=True)
    plan = next(p for p in report.partitions if p.tp == ("events", 0))
    assert plan.consumed.applied and plan.consumed.groups == {"sg": 100}
    assert plan.deleted and all(d.segment.last_offset_or_below() < 100 for d in plan.deleted)
    # a share group further on lets more go, exactly as a consumer group's commit would
    further = _with_share_state(src, tmp_path / "b", 250)
    report = retain(further, now_ms=summary.end_ms, config=CONSUMED, dry_run=True)
    more = next(p for p in report.partitions if p.tp == ("events", 0))
    committed = {("sg", "events", 0): 250}
    given = retain(str(src), now_ms=summary.end_ms, config=CONSUMED, dry_run=True, committed_offsets=committed)
    same = next(p for p in given.partitions if p.tp == ("events", 0))
    assert len(more.deleted) > len(plan.deleted)
    assert [d.segment.base_offset for d in more.deleted] == [d.segment.base_offset for d in same.deleted]
