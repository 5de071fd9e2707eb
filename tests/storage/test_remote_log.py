"""The remote log of tiered partitions (storage/remote_log.py): Kafka's LocalTieredStorage layout and
`__remote_log_metadata`, on the files a real Kafka 4.3.1 broker wrote (tests/fixtures/tiered-4.3.1:
topic `tiered`, 40 records in local segments at 0, 14 and 28, the first two uploaded)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from kafkalog.codec.remote_log_metadata import decode_remote_log_metadata, remote_log_segments
from kafkalog.errors import KafkaLogError, LogDirError
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.remote_log import (
    RemoteLogView,
    RemoteStorage,
    open_remote_log,
    read_remote_log_metadata,
    tiered_segments,
    topic_id,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiered-4.3.1"


@pytest.fixture
def tiered(tmp_path) -> tuple[Path, Path]:
    """A copy of the fixture: (log dir, remote storage dir)."""
    shutil.copytree(FIXTURE, tmp_path / "t")
    return tmp_path / "t" / "log", tmp_path / "t" / "remote"


def _offsets(segments) -> list[int]:
    return [r.offset for s in segments for _, b in s.batches() for r in b.records()]


def test_layout_lists_the_uploaded_segments(tiered):
    log, remote = tiered
    for root in (remote, remote / "kafka-tiered-storage"):  # the `dir` setting, or the directory itself
        storage = RemoteStorage.open(str(root))
        assert list(storage.partition_paths) == [("tiered", 0)]
    part = storage.partition("tiered", 0, topic_id(LogDir.open(str(log)).partition("tiered", 0)))
    assert part is not None and part.topic_id == topic_id(LogDir.open(str(log)).partition("tiered", 0))
    assert [s.base_offset for s in part.segments] == [0, 14]
    assert part.highest_offset() == 27 and part.incomplete == []
    assert storage.partition("tiered", 0, "AAAAAAAAAAAAAAAAAAAAAA") is None
    # LocalTieredStorage copies the local segment as it is
    for segment in part.segments:
        local = log / "tiered-0" / f"{segment.base_offset:020d}.log"
        assert Path(segment.log_path).read_bytes() == local.read_bytes()
    assert _offsets(part.segments) == list(range(28))


def test_incomplete_fileset_is_not_a_segment(tiered):
    _, remote = tiered
    (snapshot,) = remote.glob("kafka-tiered-storage/*/00000000000000000014-*.snapshot")
    snapshot.unlink()  # the copy was interrupted before its last file
    part = RemoteStorage.open(str(remote)).partition("tiered", 0)
    assert [s.base_offset for s in part.segments] == [0]
    assert len(part.incomplete) == 4 and part.highest_offset() == 13


def test_files_outside_the_layout_are_refused(tiered):
    _, remote = tiered
    (tp_dir,) = (remote / "kafka-tiered-storage").iterdir()
    (tp_dir / "00000000000000000000.log").write_bytes(b"")
    with pytest.raises(LogDirError, match="not a remote segment file"):
        RemoteStorage.open(str(remote)).partition("tiered", 0)
    (remote / "kafka-tiered-storage" / "tiered-0").mkdir()
    with pytest.raises(LogDirError, match="not a remote partition directory"):
        RemoteStorage.open(str(remote))


def test_remote_and_local_segments_read_together_once(tiered):
    log, remote = tiered
    for base in (0, 14):  # what the broker's local retention deletes once they are uploaded
        for f in (log / "tiered-0").glob(f"{base:020d}.*"):
            f.unlink()
    local = LogDir.open(str(log)).partition("tiered", 0)
    part = RemoteStorage.open(str(remote)).partition("tiered", 0)
    merged = tiered_segments(part.segments, local.segments)
    assert [s.base_offset for s in merged] == [0, 14, 28]
    assert _offsets(merged) == list(range(40))
    # with every local segment still there, the overlap is read once, from the local copy
    full = LogDir.open(str(FIXTURE / "log")).partition("tiered", 0)
    assert _offsets(tiered_segments(part.segments, full.segments)) == list(range(40))
    assert all("kafka-tiered-storage" not in s.log_path for s in tiered_segments(part.segments, full.segments))


def test_remote_segment_running_into_the_local_log_is_refused(tiered):
    log, remote = tiered
    last_local = LogDir.open(str(log)).partition("tiered", 0).segments[-1]
    remote_part = RemoteStorage.open(str(remote)).partition("tiered", 0)
    inside = dataclasses.replace(last_local, base_offset=20)  # a local log starting inside [14, 27]
    with pytest.raises(KafkaLogError, match="inside the local log that starts at 20"):
        tiered_segments(remote_part.segments, [inside])


def test_highest_offset_from_metadata_layout_or_neither(tiered):
    log, remote = tiered
    log_dir = LogDir.open(str(log))
    part = log_dir.partition("tiered", 0)
    metadata = read_remote_log_metadata(log_dir)
    assert metadata is not None
    assert RemoteLogView(metadata).highest_offset(part) == 27
    assert open_remote_log(log_dir, str(remote)).highest_offset(part) == 27
    shutil.rmtree(log / "__remote_log_metadata-0")
    bare = LogDir.open(str(log))
    assert read_remote_log_metadata(bare) is None
    assert open_remote_log(bare).highest_offset(part) is None  # nothing known
    assert open_remote_log(bare, str(remote)).highest_offset(part) == 27


def test_metadata_wins_where_it_lists_the_partition(tiered):
    log, remote = tiered
    log_dir = LogDir.open(str(log))
    part = log_dir.partition("tiered", 0)
    storage = RemoteStorage.open(str(remote))
    values = [r.value for _, b in log_dir.partition("__remote_log_metadata", 0).batches() for r in b.records()]
    # the metadata recorded the first copy's start only: Kafka does not count the files as uploaded
    started = remote_log_segments(decode_remote_log_metadata(v) for v in values[:1])
    assert RemoteLogView(started, storage).highest_offset(part) == -1
    # metadata that does not list the partition (its records in another broker's log dir): the layout answers
    assert RemoteLogView({}, storage).highest_offset(part) == 27
    assert RemoteLogView({}).highest_offset(part) is None
