"""Every `.log` file written by real brokers and other clients decodes, record for record as
kafka-python reads it; the files the fixture README marks as defective fail the way it says."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

from kafkalog.codec.batch import RecordBatch
from kafkalog.codec.reader import BatchReader
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptBatchError

from ..conftest import REAL_FIXTURES

LOG_FILES = sorted(p for p in REAL_FIXTURES.rglob("*.log"))
BAD_CRC = {"fetch2.mytopic.nocompression.invalid_crc.kafka.0900.log", "control_batch_data_v2.log"}
TRUNCATED = {p.name for p in LOG_FILES if "partial_messages" in p.name or "index_out_of_range" in p.name}
INCONSISTENT = {"v0_recordbatch_zstd.log"}  # valid CRC, attributes say "none", payload is zstd


def _ours(data: bytes):
    reader = BatchReader(data)
    out = []
    for batch in reader:
        out.append((batch, batch.records()))
    return reader, out


def _theirs(data: bytes):
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        # kafka-python reports a v0 message's missing timestamp as None where Kafka says -1
        out.append(
            [
                Record(
                    r.offset,
                    -1 if r.timestamp is None else r.timestamp,
                    r.key,
                    r.value,
                    tuple((k, v) for k, v in getattr(r, "headers", ()) or ()),
                )
                for r in batch
            ]
        )
    return out


def test_the_fixture_set_is_all_there():
    assert len(LOG_FILES) > 250
    names = {p.name for p in LOG_FILES}
    assert BAD_CRC | INCONSISTENT <= names and len(TRUNCATED) >= 3


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: str(p.relative_to(REAL_FIXTURES)))
def test_real_log_file(path):
    data = path.read_bytes()
    if path.name in INCONSISTENT:
        (batch,) = list(BatchReader(data))
        assert batch.is_valid()
        with pytest.raises(CorruptBatchError):
            batch.records()
        return
    reader, ours = _ours(data)
    assert (reader.truncated_tail is not None) == (path.name in TRUNCATED)
    assert all(b.is_valid() for b, _ in ours) == (path.name not in BAD_CRC)
    is_control = [isinstance(b, RecordBatch) and b.is_control for b, _ in ours]
    theirs = _theirs(data)
    assert len(theirs) == len(ours)
    for (batch, records), (control, expected) in zip(ours, zip(is_control, theirs)):
        if control:  # kafka-python yields ControlRecord objects; compare offsets only
            assert [r.offset for r in records] == [r.offset for r in expected]
        else:
            assert records == expected, (batch, path.name)


def test_broker_dirs_hold_every_format_and_codec():
    seen = set()
    for path in LOG_FILES:
        if "broker-dirs" in path.parts:
            for batch in BatchReader(path.read_bytes()):
                seen.add((batch.magic, batch.codec))
    assert {(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2), (2, 3)} <= seen
