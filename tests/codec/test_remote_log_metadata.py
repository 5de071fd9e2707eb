"""`__remote_log_metadata` records (codec/remote_log_metadata.py), on the records a real Kafka 4.3.1
broker wrote (tests/fixtures/tiered-4.3.1) and on bytes derived from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkalog.codec.remote_log_metadata import (
    decode_remote_log_metadata,
    highest_uploaded_offset,
    remote_log_segments,
)
from kafkalog.errors import CorruptBatchError, TruncatedDataError, UnsupportedFormatError
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.partition import Partition

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiered-4.3.1"
REMOTE_DIR = FIXTURE / "remote" / "kafka-tiered-storage"


def _values() -> list[bytes]:
    fs, path = LogFileSystem.for_path(str(FIXTURE / "log" / "__remote_log_metadata-0"))
    return [r.value for _, b in Partition.open(fs, path).batches() for r in b.records()]


def _remote_files() -> dict[str, tuple[int, int]]:
    """segment id -> (start offset, .log size), from the remote storage's file names and sizes."""
    (tp_dir,) = REMOTE_DIR.iterdir()
    out = {}
    for f in tp_dir.glob("*.log"):
        start, segment_id = re.fullmatch(r"(\d+)-(.{22})\.log", f.name).groups()
        out[segment_id] = (int(start), f.stat().st_size)
    return out


def test_real_records_decode_as_the_broker_uploaded_them():
    records = [decode_remote_log_metadata(v) for v in _values()]
    assert [(r["type"], r["state"]) for r in records] == [
        ("RemoteLogSegmentMetadataRecord", "COPY_SEGMENT_STARTED"),
        ("RemoteLogSegmentMetadataUpdateRecord", "COPY_SEGMENT_FINISHED"),
    ] * 2
    (tp_dir,) = REMOTE_DIR.iterdir()
    topic, partition, topic_id = re.fullmatch(r"(.+)-(\d+)-(.{22})", tp_dir.name).groups()
    files = _remote_files()
    starts = [r["data"] for r in records if r["type"] == "RemoteLogSegmentMetadataRecord"]
    for data in starts:
        tip = data["remoteLogSegmentId"]["topicIdPartition"]
        assert (tip["name"], tip["partition"], tip["id"]) == (topic, int(partition), topic_id)
        # the id, start offset and size name the files LocalTieredStorage wrote
        assert files[data["remoteLogSegmentId"]["id"]] == (data["startOffset"], data["segmentSizeInBytes"])
        assert data["segmentLeaderEpochs"] == [{"leaderEpoch": 0, "offset": data["startOffset"]}]
        assert data["customMetadata"] is None
        assert "_unknownTaggedFields" not in data  # Kafka 4.3's txnIndexEmpty is known
        assert data["txnIndexEmpty"] is True  # no transactions were produced
    assert starts[0]["endOffset"] + 1 == starts[1]["startOffset"]


def test_replay_gives_the_uploaded_segments_and_the_highest_offset():
    segments = remote_log_segments(decode_remote_log_metadata(v) for v in _values())
    ((key, by_id),) = segments.items()
    assert {s.segment_id for s in by_id.values()} == set(_remote_files())
    assert all(s.state == "COPY_SEGMENT_FINISHED" for s in by_id.values())
    assert highest_uploaded_offset(by_id.values()) == max(s.end_offset for s in by_id.values()) == 27


def _with_state(value: bytes, state: int) -> bytes:
    """An update record with another state: the state is the int8 before the last (tagged fields) byte."""
    assert value[-1] == 0  # no tagged fields
    return value[:-2] + bytes([state, 0])


def test_replay_follows_deletion_states():
    values = _values()
    first_update = values[1]
    assert decode_remote_log_metadata(first_update)["type"] == "RemoteLogSegmentMetadataUpdateRecord"
    deleting = values + [_with_state(first_update, 2)]
    (by_id,) = remote_log_segments(decode_remote_log_metadata(v) for v in deleting).values()
    states = sorted((s.start_offset, s.state) for s in by_id.values())
    assert states == [(0, "DELETE_SEGMENT_STARTED"), (14, "COPY_SEGMENT_FINISHED")]
    assert highest_uploaded_offset(by_id.values()) == 27
    deleted = deleting + [_with_state(first_update, 3)]
    (by_id,) = remote_log_segments(decode_remote_log_metadata(v) for v in deleted).values()
    assert [s.start_offset for s in by_id.values()] == [14]
    # a copy that started but did not finish is not uploaded
    started_only = values[:1]
    (by_id,) = remote_log_segments(decode_remote_log_metadata(v) for v in started_only).values()
    assert highest_uploaded_offset(by_id.values()) == -1


@pytest.mark.parametrize(
    "mangle, error, text",
    [
        (lambda v: v[:-5], TruncatedDataError, "expected"),
        (lambda v: b"\x00" + v[1:], CorruptBatchError, "frame version is 0"),
        (lambda v: v[:1] + b"\x09" + v[2:], UnsupportedFormatError, "type 9 version 0"),
        (lambda v: v[:2] + b"\x01" + v[3:], UnsupportedFormatError, "version 1"),
        (lambda v: v[:-2] + b"\x07\x00", CorruptBatchError, "segment state 7"),
        (lambda v: v + b"\x00", CorruptBatchError, "left after the last field"),
    ],
)
def test_bytes_kafka_could_not_have_written_are_refused(mangle, error, text):
    update = _values()[1]
    with pytest.raises(error, match=text):
        decode_remote_log_metadata(mangle(update))


def test_null_value_is_refused():
    with pytest.raises(CorruptBatchError, match="null"):
        decode_remote_log_metadata(None)
