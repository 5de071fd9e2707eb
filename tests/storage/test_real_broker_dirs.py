"""Every index, snapshot and checkpoint file that real brokers wrote must parse, and indexes rebuilt
from the .log batch headers must agree with the broker's (fixtures/real/broker-dirs, see its README).

Batch headers are decoded here with `struct` only (offset, length, magic, last offset delta, max
timestamp, leader epoch), independently of kafkalog's codec.
"""

import struct
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

import pytest

from kafkalog.storage.checkpoint import (
    epochs_from_batches,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
    truncate_epochs_from_end,
)
from kafkalog.storage.index import OffsetIndex, TimeIndex, build_indexes
from kafkalog.storage.naming import (
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from kafkalog.storage.snapshot import ProducerSnapshot

BROKER_DIRS = Path("/work/shared/fixtures/real/broker-dirs")
pytestmark = pytest.mark.skipif(not BROKER_DIRS.is_dir(), reason="real broker fixtures are not available")

# Log dirs (`log.dirs` roots); kafka-0.8-v0.golden holds expected decoded text, not broker files.
LOG_DIRS = sorted(d for d in BROKER_DIRS.iterdir() if d.is_dir() and not d.name.endswith(".golden"))
BROKER_FILES = {"meta.properties", ".lock", *OFFSET_CHECKPOINT_FILES}
PARTITION_FILES = {LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA}


def _partition_dirs() -> list[Path]:
    return sorted(p for log_dir in LOG_DIRS for p in log_dir.iterdir() if p.is_dir())


def _segment_files(kind: str) -> list[Path]:
    return [
        f
        for d in _partition_dirs()
        for f in sorted(d.iterdir())
        if (name := parse_segment_file_name(f.name)) and name.kind == kind and name.state is None
    ]


class Header(NamedTuple):
    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int
    magic: int


def _batch_headers(data: bytes) -> list[Header]:
    """Shallow batch boundaries as Kafka's FileLogInputStream sees them (§9.1)."""
    headers, position = [], 0
    while position + 17 <= len(data):
        offset, length = struct.unpack_from(">qi", data, position)
        assert length >= 14, f"corrupt batch size {length} at byte {position}"
        if position + 12 + length > len(data):  # a truncated trailing batch is invisible to readers
            break
        magic = data[position + 16]
        if magic >= 2:
            (epoch,) = struct.unpack_from(">i", data, position + 12)
            (delta,) = struct.unpack_from(">i", data, position + 23)
            (max_timestamp,) = struct.unpack_from(">q", data, position + 35)
            headers.append(Header(position, 12 + length, offset, offset + delta, max_timestamp, epoch, magic))
        else:  # a legacy entry's offset is its last offset; v0 has no timestamp
            max_timestamp = struct.unpack_from(">q", data, position + 18)[0] if magic == 1 else -1
            headers.append(Header(position, 12 + length, offset, offset, max_timestamp, -1, magic))
        position += 12 + length
    return headers


def _assert_lookup_consistent(offset_index: OffsetIndex, time_index: TimeIndex, headers: list[Header]) -> None:
    """What readers rely on (§4.4, §4.5), even where an index is coarser than the recovery rule."""
    index_of = {h.position: i for i, h in enumerate(headers)}
    last_offsets = [h.last_offset for h in headers]
    max_timestamp_so_far = list(accumulate((h.max_timestamp for h in headers), max))
    for entry in offset_index.entries:
        i = index_of.get(entry.position)
        assert i is not None, f"{entry} does not point at a batch boundary"
        assert i == 0 or last_offsets[i - 1] < entry.offset, f"{entry} skips batches it should cover"
    for h in headers:
        assert offset_index.lookup(h.last_offset).position <= h.position
    timestamp_at = {h.last_offset: h.max_timestamp for h in headers}
    for entry in time_index.entries:
        covered = bisect_right(last_offsets, entry.offset)
        assert covered and max_timestamp_so_far[covered - 1] <= entry.timestamp
        assert timestamp_at.get(entry.offset) == entry.timestamp, f"{entry} is not a batch's max timestamp"


def test_fixture_inventory():
    assert len(LOG_DIRS) == 6
    assert len(_segment_files(".index")) == 3 and len(_segment_files(".timeindex")) == 3
    assert len(_segment_files(".snapshot")) == 71
    assert len(_segment_files(".log")) == 218


def test_every_directory_and_file_name_is_understood():
    for log_dir in LOG_DIRS:
        for path in log_dir.iterdir():
            if path.is_dir():
                assert parse_partition_dir_name(path.name) is not None, path
            else:
                assert path.name in BROKER_FILES, path
    for partition_dir in _partition_dirs():
        for path in partition_dir.iterdir():
            assert path.name in PARTITION_FILES or parse_segment_file_name(path.name) is not None, path


@pytest.mark.parametrize("kind, index_class", [(".index", OffsetIndex), (".timeindex", TimeIndex)])
def test_every_broker_index_parses_and_is_sane(kind, index_class):
    for path in _segment_files(kind):
        data = path.read_bytes()
        index = index_class.from_bytes(data, parse_segment_file_name(path.name).base_offset, file=str(path))
        index.sanity_check()
        assert index.to_bytes() == data  # the broker trimmed them: no preallocated zero tail


def test_rebuilt_indexes_match_the_broker_indexes_of_inactive_segments():
    compared = 0
    for index_path in _segment_files(".index"):
        base_offset = parse_segment_file_name(index_path.name).base_offset
        log = index_path.with_suffix(".log")
        headers = _batch_headers(log.read_bytes())
        broker_offset_index = OffsetIndex.from_bytes(index_path.read_bytes(), base_offset)
        broker_time_index = TimeIndex.from_bytes(index_path.with_suffix(".timeindex").read_bytes(), base_offset)
        offset_index, time_index = build_indexes(headers, base_offset, file=str(log))
        _assert_lookup_consistent(broker_offset_index, broker_time_index, headers)
        # These cleaned segments are smaller than index.interval.bytes, so per-chunk (cleaner) and
        # per-batch (recovery) indexing agree: no offset entries and only the final time entry.
        assert offset_index.to_bytes() == index_path.read_bytes()
        assert time_index.to_bytes() == index_path.with_suffix(".timeindex").read_bytes()
        compared += 1
    assert compared == 3


def test_indexes_built_from_every_real_log_are_sane_and_lookup_consistent():
    for log in _segment_files(".log"):
        headers = _batch_headers(log.read_bytes())
        base_offset = parse_segment_file_name(log.name).base_offset
        for interval in (0, 4096):
            offset_index, time_index = build_indexes(headers, base_offset, interval, file=str(log))
            offset_index.sanity_check()
            time_index.sanity_check()
            _assert_lookup_consistent(offset_index, time_index, headers)
            if headers and all(h.magic == 0 for h in headers):  # v0: no timestamps, empty time index
                assert time_index.entries == []


def test_v0_segment_index_over_real_data():
    log = BROKER_DIRS / "kafka-0.8-v0" / "numbers-0" / "00000000000000000000.log"
    headers = _batch_headers(log.read_bytes())
    assert headers[-1].last_offset == 11393 and {h.magic for h in headers} == {0}
    offset_index, time_index = build_indexes(headers, 0)
    assert time_index.to_bytes() == b""
    positions = [0] + [entry.position for entry in offset_index.entries]
    assert len(positions) > 50
    assert all(later - earlier > 4096 for earlier, later in zip(positions, positions[1:]))


def test_every_producer_snapshot_parses():
    for path in _segment_files(".snapshot"):
        data = path.read_bytes()
        offset = parse_segment_file_name(path.name).base_offset
        snapshot = ProducerSnapshot.from_bytes(data, offset, file=str(path))
        assert snapshot.to_bytes() == data
        assert len(data) == 10 + 46 * len(snapshot.entries)


def test_every_offset_checkpoint_parses():
    parsed = 0
    for log_dir in LOG_DIRS:
        for name in OFFSET_CHECKPOINT_FILES:
            path = log_dir / name
            if not path.exists():
                continue
            offsets = parse_offset_checkpoint(path.read_text("utf-8"), file=str(path))
            assert parse_offset_checkpoint(format_offset_checkpoint(offsets)) == offsets
            parsed += 1
    assert parsed == 20


def test_cleaner_checkpoint_of_the_compacted_log_dir():
    path = BROKER_DIRS / "kafka-2.7.1-zk" / "cleaner-offset-checkpoint"
    assert parse_offset_checkpoint(path.read_text("utf-8")) == {
        ("__consumer_offsets", 28): 2,
        ("__consumer_offsets", 17): 1,
        ("__consumer_offsets", 39): 18,
    }


def test_every_leader_epoch_checkpoint_parses_and_round_trips():
    paths = [d / LEADER_EPOCH_CHECKPOINT for d in _partition_dirs() if (d / LEADER_EPOCH_CHECKPOINT).exists()]
    assert len(paths) == 211
    for path in paths:
        text = path.read_text("utf-8")
        assert format_leader_epoch_checkpoint(parse_leader_epoch_checkpoint(text, file=str(path))) == text


def test_leader_epochs_rebuilt_from_batches_match_the_broker_checkpoint():
    partition = BROKER_DIRS / "kafka-gzip-idempotent" / "lsx1-0"
    headers = [h for log in sorted(partition.glob("*.log")) for h in _batch_headers(log.read_bytes())]
    batches = [(h.partition_leader_epoch, h.base_offset) for h in headers if h.magic >= 2]
    checkpoint = parse_leader_epoch_checkpoint((partition / LEADER_EPOCH_CHECKPOINT).read_text("utf-8"))
    assert len(checkpoint) == 6
    # The broker became leader in epoch 7 at the log end offset (14) and wrote no batch after that,
    # so recovery cannot see epoch 7; the loader also truncates the cache to the log end offset.
    log_end_offset = headers[-1].last_offset + 1
    assert checkpoint[-1] == (7, log_end_offset)
    assert epochs_from_batches(batches) == truncate_epochs_from_end(checkpoint, log_end_offset) == checkpoint[:-1]


def test_every_batch_epoch_agrees_with_its_checkpoint():
    """The checkpoint's epoch for each batch's base offset is the batch's leader epoch. (An exact
    rebuild can differ after compaction or retention, which remove the batches that started an epoch.)"""
    for partition in _partition_dirs():
        checkpoint_path = partition / LEADER_EPOCH_CHECKPOINT
        if not checkpoint_path.exists():
            continue
        checkpoint = parse_leader_epoch_checkpoint(checkpoint_path.read_text("utf-8"))
        for log in sorted(partition.glob("*.log")):
            for h in _batch_headers(log.read_bytes()):
                if h.magic >= 2 and h.partition_leader_epoch >= 0:
                    covering = [e for e in checkpoint if e.start_offset <= h.base_offset]
                    assert covering and covering[-1].epoch == h.partition_leader_epoch, (log, h)


def test_every_partition_metadata_parses_and_round_trips():
    paths = [d / PARTITION_METADATA for d in _partition_dirs() if (d / PARTITION_METADATA).exists()]
    assert len(paths) == 53
    for path in paths:
        text = path.read_text("utf-8")
        metadata = parse_partition_metadata(text, file=str(path))
        assert metadata.version == 0
        assert format_partition_metadata(metadata.topic_id) == text
