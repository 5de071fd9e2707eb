"""Record batch v2: the spec's worked examples, round trips, and independent readers and writers."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from kafkalog.codec.batch import (
    RecordBatch,
    TimestampType,
    build_batch,
    build_empty_batch,
    decrement_sequence,
    increment_sequence,
)
from kafkalog.codec.compression import Codec
from kafkalog.codec.records import Record
from kafkalog.errors import (
    CorruptBatchError,
    CrcMismatchError,
    KafkaLogError,
    TruncatedDataError,
    UnsupportedFormatError,
)

from .strategies import record_lists

CODECS = list(Codec)
TS = 1700000000000


def test_example_a_one_record_batch():
    data = build_batch([Record(0, TS, b"k", b"v")], partition_leader_epoch=0)
    assert data.hex() == (
        "0000000000000000"
        "0000003a"
        "00000000"
        "02"
        "e99b8dd8"
        "0000"
        "00000000"
        "0000018bcfe56800"
        "0000018bcfe56800"
        "ffffffffffffffff"
        "ffff"
        "ffffffff"
        "00000001"
        "100000"
        "00026b027600"
    )


def test_example_c_empty_batch__DRBT_testWriteEmptyHeader():
    data = build_empty_batch(
        base_offset=5,
        last_offset_delta=4,
        max_timestamp=TS,
        partition_leader_epoch=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=100,
    )
    assert data.hex() == (
        "0000000000000005"
        "00000031"
        "00000000"
        "02"
        "31d79620"
        "0000"
        "00000004"
        "ffffffffffffffff"
        "0000018bcfe56800"
        "0000000000000007"
        "0000"
        "00000064"
        "00000000"
    )
    batch = RecordBatch(data)
    assert (batch.size, batch.records_count, batch.base_timestamp, batch.last_offset) == (61, 0, -1, 9)
    assert batch.last_sequence == 104 and batch.records() == [] and batch.is_valid()


@pytest.mark.parametrize("ts_type", [TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("control", [False, True])
def test_empty_header_every_kind__DRBT_testWriteEmptyHeader(ts_type, transactional, control):
    data = build_empty_batch(
        base_offset=10,
        last_offset_delta=5,
        max_timestamp=TS,
        producer_id=1,
        producer_epoch=2,
        base_sequence=7,
        timestamp_type=ts_type,
        is_transactional=transactional,
        is_control=control,
    )
    b = RecordBatch(data)
    assert (b.timestamp_type, b.is_transactional, b.is_control, b.has_delete_horizon) == (
        ts_type,
        transactional,
        control,
        False,
    )
    assert (b.base_timestamp, b.max_timestamp, b.last_sequence) == (-1, TS, 12)


@settings(max_examples=60, deadline=None)
@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    epoch=st.integers(-1, 2**31 - 1),
    producer=st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1)),
    transactional=st.booleans(),
    extra_delta=st.integers(0, 50),
)
def test_round_trip_every_codec(records, codec, epoch, producer, transactional, extra_delta):
    last_delta = records[-1].offset - records[0].offset + extra_delta
    data = build_batch(
        records,
        codec=codec,
        partition_leader_epoch=epoch,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        is_transactional=transactional,
        last_offset_delta=last_delta,
    )
    batch = RecordBatch(data)
    batch.verify()
    assert batch.records() == records
    assert (
        batch.codec,
        batch.partition_leader_epoch,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.is_transactional,
    ) == (codec, epoch, *producer, transactional)
    assert batch.last_offset == records[0].offset + last_delta  # a compacted batch keeps its range
    assert batch.max_timestamp == max(-1, max(r.timestamp for r in records))
    assert batch.size == len(data)


@settings(max_examples=30, deadline=None)
@given(records=record_lists(max_size=8), horizon=st.integers(0, 2**50))
def test_delete_horizon_keeps_record_timestamps__MRT_testBaseTimestampToDeleteHorizonConversion(records, horizon):
    batch = RecordBatch(build_batch(records, delete_horizon_ms=horizon))
    assert batch.has_delete_horizon and batch.delete_horizon_ms == horizon == batch.base_timestamp
    assert [r.timestamp for r in batch.records()] == [r.timestamp for r in records]


def test_log_append_time_replaces_record_timestamps__DRBT_testSetLogAppendTime():
    records = [Record(0, 5, b"a", b"1"), Record(1, 9, b"b", b"2")]
    batch = RecordBatch(build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME and batch.max_timestamp == 777
    assert [r.timestamp for r in batch.records()] == [777, 777]


def test_leader_epoch_and_base_offset_are_outside_the_crc__DRBT_testSetLastOffset():
    data = bytearray(build_batch([Record(3, TS, b"k", b"v")]))
    struct.pack_into(">q", data, 0, 1000)
    struct.pack_into(">i", data, 12, 77)
    batch = RecordBatch(bytes(data))
    assert batch.is_valid() and batch.base_offset == 1000 and batch.partition_leader_epoch == 77
    assert batch.records()[0].offset == 1000


@pytest.mark.parametrize("field_offset", [23, 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8])  # lastOffsetDelta, maxTimestamp
def test_changed_covered_field_fails_crc__DRBT_testInvalidCrc(field_offset):
    data = bytearray(build_batch([Record(0, TS, b"k", b"v")]))
    data[field_offset + 3] ^= 0x01
    with pytest.raises(CrcMismatchError) as err:
        RecordBatch(bytes(data)).verify()
    assert err.value.position == 17 and err.value.offset == 0


def test_sequences__DRBT_testIncrementSequence_testDecrementSequence():
    m = 2**31 - 1
    assert increment_sequence(5, 5) == 10 and increment_sequence(m, 1) == 0 and increment_sequence(m - 5, 10) == 4
    assert decrement_sequence(0, 1) == m and decrement_sequence(10, 5) == 5


# -- malformed batches ----------------------------------------------------------------------------


def _one_batch(codec=Codec.NONE, count=3):
    return build_batch([Record(i, TS + i, b"key%d" % i, b"value" * i) for i in range(count)], codec=codec)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("declared", [2, 4])
def test_wrong_record_count__DRBT_testInvalidRecordCountTooManyOrTooLittle(codec, declared):
    data = bytearray(_one_batch(codec))
    struct.pack_into(">i", data, 57, declared)
    with pytest.raises(CorruptBatchError) as err:
        RecordBatch(bytes(data)).records()
    assert err.value.offset == 0 and err.value.position == 0


def test_negative_record_count():
    data = bytearray(_one_batch())
    struct.pack_into(">i", data, 57, -1)
    with pytest.raises(CorruptBatchError, match="invalid record count"):
        RecordBatch(bytes(data)).records()


def test_short_and_truncated_batches():
    data = _one_batch()
    with pytest.raises(TruncatedDataError):
        RecordBatch(data[:40])
    with pytest.raises(TruncatedDataError):
        RecordBatch(data[:-1])
    short = bytearray(data)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        RecordBatch(bytes(short))


def test_unknown_codec_is_refused():
    data = bytearray(_one_batch())
    data[22] |= 0x07
    with pytest.raises(UnsupportedFormatError) as err:
        RecordBatch(bytes(data)).records()
    assert err.value.offset == 0


def test_negative_header_key_length_is_corrupt():
    data = bytearray(build_batch([Record(0, TS, b"k", b"v", (("h", b"x"),))]))
    # record: len, attr, tsDelta, offDelta, keyLen, 'k', valLen, 'v', hdrCount, hdrKeyLen...
    data[61 + 9] = 0x01  # header key length -1
    with pytest.raises(CorruptBatchError, match="header key"):
        RecordBatch(bytes(data)).records()


# -- independent readers and writers --------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(records=record_lists(max_size=10), codec=st.sampled_from(CODECS), transactional=st.booleans())
def test_kafka_python_builds_we_read(records, codec, transactional):
    base = records[0].offset
    builder = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=9 if transactional else -1,
        producer_epoch=1 if transactional else -1,
        base_sequence=4 if transactional else -1,
        batch_size=2**30,
    )
    for r in records:
        ts = max(r.timestamp, 0)  # kafka-python cannot write the "no timestamp" -1
        builder.append(r.offset - base, timestamp=ts, key=r.key, value=r.value, headers=list(r.headers))
    data = bytes(builder.build())
    batch = RecordBatch(data)
    batch.verify()
    expected = [Record(r.offset - base, max(r.timestamp, 0), r.key, r.value, r.headers) for r in records]
    assert batch.records() == expected
    assert batch.is_transactional == transactional
    assert batch.codec in (codec, Codec.NONE)  # kafka-python sends uncompressed when compression does not pay


@settings(max_examples=40, deadline=None)
@given(records=record_lists(max_size=10), codec=st.sampled_from(CODECS))
def test_we_build_independent_readers_read(records, codec):
    records = [r._replace(timestamp=max(r.timestamp, 0)) for r in records]
    data = build_batch(records, codec=codec, producer_id=5, producer_epoch=0, base_sequence=0)
    for reader in (KpBatch, AioBatch):
        batch = reader(data)
        assert batch.validate_crc()
        got = [Record(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch]
        assert got == records, reader


def test_control_batch_read_by_kafka_python__DRBT_testReadAndWriteControlBatch():
    from kafkalog.codec.control import ControlType, build_end_txn_marker, control_record

    data = build_end_txn_marker(
        offset=10,
        timestamp=TS,
        producer_id=42,
        producer_epoch=3,
        commit=True,
        coordinator_epoch=347,
        partition_leader_epoch=0,
    )
    assert data.hex().startswith("000000000000000a00000042") and len(data) == 78
    kp = KpBatch(data)
    assert kp.validate_crc() and kp.is_control_batch
    (record,) = list(kp)
    assert record.type == 1 and record.commit
    ours = control_record(RecordBatch(data))
    assert (ours.type, ours.coordinator_epoch, ours.offset) == (ControlType.COMMIT, 347, 10)


def test_every_error_is_a_kafkalog_error():
    assert issubclass(CrcMismatchError, KafkaLogError) and issubclass(TruncatedDataError, KafkaLogError)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Codec.NONE])
def test_kafka_python_compressed_batch_we_read(codec):
    builder = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i in range(200):
        builder.append(i, timestamp=TS + i, key=b"key-%d" % (i % 7), value=b"payload " * 20, headers=[("h", b"x")])
    batch = RecordBatch(bytes(builder.build()))
    batch.verify()
    assert batch.codec == codec  # really compressed: the values repeat
    records = batch.records()
    assert len(records) == 200 and records[199] == Record(199, TS + 199, b"key-3", b"payload " * 20, (("h", b"x"),))
