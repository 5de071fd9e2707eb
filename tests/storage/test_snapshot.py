"""Producer-state snapshots (spec §4.8; catalogue 133, 134)."""

import struct

import crc32c
import pytest

from kafkalog.errors import CorruptSnapshotError
from kafkalog.storage.snapshot import ENTRY_SIZE, HEADER_SIZE, ProducerSnapshot, ProducerStateEntry

READ_WRITE_ENTRIES = [
    # pid 1, epoch 2, coordinatorEpoch 3, txn first offset 100, last batch (seq 1, offset 2, delta 3), no timestamp
    ProducerStateEntry(
        producer_id=1,
        producer_epoch=2,
        last_sequence=1,
        last_offset=2,
        offset_delta=3,
        timestamp=-1,
        coordinator_epoch=3,
        current_txn_first_offset=100,
    ),
    # pid 11, epoch 12, coordinatorEpoch 13, timestamp 123456, no batch, no open transaction
    ProducerStateEntry(producer_id=11, producer_epoch=12, timestamp=123456, coordinator_epoch=13),
]


def test_read_write_snapshot__PSMT_testReadWriteSnapshot(tmp_path):
    path = tmp_path / "00000000000000000042.snapshot"
    path.write_bytes(ProducerSnapshot(42, READ_WRITE_ENTRIES).to_bytes())
    snapshot = ProducerSnapshot.from_bytes(path.read_bytes(), 42, file=str(path))
    assert snapshot == ProducerSnapshot(42, READ_WRITE_ENTRIES)
    assert snapshot.entries[1] == (11, 12, -1, -1, 0, 123456, 13, -1)


def test_snapshot_layout():
    data = ProducerSnapshot(7, READ_WRITE_ENTRIES).to_bytes()
    assert len(data) == HEADER_SIZE + 2 * ENTRY_SIZE == 10 + 92
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2)
    assert crc == crc32c.crc32c(data[6:])
    assert data[10:56] == struct.pack(">qhiqiqiq", 1, 2, 1, 2, 3, -1, 3, 100)


def test_empty_producer_state_is_ten_bytes():
    data = ProducerSnapshot(0).to_bytes()
    assert data == struct.pack(">hIi", 1, crc32c.crc32c(b"\x00\x00\x00\x00"), 0)
    assert ProducerSnapshot.from_bytes(data, 0).entries == []


def test_load_from_empty_snapshot_file__PSMT_testLoadFromEmptySnapshotFile():
    with pytest.raises(CorruptSnapshotError) as caught:
        ProducerSnapshot.from_bytes(b"", 2, file="00000000000000000002.snapshot")
    assert (caught.value.file, caught.value.position) == ("00000000000000000002.snapshot", 0)


@pytest.mark.parametrize("cut", [1, 5, 9, 11, HEADER_SIZE + ENTRY_SIZE + 45])
def test_load_from_truncated_snapshot_file__PSMT_testLoadFromTruncatedSnapshotFile(cut):
    data = ProducerSnapshot(2, READ_WRITE_ENTRIES).to_bytes()
    with pytest.raises(CorruptSnapshotError) as caught:
        ProducerSnapshot.from_bytes(data[:cut], 2, file="s")
    assert caught.value.file == "s" and caught.value.position is not None


def test_load_from_corrupt_snapshot_file__PSMT_testLoadFromCorruptSnapshotFile():
    data = bytearray(ProducerSnapshot(2, READ_WRITE_ENTRIES).to_bytes())
    data[-1] ^= 0x01
    with pytest.raises(CorruptSnapshotError, match="CRC-32C") as caught:
        ProducerSnapshot.from_bytes(bytes(data), 2, file="s")
    assert caught.value.position == 2


@pytest.mark.parametrize("version", [0, 2, -1])
def test_unknown_version_is_corrupt(version):
    data = struct.pack(">h", version) + ProducerSnapshot(2, READ_WRITE_ENTRIES).to_bytes()[2:]
    with pytest.raises(CorruptSnapshotError, match=f"version {version}") as caught:
        ProducerSnapshot.from_bytes(data, 2)
    assert caught.value.position == 0


def test_negative_or_oversized_count_is_corrupt():
    for count in (-1, 3):
        body = struct.pack(">i", count) + bytes(2 * ENTRY_SIZE)
        data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
        with pytest.raises(CorruptSnapshotError, match="declares") as caught:
            ProducerSnapshot.from_bytes(data, 0)
        assert caught.value.position == 6


def test_bytes_after_the_entries_are_accepted_when_the_crc_covers_them():
    # Kafka's schema reader stops after the declared entries and its CRC spans the whole file.
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 5, 0, 3, 10, 0, 99, -1, -1) + b"extra"
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert ProducerSnapshot.from_bytes(data, 11).entries == [ProducerStateEntry(5, 0, 3, 10, 0, 99, -1, -1)]
