"""The metadata records a broker replays from `__cluster_metadata-0` (storage/kraft.py `metadata_records`):
the latest snapshot's, then the log's from the snapshot's end offset, as KafkaRaftClient hands them to
a new listener. Hand-built metadata logs, and the real one of tests/fixtures/kraft-4.3.1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.control import ControlType
from kafkalog.codec.metadata_records import encode_metadata_record
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptSnapshotError, CrcMismatchError
from kafkalog.rules.replica_assignment import AssignmentReplay
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.kraft import metadata_records
from kafkalog.storage.partition import Partition

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kraft-4.3.1" / "log" / "__cluster_metadata-0"
A, B, C = "YWFhYWFhYWFhYWFhYWFhYQ", "YmJiYmJiYmJiYmJiYmJiYg", "Y2NjY2NjY2NjY2NjY2NjYw"


def metadata(kind: str, version: int = 0, **data) -> bytes:
    return encode_metadata_record(kind, version, data)


def topic(topic_id: str, name: str) -> bytes:
    return metadata("TopicRecord", name=name, topicId=topic_id)


def partition(topic_id: str, pid: int, replicas: list[int], directories: list[str]) -> bytes:
    return metadata(
        "PartitionRecord",
        1,
        partitionId=pid,
        topicId=topic_id,
        replicas=replicas,
        isr=replicas,
        removingReplicas=[],
        addingReplicas=[],
        leader=replicas[0],
        leaderEpoch=0,
        partitionEpoch=0,
        directories=directories,
    )


def batch(first_offset: int, *values: bytes, epoch: int = 1) -> bytes:
    """A KRaft data batch of `values` at consecutive offsets (null keys, as KRaft writes them)."""
    records = [Record(first_offset + i, 1_700_000_000_000, None, v) for i, v in enumerate(values)]
    return build_batch(records, partition_leader_epoch=epoch)


def control(offset: int, kind: ControlType) -> bytes:
    key = (0).to_bytes(2, "big") + int(kind).to_bytes(2, "big")
    return build_batch([Record(offset, 1_700_000_000_000, key, b"\x00\x00")], is_control=True)


def write_metadata_log(path: Path, segments: dict[int, list[bytes]], snapshots: dict[int, list[bytes]]) -> Path:
    """A `__cluster_metadata-0` at `path`: segments by base offset (their batches), and snapshots by
    end offset (their data records, between a header and a footer control batch)."""
    path.mkdir(parents=True, exist_ok=True)
    for base, batches in segments.items():
        (path / f"{base:020d}.log").write_bytes(b"".join(batches))
    for end, values in snapshots.items():
        body = control(0, ControlType.SNAPSHOT_HEADER) + batch(1, *values)
        (path / f"{end:020d}-{1:010d}.checkpoint").write_bytes(
            body + control(1 + len(values), ControlType.SNAPSHOT_FOOTER)
        )
    return path


def replayed(path: Path) -> dict:
    replay = AssignmentReplay()
    for _, offset, record in metadata_records(Partition.open(*LogFileSystem.for_path(str(path)))):
        replay.apply(offset, record)
    return {tp: a.replicas for tp, a in replay.assignments().items()}


def snapshot_and_log(path: Path) -> Path:
    """Offsets 0-4 make topics a (replicas [9]) and b, then delete b; the snapshot at 5 holds a with
    replicas [1, 2]; the log from 5 changes a's ISR and makes topic c."""
    return write_metadata_log(
        path,
        {
            0: [batch(0, topic(A, "a"), partition(A, 0, [9], [A]), topic(B, "b")), batch(3, partition(B, 0, [8], [B]))],
            4: [batch(4, metadata("RemoveTopicRecord", topicId=B))],
            5: [
                batch(5, metadata("PartitionChangeRecord", 0, partitionId=0, topicId=A, isr=[1])),
                batch(6, topic(C, "c"), partition(C, 0, [3], [C])),
            ],
        },
        {5: [topic(A, "a"), partition(A, 0, [1, 2], [A, B])]},
    )


def test_the_latest_snapshot_then_the_log_from_its_end(tmp_path):
    path = snapshot_and_log(tmp_path / "__cluster_metadata-0")
    records = list(metadata_records(Partition.open(*LogFileSystem.for_path(str(path)))))
    assert [(Path(f).name, o, r["type"]) for f, o, r in records] == [
        ("00000000000000000005-0000000001.checkpoint", 1, "TOPIC_RECORD"),
        ("00000000000000000005-0000000001.checkpoint", 2, "PARTITION_RECORD"),
        ("00000000000000000005.log", 5, "PARTITION_CHANGE_RECORD"),
        ("00000000000000000005.log", 6, "TOPIC_RECORD"),
        ("00000000000000000005.log", 7, "PARTITION_RECORD"),
    ]
    assert replayed(path) == {("a", 0): (1, 2), ("c", 0): (3,)}


def test_an_older_snapshot_is_not_the_one_read(tmp_path):
    path = snapshot_and_log(tmp_path / "__cluster_metadata-0")
    write_metadata_log(path, {}, {3: [topic(A, "a"), partition(A, 0, [7], [A])]})
    assert replayed(path) == {("a", 0): (1, 2), ("c", 0): (3,)}


def test_without_a_snapshot_the_whole_log_is_replayed(tmp_path):
    path = snapshot_and_log(tmp_path / "__cluster_metadata-0")
    (path / "00000000000000000005-0000000001.checkpoint").unlink()
    assert replayed(path) == {("a", 0): (9,), ("c", 0): (3,)}


def test_a_log_that_starts_after_the_snapshot_ends_is_refused(tmp_path):
    path = snapshot_and_log(tmp_path / "__cluster_metadata-0")
    for name in ("00000000000000000000.log", "00000000000000000004.log", "00000000000000000005-0000000001.checkpoint"):
        (path / name).unlink()
    with pytest.raises(CorruptSnapshotError, match="starts at offset 5 but there is no snapshot") as caught:
        replayed(path)
    assert Path(caught.value.file).name == "00000000000000000005.log"


def test_a_batch_whose_crc_does_not_match_is_refused_naming_its_file_position_and_offset(tmp_path):
    path = snapshot_and_log(tmp_path / "__cluster_metadata-0")
    log = path / "00000000000000000005.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF  # inside the second batch's last record
    log.write_bytes(bytes(data))
    with pytest.raises(CrcMismatchError) as caught:
        replayed(path)
    first = len(batch(5, metadata("PartitionChangeRecord", 0, partitionId=0, topicId=A, isr=[1])))
    assert (Path(caught.value.file).name, caught.value.position, caught.value.offset) == (log.name, first, 7)


def test_the_real_metadata_log_is_read_from_its_latest_snapshot(tmp_path):
    """Kafka 4.3.1 wrote two snapshots (ending at 18 and 21) and a log of offsets 0-21: what is read is
    the snapshot at 21 and the log's offset 21 (a BrokerRegistrationChangeRecord)."""
    records = list(metadata_records(Partition.open(*LogFileSystem.for_path(str(FIXTURE)))))
    sources = {(Path(f).name, o) for f, o, _ in records}
    assert {name for name, _ in sources} == {"00000000000000000021-0000000001.checkpoint", "00000000000000000012.log"}
    assert [o for name, o in sources if name.endswith(".log")] == [21]
    assert replayed(FIXTURE) == {("orders", 0): (1,), ("orders", 1): (1,)}
    copy = shutil.copytree(FIXTURE, tmp_path / "__cluster_metadata-0")
    for snapshot in copy.glob("*.checkpoint"):
        snapshot.unlink()
    assert replayed(copy) == {("orders", 0): (1,), ("orders", 1): (1,)}  # the whole log says the same
