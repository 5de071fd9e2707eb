"""Legacy v0/v1 messages (spec §2): round trips, kafka-python cross-checks, real fixtures, corruption."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch as KafkaPythonBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.codec.compression import compress
from kafkalog.codec.legacy import LegacyBatch, build_legacy_batch, build_legacy_message
from kafkalog.codec.records import Record
from kafkalog.errors import (
    CorruptBatchError,
    CrcMismatchError,
    DecompressionLimitError,
    KafkaLogError,
    TruncatedDataError,
    UnsupportedFormatError,
)

# the same place as conftest's `real_fixtures`, needed here at collection time for parametrize
REAL = (Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real").resolve()

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CREATE_TIME, LOG_APPEND_TIME = 0, 1
CODECS = [NONE, GZIP, SNAPPY, LZ4]


# -- helpers ------------------------------------------------------------------------------
def legacy_entries(data: bytes) -> list[LegacyBatch]:
    """The shallow v0/v1 entries of a file, walked as Kafka's FileLogInputStream does (spec §9.1)."""
    entries, pos = [], 0
    while len(data) - pos >= 17:
        _, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):  # a truncated trailing entry is invisible
            break
        if data[pos + 16] != 2:  # v2 batches are read elsewhere
            entries.append(LegacyBatch(data, pos))
        pos += 12 + size
    return entries


def read_all(data: bytes) -> list[Record]:
    return [record for entry in legacy_entries(data) for record in entry.records()]


def kafka_python_records(entry: LegacyBatch) -> list[Record]:
    """What kafka-python's independent reader makes of one of our entries (CRCs checked too)."""
    theirs = KafkaPythonBatch(bytearray(entry.data), entry.magic)
    assert theirs.validate_crc()
    out = []
    for record in theirs:
        assert record.validate_crc()
        timestamp = -1 if record.timestamp is None else record.timestamp
        out.append(Record(record.offset, timestamp, record.key, record.value))
    return out


blobs = st.none() | st.binary(max_size=40)
timestamps = st.integers(min_value=-1, max_value=2**62)


@st.composite
def record_lists(draw) -> list[Record]:
    offset = draw(st.integers(min_value=0, max_value=2**40))
    records = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        records.append(Record(offset, draw(timestamps), draw(blobs), draw(blobs)))
        offset += draw(st.integers(min_value=1, max_value=3))  # gaps, as after compaction
    return records


def expected_read(records, magic, timestamp_type, log_append_time):
    if magic == 0:
        return [r._replace(timestamp=-1) for r in records]
    if timestamp_type == LOG_APPEND_TIME:
        return [r._replace(timestamp=log_append_time) for r in records]
    return list(records)


def v1_wrapper(inner: bytes, offset: int, codec: int = GZIP, magic: int = 1, timestamp: int = 0) -> bytes:
    return build_legacy_message(
        offset=offset,
        magic=magic,
        timestamp=timestamp,
        key=None,
        value=compress(codec, inner, magic=magic),
        codec=codec,
    )


def messages(magic: int, relative_offsets, timestamp: int = 10) -> bytes:
    return b"".join(
        build_legacy_message(offset=o, magic=magic, timestamp=timestamp, key=b"k%d" % o, value=b"v")
        for o in relative_offsets
    )


# -- round trips --------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_lists(),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(CODECS),
    timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
    append_time=timestamps,
)
def test_round_trip_and_kafka_python_reads_ours(records, magic, codec, timestamp_type, append_time):
    data = build_legacy_batch(
        records, magic=magic, codec=codec, timestamp_type=timestamp_type, log_append_time=append_time
    )
    expected = expected_read(records, magic, timestamp_type, append_time)
    entries = legacy_entries(data)
    assert read_all(data) == expected
    assert sum(entry.size for entry in entries) == len(data)
    assert len(entries) == (len(records) if codec == NONE else 1)
    for entry in entries:
        entry.verify()
        assert entry.codec == codec and entry.magic == magic
        assert entry.timestamp_type == (-1 if magic == 0 else timestamp_type)
        assert kafka_python_records(entry) == entry.records()
    if codec != NONE:
        (wrapper,) = entries
        assert (wrapper.base_offset, wrapper.last_offset) == (records[0].offset, records[-1].offset)
        assert wrapper.records_count == len(records)
        assert wrapper.max_timestamp == (
            -1
            if magic == 0
            else append_time
            if timestamp_type == LOG_APPEND_TIME
            else max(r.timestamp for r in records)
        )
        assert not wrapper.has_inconsistent_inner_magic


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(st.tuples(blobs, blobs, st.integers(min_value=0, max_value=2**62)), min_size=1, max_size=8),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(CODECS),
)
def test_we_read_what_kafka_python_builds(items, magic, codec):
    builder = LegacyRecordBatchBuilder(magic, codec, batch_size=1 << 20)
    for offset, (key, value, timestamp) in enumerate(items):
        assert builder.append(offset, timestamp, key, value) is not None
    data = bytes(builder.build())
    # kafka-python leaves a compressed wrapper at offset 0, the librdkafka case: relative = absolute
    expected = [
        Record(offset, timestamp if magic == 1 else -1, key, value)
        for offset, (key, value, timestamp) in enumerate(items)
    ]
    assert read_all(data) == expected
    for entry in legacy_entries(data):
        entry.verify()


def test_view_mirrors_record_batch_names():
    data = build_legacy_batch([Record(7, 1000, b"k", b"v")], magic=1)
    entry = LegacyBatch(memoryview(b"xx" + data), 2)  # the storage layer may hand over a memoryview
    assert (entry.position, entry.size, entry.base_offset, entry.last_offset, entry.next_offset) == (2, 36, 7, 7, 8)
    assert (entry.codec, entry.timestamp_type, entry.max_timestamp, entry.records_count) == (0, 0, 1000, 1)
    assert (entry.partition_leader_epoch, entry.producer_id, entry.producer_epoch) == (-1, -1, -1)
    assert (entry.base_sequence, entry.last_sequence, entry.delete_horizon_ms) == (-1, -1, None)
    assert not (entry.is_transactional or entry.is_control or entry.has_delete_horizon or entry.has_producer_id)
    assert entry.data == data and entry.is_valid() and entry.crc == entry.compute_crc()
    v0 = LegacyBatch(build_legacy_batch([Record(7, 1000, None, None)], magic=0))
    assert (v0.timestamp_type, v0.max_timestamp, v0.records()) == (-1, -1, [Record(7, -1, None, None)])


# -- wrapper offsets and timestamps (spec §2.3) ---------------------------------------------
def test_v1_relative_offsets_from_the_wrapper_offset():
    entry = LegacyBatch(v1_wrapper(messages(1, [0, 2, 5]), offset=105))
    assert [r.offset for r in entry.records()] == [100, 102, 105]
    assert (entry.base_offset, entry.last_offset, entry.records_count) == (100, 105, 3)


def test_v1_wrapper_offset_zero_is_the_librdkafka_case():
    assert [r.offset for r in LegacyBatch(v1_wrapper(messages(1, [0, 1, 2]), offset=0)).records()] == [0, 1, 2]


def test_v0_inner_offsets_are_absolute():
    entry = LegacyBatch(v1_wrapper(messages(0, [40, 41, 43]), offset=43, magic=0))
    assert [r.offset for r in entry.records()] == [40, 41, 43]


def test_v1_wrapper_offset_below_last_relative_offset_is_invalid():
    entry = LegacyBatch(b"\0" * 5 + v1_wrapper(messages(1, [0, 1, 2, 3]), offset=2), 5)
    with pytest.raises(CorruptBatchError) as caught:
        entry.records()
    assert (caught.value.position, caught.value.offset) == (5, 2)


def test_log_append_time_wrapper_stamps_every_inner_record():
    records = [Record(10, 5, b"a", b"1"), Record(11, 50, b"b", b"2")]
    entry = LegacyBatch(
        build_legacy_batch(records, magic=1, codec=GZIP, timestamp_type=LOG_APPEND_TIME, log_append_time=777)
    )
    assert (entry.timestamp_type, entry.max_timestamp) == (LOG_APPEND_TIME, 777)
    assert [r.timestamp for r in entry.records()] == [777, 777]
    assert kafka_python_records(entry) == entry.records()


def test_v1_wrapper_with_v0_inner_messages_kafka_4298():
    # what old cleaners wrote (LCT.testCleanCorruptMessageSet): v1 gzip wrapper, v0 inner, relative offsets
    entry = LegacyBatch(v1_wrapper(messages(0, [0, 1, 2]), offset=12, timestamp=99))
    assert [r.offset for r in entry.records()] == [10, 11, 12]
    assert [r.timestamp for r in entry.records()] == [-1, -1, -1]
    assert entry.has_inconsistent_inner_magic
    # re-encoding with the wrapper's magic makes it consistent, offsets kept
    rebuilt = LegacyBatch(build_legacy_batch(entry.records(), magic=entry.magic, codec=entry.codec))
    assert rebuilt.records() == entry.records() and not rebuilt.has_inconsistent_inner_magic


def test_legacy_rewrite_shapes():
    # spec §5.8 and catalogue 53, 54, 57: base = first retained, wrapper offset = last retained
    kept = [Record(4, 20, b"k4", b"v"), Record(5, 15, b"k5", b"v")]
    wrapper = LegacyBatch(build_legacy_batch(kept, magic=1, codec=GZIP))
    assert (wrapper.base_offset, wrapper.last_offset, wrapper.max_timestamp) == (4, 5, 20)
    only = LegacyBatch(build_legacy_batch([Record(8, 1, b"k8", b"v")], magic=0, codec=SNAPPY))
    assert (only.base_offset, only.last_offset, only.partition_leader_epoch) == (8, 8, -1)
    original = LegacyBatch(
        build_legacy_batch(kept, magic=1, codec=LZ4, timestamp_type=LOG_APPEND_TIME, log_append_time=500)
    )
    again = LegacyBatch(
        build_legacy_batch(
            original.records()[1:],
            magic=1,
            codec=original.codec,
            timestamp_type=original.timestamp_type,
            log_append_time=original.max_timestamp,
        )
    )
    assert (again.timestamp_type, again.max_timestamp, again.codec, again.base_offset) == (1, 500, LZ4, 5)


# -- real data ----------------------------------------------------------------------------
def _rust_unescape(text: str) -> str:
    """Undo Rust's `{:?}` string escaping, the format of kafkalite's golden files."""
    simple = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
    return re.sub(
        r"\\(u\{([0-9a-fA-F]+)\}|.)", lambda m: chr(int(m.group(2), 16)) if m.group(2) else simple[m.group(1)], text
    )


def _golden(path: Path) -> list[tuple[int, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r'(\d+): "(.*)"', line)
        assert match, line
        out.append((int(match.group(1)), _rust_unescape(match.group(2))))
    return out


@pytest.mark.parametrize("partition", ["hamlet-none-0", "hamlet-gzip-0", "hamlet-snappy-0", "numbers-0"])
def test_kafka_08_broker_dir_matches_golden(partition):
    entries = []
    for log in sorted((REAL / "broker-dirs/kafka-0.8-v0" / partition).glob("*.log")):
        entries += legacy_entries(log.read_bytes())
    for entry in entries:
        entry.verify()
    records = [record for entry in entries for record in entry.records()]
    assert all(record.key is None and record.timestamp == -1 for record in records)
    decoded = [(record.offset, record.value.decode("utf-8")) for record in records]
    assert decoded == _golden(REAL / "broker-dirs/kafka-0.8-v0.golden" / partition)


def _captured_files():
    patterns = [
        "captured/kafka-rust/*.log",
        "captured/kafkajs/*.log",
        "captured/kafka-go/*.log",
        "client-batches/kafka-python/*.log",
    ]
    return [path for pattern in patterns for path in sorted(REAL.glob(pattern)) if "invalid_crc" not in path.name]


@pytest.mark.parametrize("path", _captured_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_captured_legacy_entries_decode_like_kafka_python(path):
    for entry in legacy_entries(path.read_bytes()):
        entry.verify()
        records = entry.records()
        assert entry.base_offset == records[0].offset and entry.last_offset == records[-1].offset
        assert kafka_python_records(entry) == records


def test_kafka_rust_v0_codecs_agree():
    rust = REAL / "captured/kafka-rust"
    decoded = [
        read_all((rust / f"fetch1.mytopic.1p.{name}.log").read_bytes())
        for name in ("nocompression.kafka.0821", "gzip.kafka.0821", "snappy.kafka.0821", "snappy.kafka.0822")
    ]
    assert len(decoded[0]) == 42 and [r.offset for r in decoded[0]] == list(range(42))
    assert all(records == decoded[0] for records in decoded)


def test_kafka_rust_invalid_crc():
    (entry,) = legacy_entries(
        (REAL / "captured/kafka-rust/fetch2.mytopic.nocompression.invalid_crc.kafka.0900.log").read_bytes()
    )
    assert not entry.is_valid()
    with pytest.raises(CrcMismatchError) as caught:
        entry.verify()
    assert (caught.value.position, caught.value.offset) == (12, 0)


# -- corruption ---------------------------------------------------------------------------
def test_flipped_crc_and_flipped_value():
    data = bytearray(b"\0" * 3 + build_legacy_message(offset=9, magic=1, timestamp=1, key=b"k", value=b"value"))
    for index in (3 + 12, len(data) - 1):  # a CRC byte, then a value byte
        bad = bytearray(data)
        bad[index] ^= 0x01
        with pytest.raises(CrcMismatchError) as caught:
            LegacyBatch(bad, 3).verify()
        assert (caught.value.position, caught.value.offset) == (15, 9)


def test_message_size_below_minimum():
    data = struct.pack(">qiIbb", 4, 13, 0, 0, 0) + b"\0" * 11
    with pytest.raises(CorruptBatchError) as caught:
        LegacyBatch(data)
    assert (caught.value.position, caught.value.offset) == (8, 4)


def test_v1_message_too_small_for_its_timestamp():
    data = build_legacy_message(offset=4, magic=0, timestamp=0, key=None, value=None)
    data = data[:16] + b"\x01" + data[17:]
    with pytest.raises(CorruptBatchError):
        LegacyBatch(data)


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncated_message(cut):
    data = build_legacy_message(offset=4, magic=1, timestamp=0, key=b"key", value=b"value")
    with pytest.raises(TruncatedDataError):
        LegacyBatch(data[:-cut])


def test_key_length_past_the_end_and_trailing_bytes():
    good = build_legacy_message(offset=4, magic=0, timestamp=0, key=b"key", value=b"value")
    long_key = good[:18] + struct.pack(">i", 1000) + good[22:]
    with pytest.raises(CorruptBatchError) as caught:
        LegacyBatch(long_key).records()
    assert (caught.value.position, caught.value.offset) == (18, 4)
    trailing = good[:8] + struct.pack(">i", len(good) - 12 + 2) + good[12:] + b"!!"
    with pytest.raises(CorruptBatchError):
        LegacyBatch(trailing).records()


def test_compressed_inner_message():
    inner = build_legacy_message(offset=0, magic=1, timestamp=0, key=None, value=b"x", codec=GZIP)
    entry = LegacyBatch(b"\0" * 7 + v1_wrapper(inner, offset=30), 7)
    with pytest.raises(CorruptBatchError, match="decompressed wrapper") as caught:
        entry.records()
    assert (caught.value.position, caught.value.offset) == (7, 30)


def test_wrapper_with_null_value_or_no_inner_messages():
    null = build_legacy_message(offset=3, magic=1, timestamp=0, key=None, value=None, codec=GZIP)
    with pytest.raises(CorruptBatchError, match="null value"):
        LegacyBatch(null).records()
    with pytest.raises(CorruptBatchError, match="no inner messages"):
        _ = LegacyBatch(v1_wrapper(b"", offset=3)).records_count  # a property that decompresses


def test_partial_trailing_inner_entry_is_ignored_as_kafka_does():
    # Kafka's inner reader (DataLogInputStream) ends quietly at a short or partial entry
    inner = messages(1, [0, 1])
    entry = LegacyBatch(v1_wrapper(inner + inner[:20], offset=11))
    assert [r.offset for r in entry.records()] == [10, 11]


def test_decompression_limit_names_the_wrapper():
    records = [Record(3, 0, None, b"x" * 5000)]
    entry = LegacyBatch(b"\0" * 4 + build_legacy_batch(records, magic=1, codec=GZIP), 4)
    with pytest.raises(DecompressionLimitError) as caught:
        entry.records(limit=1000)
    assert caught.value.offset == 3 and caught.value.position >= 4
    assert entry.records() == records  # a failed decode is not cached


def test_inner_message_size_below_minimum():
    inner = messages(1, [0]) + struct.pack(">qi", 1, 3) + b"\0" * 3
    with pytest.raises(CorruptBatchError, match="decompressed wrapper"):
        LegacyBatch(v1_wrapper(inner, offset=5)).records()


def test_unknown_magic_and_v2_magic():
    good = build_legacy_message(offset=4, magic=1, timestamp=0, key=None, value=b"v")
    with pytest.raises(CorruptBatchError):
        LegacyBatch(good[:16] + b"\x02" + good[17:])
    with pytest.raises(UnsupportedFormatError):
        LegacyBatch(good[:16] + b"\x07" + good[17:])


def test_zstd_and_headers_are_refused():
    with pytest.raises(UnsupportedFormatError):
        build_legacy_batch([Record(0, 0, None, b"v")], magic=1, codec=ZSTD)
    with pytest.raises(UnsupportedFormatError):
        build_legacy_batch([Record(0, 0, None, b"v", (("h", b"1"),))], magic=1)
    zstd_wrapper = build_legacy_message(offset=0, magic=1, timestamp=0, key=None, value=b"x", codec=GZIP)
    zstd_wrapper = bytearray(zstd_wrapper)
    zstd_wrapper[17] = ZSTD
    with pytest.raises(UnsupportedFormatError):
        LegacyBatch(bytes(zstd_wrapper)).records()


@settings(max_examples=300, deadline=None)
@given(
    records=record_lists(),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(CODECS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=4),
    cut=st.integers(min_value=0, max_value=30),
)
def test_damaged_entries_only_raise_kafka_log_errors(records, magic, codec, edits, cut):
    data = bytearray(build_legacy_batch(records, magic=magic, codec=codec))
    for index, byte in edits:
        data[index % len(data)] = byte
    data = bytes(data[: len(data) - cut])
    try:
        entry = LegacyBatch(data)
        entry.is_valid()
        entry.records(limit=1 << 20)
        _ = entry.base_offset, entry.records_count, entry.has_inconsistent_inner_magic  # properties that decode
    except KafkaLogError as err:
        assert err.position is not None
