"""A reference model of one pass of Kafka's log cleaner over one partition held in memory.

It is a second implementation of what the product does with Spark, independent of the product: it
imports nothing from `kafkalog`. Batches are read with a peer codec, kafka-python's record classes
(`MemoryRecords`, `DefaultRecordBatch`, `LegacyRecordBatch`); retained batches are written here as
Kafka's `MemoryRecordsBuilder` writes them; and every decision is written afresh from Kafka's own
source, each rule naming the Kafka class and method it follows (storage module,
`org.apache.kafka.storage.internals.log`, unless said otherwise; the clients' record classes are in
`org.apache.kafka.common.record`). The order of the steps is that of `Cleaner.doClean`.

The model takes a partition as a list of segments, each `(base_offset, [batch bytes], mtime_ms)`
(the last one is the active segment), and returns the segments after one cleaning pass, with the
surviving aborted-transaction index entries of each output segment, the new cleaner checkpoint and
per-reason record counts. By default the offset map is exact and unbounded (as the product's);
`CleanerConfig.map_capacity` bounds it to reproduce Kafka tests that rely on a full map.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import lz4.block
import xxhash
import zstandard
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32, calc_crc32c, encode_varint

LONG_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
LOG_OVERHEAD = 12  # Records.LOG_OVERHEAD: offset + size, the bytes a batch's size field does not count

# RecordBatch / TimestampType constants
NO_TIMESTAMP = -1
NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
# DefaultRecordBatch attribute bits
_CODEC_MASK, _TIMESTAMP_TYPE_FLAG, _TRANSACTIONAL_FLAG = 0x07, 0x08, 0x10
_CONTROL_FLAG, _DELETE_HORIZON_FLAG = 0x20, 0x40  # bit 6: KIP-534's delete horizon in the base timestamp
# ControlRecordType ids
ABORT, COMMIT = 0, 1
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

# Why a record read by the pass did or did not make it into the output (one count per record).
REASONS = ("kept", "superseded", "tombstone_expired", "aborted_transaction", "marker_removed", "unkeyed")


# -- inputs and outputs ---------------------------------------------------------------------------
class AbortedTxn(NamedTuple):
    """A `.txnindex` entry (AbortedTxn): the data of `producer_id`'s aborted transaction spans
    [first_offset, last_offset]; the ABORT marker is at last_offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True)
class CleanerConfig:
    """The topic and broker settings one pass depends on (Kafka's defaults).

    `producer_id_expiration_ms=None` never expires a producer (what Kafka's own cleaner tests see,
    since their clock never runs the expiration task). `map_capacity` is the number of keys the
    offset map holds before it is full (Kafka: int(slots * load factor)); None = unbounded.
    """

    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    producer_id_expiration_ms: int | None = 86_400_000
    map_capacity: int | None = None


class Segment(NamedTuple):
    """An input segment. `batches` is a sequence of bytes objects, each one or more whole batches."""

    base_offset: int
    batches: Sequence[bytes]
    mtime_ms: int = 0


class OutputSegment(NamedTuple):
    base_offset: int
    batches: list[bytes]  # one whole batch per item, in file order
    mtime_ms: int
    aborted_txns: list[AbortedTxn]  # the segment's .txnindex, in marker order


@dataclass
class ProducerEntry:
    """ProducerStateEntry, as far as the cleaner reads it."""

    producer_id: int
    epoch: int = -1  # RecordBatch.NO_PRODUCER_EPOCH
    last_data_offset: int = -1  # lastDataOffset: the last batch metadata's lastOffset, -1 when none
    last_sequence: int = -1
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None  # currentTxnFirstOffset


@dataclass
class ProducerState:
    """The result of replaying a partition's batches."""

    producers: dict[int, ProducerEntry]
    aborted_txns: list[AbortedTxn]  # as Kafka would have indexed them, in marker order
    completed: list[tuple[int, int]]  # (first offset, marker offset) of every completed transaction


@dataclass
class CleanResult:
    segments: list[OutputSegment]
    checkpoint: int  # the new cleaner-offset-checkpoint value (Kafka's endOffset)
    first_dirty: int
    first_uncleanable: int  # segment aligned
    checkpoint_reset: bool  # the given checkpoint was out of range
    cleaned: bool  # False when the cleanable range was empty and nothing was rewritten
    last_stable_offset: int
    counts: dict[str, int]  # REASONS plus batch and byte totals of the rewritten part
    producers: dict[int, ProducerEntry]  # state the pass used, before expiration
    active_producers: dict[int, ProducerEntry]  # after expiration at `now`

    @property
    def aborted_txns(self) -> list[AbortedTxn]:
        return [txn for seg in self.segments for txn in seg.aborted_txns]

    def as_input(self) -> list[Segment]:
        """The output as the input of another pass."""
        return [Segment(s.base_offset, list(s.batches), s.mtime_ms) for s in self.segments]


class IllegalStateError(Exception):
    """Kafka's IllegalStateException: the pass fails (a legacy batch must be kept empty)."""


# -- reading batches with kafka-python ------------------------------------------------------------
class Rec(NamedTuple):
    """One record as the cleaner sees it (Record): absolute offset, timestamp (-1: none), key,
    value, headers [(str, bytes | None)] and the magic it was written with."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    magic: int = 2


class Batch:
    """One batch (v2) or one shallow legacy entry (v0/v1), read with kafka-python, under the names of
    Kafka's RecordBatch. `data` is the batch's bytes as stored."""

    def __init__(self, data: bytes, peer):
        self.data = data
        self._peer = peer  # the kafka-python DefaultRecordBatch / LegacyRecordBatch header view
        self._records: list[Rec] | None = None
        self.magic = peer.magic
        self.size = peer.size_in_bytes
        if self.magic >= 2:
            self.partition_leader_epoch = peer.leader_epoch
            self.last_offset_delta = peer.last_offset_delta
            self.codec = peer.compression_type
            self.timestamp_type = peer.timestamp_type
            self.is_transactional = peer.is_transactional
            self.is_control = peer.is_control_batch
            self.producer_id = peer.producer_id
            self.producer_epoch = peer.producer_epoch
            self.base_sequence = peer.base_sequence
            self.last_sequence = peer.last_sequence
            self.base_timestamp = peer.first_timestamp
            self.max_timestamp = peer.max_timestamp
            # DefaultRecordBatch.deleteHorizonMs: the base timestamp when attribute bit 6 is set (KIP-534)
            self.has_delete_horizon = bool(peer.attributes & _DELETE_HORIZON_FLAG)
        else:
            # AbstractLegacyRecordBatch: no producer, no leader epoch, no horizon; maxTimestamp is the
            # (wrapper) message's own timestamp, which kafka-python keeps private: read at offset 18
            self.partition_leader_epoch = -1
            self.codec = peer.compression_type
            self.timestamp_type = NO_TIMESTAMP_TYPE if self.magic == 0 else peer.timestamp_type
            self.is_transactional = self.is_control = False
            self.producer_id, self.producer_epoch, self.base_sequence, self.last_sequence = -1, -1, -1, -1
            self.max_timestamp = struct.unpack_from(">q", data, 18)[0] if self.magic == 1 else NO_TIMESTAMP
            self.base_timestamp = self.max_timestamp
            self.has_delete_horizon = False

    # -- offsets ------------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        if self.magic >= 2:
            return self._peer.base_offset
        return self.records()[0].offset  # AbstractLegacyRecordBatch.baseOffset: the first (inner) record

    @property
    def last_offset(self) -> int:
        # v2: baseOffset + lastOffsetDelta; legacy: the entry's own offset (a wrapper's is its last inner)
        return self._peer.last_offset if self.magic >= 2 else self._peer.base_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > -1

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    def is_valid(self) -> bool:
        return type(self._peer)(self.data, *(() if self.magic >= 2 else (self.magic,))).validate_crc()

    # -- records ------------------------------------------------------------------------------
    def records(self) -> list[Rec]:
        if self._records is None:
            self._records = _v2_records(self.data) if self.magic >= 2 else _legacy_records(self.data, self.magic)
        return self._records

    @property
    def records_count(self) -> int:
        return self._peer.records_count if self.magic >= 2 else len(self.records())

    @property
    def has_inconsistent_inner_magic(self) -> bool:
        """KAFKA-4298: a compressed legacy wrapper holding messages of another magic."""
        return any(r.magic != self.magic for r in self.records())

    def control_marker(self) -> tuple[int, int, int] | None:
        """(type, coordinator epoch, timestamp) of a control batch's first record (EndTransactionMarker),
        None when the batch was emptied. kafka-python parses the key (ControlRecord); the value
        (version int16, coordinatorEpoch int32) is read here."""
        for record in DefaultRecordBatch(self.data):
            epoch = -1
            if record.type in (ABORT, COMMIT) and record.value is not None and len(record.value) >= 6:
                epoch = struct.unpack_from(">hi", record.value)[1]
            return record.type, epoch, record.timestamp
        return None

    def __repr__(self) -> str:
        return (
            f"Batch(magic={self.magic}, offsets={self.base_offset}..{self.last_offset}, "
            f"producer={self.producer_id}, control={self.is_control}, size={self.size})"
        )


def split_batches(data: bytes) -> list[Batch]:
    """The batches in `data` (which must hold whole batches), split by kafka-python's MemoryRecords."""
    data = bytes(data)
    records, out, pos = MemoryRecords(data), [], 0
    while records.has_next():
        peer = records.next_batch()
        size = peer.size_in_bytes
        out.append(Batch(data[pos : pos + size], peer))
        pos += size
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes after the last whole batch")
    return out


def _v2_records(data: bytes) -> list[Rec]:
    return [Rec(r.offset, r.timestamp, r.key, r.value, tuple(r.headers), 2) for r in DefaultRecordBatch(data)]


def _legacy_records(data: bytes, magic: int) -> list[Rec]:
    """AbstractLegacyRecordBatch's iterator: an uncompressed entry is its own record; a wrapper's value
    is decompressed and its inner messages are read each with its own magic (DeepRecordsIterator;
    kafka-python's wrapper iterator assumes the wrapper's magic, which a KAFKA-4298 wrapper breaks)."""
    peer = LegacyRecordBatch(data, magic)
    if not peer.compression_type:
        (r,) = list(peer)
        return [Rec(r.offset, _ts(r.timestamp), r.key, r.value, (), magic)]
    wrapper_offset = peer.base_offset
    wrapper_ts = struct.unpack_from(">q", data, 18)[0] if magic == 1 else NO_TIMESTAMP
    log_append = magic == 1 and peer.timestamp_type == LOG_APPEND_TIME
    inner = []
    for entry in MemoryRecords(_decompress(peer.compression_type, _legacy_value(data, magic), magic)):
        if entry.magic >= 2 or entry.compression_type:
            raise ValueError("a legacy wrapper holds a batch or another wrapper")
        (r,) = list(entry)
        ts = NO_TIMESTAMP if entry.magic == 0 else (wrapper_ts if log_append else _ts(r.timestamp))
        inner.append(Rec(r.offset, ts, r.key, r.value, (), entry.magic))
    if not inner:
        raise ValueError("Found invalid compressed record set with no inner records")
    if magic > 0:  # relative inner offsets; a 0 wrapper offset (some librdkafka versions) means base 0
        base = 0 if wrapper_offset == 0 else wrapper_offset - inner[-1].offset
        inner = [r._replace(offset=base + r.offset) for r in inner]
    return inner


def _ts(timestamp) -> int:
    return NO_TIMESTAMP if timestamp is None else timestamp


def _legacy_value(data: bytes, magic: int) -> bytes:
    """The value of a legacy message (LegacyRecord: crc, magic, attributes, [timestamp], key, value)."""
    pos = 18 + (8 if magic == 1 else 0)
    (key_len,) = struct.unpack_from(">i", data, pos)
    pos += 4 + max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", data, pos)
    if value_len < 0:
        raise ValueError("a compressed legacy wrapper has a null value")
    return data[pos + 4 : pos + 4 + value_len]


def _decompress(codec: int, data: bytes, magic: int) -> bytes:
    """kafka-python's codecs (kafka.codec)."""
    if codec == GZIP:
        return kafka_codec.gzip_decode(data)
    if codec == SNAPPY:
        return kafka_codec.snappy_decode(data)
    if codec == LZ4:
        return kafka_codec.lz4_decode_old_kafka(data) if magic == 0 else kafka_codec.lz4_decode(data)
    if codec == ZSTD:
        return kafka_codec.zstd_decode(data)
    raise ValueError(f"unknown codec {codec}")


# -- writing batches as Kafka's MemoryRecordsBuilder does -----------------------------------------
def _compress(codec: int, data: bytes, magic: int) -> bytes:
    """The stream Kafka's Compression.wrapForOutput writes (clients `common.compress`)."""
    if codec == GZIP:
        # GzipCompression: java.util.zip.GZIPOutputStream at Deflater's default level (zlib 6). Its
        # header has mtime 0, no flags and OS 255 (JDK 16+); the trailer is CRC-32 and size, little-endian
        deflater = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
        body = deflater.compress(data) + deflater.flush()
        return (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
            + body
            + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
        )
    if codec == SNAPPY:
        # SnappyCompression: snappy-java's SnappyOutputStream, the xerial framing in 32 KiB blocks,
        # which is what kafka-python's snappy_encode writes
        return kafka_codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    if codec == LZ4:
        # Lz4BlockOutputStream: FLG 0x60 (version 1, independent blocks), BD 0x40 (64 KiB blocks),
        # HC = second byte of xxh32(FLG, BD) (for magic 0 the broken KAFKA-3160 HC that also hashes
        # the magic number), blocks compressed by the fast compressor or stored (high bit) when that
        # does not shrink them, then an EndMark and no content checksum
        header = b"\x04\x22\x4d\x18\x60\x40"
        hashed = header if magic == 0 else header[4:]
        out = [header, bytes([(xxhash.xxh32_intdigest(hashed) >> 8) & 0xFF])]
        for i in range(0, len(data), 64 * 1024):
            block = data[i : i + 64 * 1024]
            packed = lz4.block.compress(block, mode="default", store_size=False)
            if len(packed) >= len(block):
                out += [struct.pack("<I", len(block) | 0x80000000), block]
            else:
                out += [struct.pack("<I", len(packed)), packed]
        return b"".join(out + [b"\x00\x00\x00\x00"])
    if codec == ZSTD:
        # ZstdCompression: zstd-jni's ZstdOutputStreamNoFinalizer at level 3 behind a BufferedOutputStream;
        # closing flushes (a block) and then ends the frame (an empty last block), no content size
        stream = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
        return stream.compress(data) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + stream.flush()
    raise ValueError(f"unknown codec {codec}")


def _varint(value: int, out: bytearray) -> None:
    encode_varint(value, out.append)  # zigzag, as ByteUtils.writeVarint / writeVarlong


def _v2_record(offset_delta: int, timestamp_delta: int, record: Rec) -> bytes:
    """DefaultRecord.writeTo: length, attributes 0, timestamp delta, offset delta, key, value, headers."""
    body = bytearray(b"\x00")
    _varint(timestamp_delta, body)
    _varint(offset_delta, body)
    for blob in (record.key, record.value):
        if blob is None:
            _varint(-1, body)
        else:
            _varint(len(blob), body)
            body += blob
    _varint(len(record.headers), body)
    for name, value in record.headers:
        name = name.encode("utf-8")
        _varint(len(name), body)
        body += name
        if value is None:
            _varint(-1, body)
        else:
            _varint(len(value), body)
            body += value
    out = bytearray()
    _varint(len(body), out)
    return bytes(out + body)


def _v2_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    partition_leader_epoch: int,
    codec: int,
    timestamp_type: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    is_control: bool,
    delete_horizon_set: bool,
    count: int,
    records: bytes,
) -> bytes:
    """DefaultRecordBatch.writeHeader: the 61-byte header, CRC-32C over attributes..end."""
    attributes = (
        (_TRANSACTIONAL_FLAG if is_transactional else 0)
        | (_CONTROL_FLAG if is_control else 0)
        | (codec & _CODEC_MASK)
        | (_TIMESTAMP_TYPE_FLAG if timestamp_type == LOG_APPEND_TIME else 0)
        | (_DELETE_HORIZON_FLAG if delete_horizon_set else 0)
    )
    body = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    return (
        struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(body), partition_leader_epoch, 2, calc_crc32c(body)) + body
    )


def _rebuild_v2(batch: Batch, retained: list[Rec], delete_horizon_ms: int) -> bytes:
    """MemoryRecords.buildRetainedRecordsInto + MemoryRecordsBuilder for magic 2: same codec, timestamp
    type, producer fields, flags and leader epoch; the base timestamp is the delete horizon when one is
    set (hasDeleteHorizonMs: >= 0), else the first record's; overrideLastOffset keeps the last offset."""
    log_append = batch.timestamp_type == LOG_APPEND_TIME
    horizon_set = delete_horizon_ms >= 0
    base_ts = delete_horizon_ms if horizon_set else retained[0].timestamp
    section = b"".join(_v2_record(r.offset - batch.base_offset, r.timestamp - base_ts, r) for r in retained)
    max_ts = batch.max_timestamp if log_append else max([NO_TIMESTAMP] + [r.timestamp for r in retained])
    return _v2_batch(
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset - batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        codec=batch.codec,
        timestamp_type=batch.timestamp_type,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        delete_horizon_set=horizon_set,
        count=len(retained),
        records=section if batch.codec == 0 else _compress(batch.codec, section, 2),
    )


def _empty_v2(batch: Batch) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader: no records, no codec, base timestamp -1, no horizon."""
    return _v2_batch(
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset - batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        codec=0,
        timestamp_type=batch.timestamp_type,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        delete_horizon_set=False,
        count=0,
        records=b"",
    )


def _legacy_message(
    offset: int, magic: int, codec: int, timestamp_type: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    """AbstractLegacyRecordBatch.writeHeader + LegacyRecord.write: offset, size, CRC-32 over magic..end,
    magic, attributes (codec, and for v1 the LogAppendTime bit), [timestamp], key, value."""
    attributes = codec | (_TIMESTAMP_TYPE_FLAG if magic > 0 and timestamp_type == LOG_APPEND_TIME else 0)
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic > 0 else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return struct.pack(">qiI", offset, 4 + len(body), calc_crc32(body)) + body


def _rebuild_legacy(batch: Batch, retained: list[Rec]) -> list[bytes]:
    """MemoryRecords.buildRetainedRecordsInto + MemoryRecordsBuilder for magic 0/1: the base offset is the
    first retained record's; every record is written with the batch's magic (fixing KAFKA-4298) and,
    for LogAppendTime, the append time. Uncompressed: one entry per record. Compressed: inner offsets
    relative to the base offset in v1 (absolute in v0), then a wrapper at the last record's offset
    whose timestamp is the append time, or the max record timestamp."""
    magic, codec, ts_type = batch.magic, batch.codec, batch.timestamp_type
    log_append_time = batch.max_timestamp if ts_type == LOG_APPEND_TIME else NO_TIMESTAMP
    base = retained[0].offset
    stamps = [log_append_time if ts_type == LOG_APPEND_TIME else r.timestamp for r in retained]
    if codec == 0:
        return [_legacy_message(r.offset, magic, 0, ts_type, t, r.key, r.value) for r, t in zip(retained, stamps)]
    inner = b"".join(
        _legacy_message(r.offset - base if magic > 0 else r.offset, magic, 0, ts_type, t, r.key, r.value)
        for r, t in zip(retained, stamps)
    )
    max_ts = max([NO_TIMESTAMP] + stamps) if magic > 0 else NO_TIMESTAMP
    wrapper_ts = log_append_time if ts_type == LOG_APPEND_TIME else max_ts
    return [
        _legacy_message(retained[-1].offset, magic, codec, ts_type, wrapper_ts, None, _compress(codec, inner, magic))
    ]


# -- segments as the cleaner sees them --------------------------------------------------------------
@dataclass
class _Seg:
    """A loaded input segment with the figures the cleaner reads from its files."""

    base_offset: int
    batches: list
    mtime_ms: int
    size: int = 0
    offset_index: list = field(default_factory=list)  # (offset, position) entries
    time_index_entries: int = 0
    max_timestamp: int = NO_TIMESTAMP
    txn_index: list = field(default_factory=list)  # the segment's AbortedTxn entries, in marker order

    @property
    def read_next_offset(self) -> int:
        """LogSegment.readNextOffset: the next offset after the last batch, the base when empty."""
        return self.batches[-1].next_offset if self.batches else self.base_offset

    @property
    def offset_index_bytes(self) -> int:
        return 8 * len(self.offset_index)  # OffsetIndex entries are 8 bytes

    @property
    def time_index_bytes(self) -> int:
        return 12 * self.time_index_entries  # TimeIndex entries are 12 bytes

    @property
    def largest_timestamp(self) -> int:
        """LogSegment.largestTimestamp: the max timestamp seen, else the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.mtime_ms

    def lookup(self, offset: int) -> int:
        """OffsetIndex.lookup(offset).position: the position of the greatest entry <= offset, else 0."""
        position = 0
        for entry_offset, entry_position in self.offset_index:
            if entry_offset <= offset:
                position = entry_position
        return position


def load_segments(segments: Iterable, index_interval_bytes: int = 4096) -> list[_Seg]:
    """Parse `(base_offset, [batch bytes], mtime_ms)` segments, measuring sizes and indexes."""
    segs = []
    for seg in segments:
        base, data, mtime = (tuple(seg) + (0,))[:3]
        s = _Seg(base, [b for chunk in data for b in split_batches(chunk)], mtime)
        _index(s, index_interval_bytes)
        segs.append(s)
    if not segs:
        raise ValueError("a partition has at least one (the active) segment")
    for a, b in zip(segs, segs[1:]):
        if a.base_offset >= b.base_offset:
            raise ValueError(f"segment base offsets must increase: {a.base_offset} then {b.base_offset}")
    return segs


def _index(seg: _Seg, interval: int) -> None:
    """LogSegment.recover: an offset index entry (batch last offset -> batch position) once more than
    index.interval.bytes were read since the last one, a time index entry with it when the max
    timestamp grew, and a last time index entry when the segment becomes inactive."""
    valid = last_entry = 0
    max_ts = last_time_entry = NO_TIMESTAMP
    for batch in seg.batches:
        max_ts = max(max_ts, batch.max_timestamp)
        if valid - last_entry > interval:
            seg.offset_index.append((batch.last_offset, valid))
            if max_ts > last_time_entry:  # TimeIndex.maybeAppend
                seg.time_index_entries += 1
                last_time_entry = max_ts
            last_entry = valid
        valid += batch.size
    if max_ts > last_time_entry:
        seg.time_index_entries += 1
    seg.size, seg.max_timestamp = valid, max_ts


def _floor(segs: Sequence[_Seg], offset: int) -> int:
    """Index of LogSegments.floorSegment(offset) (the first segment when the offset is below all)."""
    found = 0
    for i, s in enumerate(segs):
        if s.base_offset <= offset:
            found = i
    return found


# -- producer state -------------------------------------------------------------------------------
def replay_producers(segments: Iterable, log_start_offset: int | None = None) -> ProducerState:
    """The producer state a broker rebuilds from the log (UnifiedLog.rebuildProducerState reads each
    segment from the log start offset on; LogSegment.recover.updateProducerState), with the aborted
    transactions it indexes on the way."""
    segs = segments if segments and isinstance(segments[0], _Seg) else load_segments(segments)
    if log_start_offset is None:
        log_start_offset = segs[0].base_offset
    producers: dict[int, ProducerEntry] = {}
    ongoing: dict[int, int] = {}  # ProducerStateManager.ongoingTxns: first offset -> producer id
    aborted, completed = [], []
    for seg in segs:
        for batch in seg.batches:
            # only v2 batches carry producer ids (RecordBatch.hasProducerId)
            if batch.magic < 2 or not batch.has_producer_id or batch.last_offset < log_start_offset:
                continue
            pid = batch.producer_id
            entry = producers.setdefault(pid, ProducerEntry(pid))
            if not batch.is_control:
                # ProducerAppendInfo.appendDataBatch -> ProducerStateEntry.addBatch: a new epoch clears
                # the batch metadata; the batch becomes the last one; a transactional batch with no
                # transaction open starts one at its base offset
                entry.epoch = batch.producer_epoch
                entry.last_data_offset, entry.last_sequence = batch.last_offset, batch.last_sequence
                entry.last_timestamp = batch.max_timestamp
                if batch.is_transactional and entry.txn_first_offset is None:
                    entry.txn_first_offset = batch.base_offset
                    ongoing[batch.base_offset] = pid
                continue
            marker = batch.control_marker()
            if marker is None or marker[0] not in (ABORT, COMMIT):
                continue  # ProducerAppendInfo.append: an empty control batch changes nothing
            kind, coordinator_epoch, timestamp = marker
            # ProducerAppendInfo.appendEndTxnMarker: a transaction completes only if one is open
            if entry.txn_first_offset is not None:
                first = entry.txn_first_offset
                if kind == ABORT:
                    # ProducerStateManager.lastStableOffset(completedTxn): the first offset of the
                    # earliest transaction of another producer still open, else the marker + 1
                    others = [f for f, p in ongoing.items() if p != pid]
                    aborted.append(
                        AbortedTxn(pid, first, batch.base_offset, min(others) if others else batch.base_offset + 1)
                    )
                completed.append((first, batch.base_offset))
                del ongoing[first]  # ProducerStateManager.completeTxn
            # ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp)
            if batch.producer_epoch != entry.epoch:
                entry.epoch, entry.last_data_offset, entry.last_sequence = batch.producer_epoch, -1, -1
            entry.coordinator_epoch, entry.txn_first_offset, entry.last_timestamp = coordinator_epoch, None, timestamp
    return ProducerState(producers, aborted, completed)


def active_producers(
    producers: dict[int, ProducerEntry], now: int, expiration_ms: int | None
) -> dict[int, ProducerEntry]:
    """ProducerStateManager.activeProducers after removeExpiredProducers(now): isProducerExpired is
    `no transaction open and now - lastTimestamp >= producer.id.expiration.ms`."""
    if expiration_ms is None:
        return dict(producers)
    return {
        pid: e
        for pid, e in producers.items()
        if e.txn_first_offset is not None or now - e.last_timestamp < expiration_ms
    }


def last_stable_offset(state: ProducerState, high_watermark: int) -> int:
    """UnifiedLog.lastStableOffset: ProducerStateManager.firstUnstableOffset (the earliest first offset
    of an open transaction, or of a completed one whose marker is not below the high watermark:
    onHighWatermarkUpdated drops the others), if below the high watermark; else the high watermark."""
    unstable = [e.txn_first_offset for e in state.producers.values() if e.txn_first_offset is not None]
    unstable += [first for first, marker in state.completed if marker >= high_watermark]
    return min([high_watermark] + unstable)


# -- cleanable range ------------------------------------------------------------------------------
class CleanableRange(NamedTuple):
    first_dirty: int
    first_uncleanable: int  # rounded down to a segment boundary
    checkpoint_reset: bool


def cleanable_range(
    segs: Sequence[_Seg],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    last_stable: int,
    min_compaction_lag_ms: int,
    now: int,
    uncleanable_offset: int | None = None,
) -> CleanableRange:
    """LogCleanerManager.cleanableOffsets, then LogToClean (LogCleanerManager.calculateCleanableBytes)
    rounding to a segment base. `uncleanable_offset` replaces the computed offset, as Kafka's cleaner
    tests do when they build a LogToClean by hand."""
    log_end = segs[-1].read_next_offset
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    reset = checkpoint is not None and (checkpoint < log_start_offset or checkpoint > log_end)
    if reset:
        first_dirty = log_start_offset
    active_base = segs[-1].base_offset
    if uncleanable_offset is None:
        # not past the last stable offset, the active segment, nor the first dirty non-active segment
        # newer than min.compaction.lag.ms (LogSegment.largestTimestamp > now - lag)
        candidates = [last_stable, active_base]
        if max(min_compaction_lag_ms, 0) > 0:
            for s in segs[_floor(segs, first_dirty) : -1]:  # UnifiedLog.nonActiveLogSegmentsFrom(firstDirty)
                if s.largest_timestamp > now - min_compaction_lag_ms:
                    candidates.append(s.base_offset)
                    break
        uncleanable = max(first_dirty, min(candidates))
    else:
        uncleanable = uncleanable_offset
    # calculateCleanableBytes: the first non-active segment from the uncleanable offset, else the active one
    non_active = segs[:-1]
    if uncleanable < active_base and non_active:
        first_uncleanable = non_active[_floor(non_active, uncleanable)].base_offset
    else:
        first_uncleanable = active_base
    return CleanableRange(first_dirty, first_uncleanable, reset)


# -- offset map -----------------------------------------------------------------------------------
class OffsetMap:
    """SkimpyOffsetMap without hashing: key bytes -> last offset, and latestOffset. `capacity` keys at
    most: buildOffsetMapForSegment refuses a put once `map.size() >= slots * loadFactor`, even for a
    key already in the map."""

    def __init__(self, capacity: int | None):
        if capacity is not None and capacity < 1:
            raise ValueError("the offset map must hold at least one key")
        self.capacity = capacity
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def full(self) -> bool:
        return self.capacity is not None and len(self.offsets) >= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        if self.full():
            return False
        self.offsets[key] = offset
        self.latest_offset = offset  # SkimpyOffsetMap.put updates lastOffset too
        return True

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)


def _collect_aborted(segs: Sequence[_Seg], start: int, upper: int, log_start_offset: int) -> list[AbortedTxn]:
    """UnifiedLog.collectAbortedTransactions(start, upper) -> LocalLog.collectAbortedTransactions: from
    the floor segment of `start` on, each segment's TransactionIndex.collectAbortedTxns with fetchOffset
    = the *log start offset* (LocalLog passes logStartOffset down): entries with lastOffset >= it and
    firstOffset < upper, until an entry with lastStableOffset >= upper completes the search."""
    out = []
    for seg in segs[_floor(segs, start) :]:
        for txn in seg.txn_index:
            if txn.last_offset >= log_start_offset and txn.first_offset < upper:
                out.append(txn)
            if txn.last_stable_offset >= upper:
                return out
    return out


def build_offset_map(
    segs: Sequence[_Seg],
    start: int,
    end: int,
    aborted: Sequence[AbortedTxn] | None = None,
    capacity: int | None = None,
    log_start_offset: int | None = None,
) -> OffsetMap:
    """Cleaner.buildOffsetMap: the last offset of every key in [start, end), skipping the data batches of
    aborted transactions; each dirty segment is read from the offset index position of `start`
    (buildOffsetMapForSegment) and, once fully read, fast-forwards the latest offset to the next
    segment's base - 1; the map stops at the first key it cannot take. `aborted` are .txnindex
    entries (default: the segments' own)."""
    if aborted is not None:
        segs = _with_txn_index(segs, aborted)
    if log_start_offset is None:
        log_start_offset = segs[0].base_offset
    omap = OffsetMap(capacity)
    tracker = TxnTracker()
    tracker.add_aborted(_collect_aborted(segs, start, end, log_start_offset))
    dirty = segs[_floor(segs, start) :]  # UnifiedLog.logSegments(start, end)
    dirty = [s for s in dirty if s.base_offset < end] if start != end else []
    for i, seg in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        position, pos = seg.lookup(start), 0
        for batch in seg.batches:
            pos += batch.size
            if pos - batch.size < position:
                continue
            if batch.is_control:
                tracker.on_control_batch(batch)
            elif not tracker.on_data_batch(batch):
                for record in batch.records():
                    if record.key is not None and record.offset >= start:
                        if not omap.put(record.key, record.offset):
                            return omap  # full: the pass ends at latestOffset + 1
            if batch.last_offset >= start:
                omap.latest_offset = batch.last_offset  # OffsetMap.updateLatestOffset
        omap.latest_offset = next_start - 1
    return omap


# -- segment grouping -----------------------------------------------------------------------------
def group_segments(
    segs: Sequence[_Seg], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[_Seg]]:
    """Cleaner.groupSegmentsBySize: a segment joins the group while the log bytes stay within
    segment.bytes, the offset and time index bytes each within segment.index.bytes, and (unless the
    segment is empty) its last offset - estimated as the next segment's base - 1, or the first
    uncleanable offset - 1 for the last one (lastOffsetForFirstSegment) - within Int.MAX of the
    group's first base offset."""
    groups, rest = [], list(segs)
    while rest:
        group = [rest.pop(0)]
        log_size, index_size, time_size = group[0].size, group[0].offset_index_bytes, group[0].time_index_bytes
        while rest:
            s = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable - 1
            if not (
                log_size + s.size <= max_size
                and index_size + s.offset_index_bytes <= max_index_size
                and time_size + s.time_index_bytes <= max_index_size
                and (s.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)
            ):
                break
            group.append(rest.pop(0))
            log_size, index_size, time_size = (
                log_size + s.size,
                index_size + s.offset_index_bytes,
                time_size + s.time_index_bytes,
            )
        groups.append(group)
    return groups


# -- transaction tracker --------------------------------------------------------------------------
class TxnTracker:
    """CleanedTransactionMetadata: aborted transactions wait in a min-heap by first offset until the
    cleaner reads a batch whose last offset reaches them; a producer then has at most one ongoing
    aborted transaction (computeIfAbsent), with the last offset of its data batches seen so far."""

    def __init__(self):
        self._pending: list[AbortedTxn] = []  # the PriorityQueue (order among equal first offsets is moot)
        self.ongoing_aborted: dict[int, list] = {}  # producer id -> [AbortedTxn, lastObservedBatchOffset]
        self.ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] | None = None  # setCleanedIndex: the output segment's .txnindex

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        self._pending.extend(txns)

    def _consume_up_to(self, offset: int) -> None:
        """consumeAbortedTxnsUpTo."""
        ready = sorted((t for t in self._pending if t.first_offset <= offset), key=lambda t: t.first_offset)
        self._pending = [t for t in self._pending if t.first_offset > offset]
        for txn in ready:
            if txn.producer_id not in self.ongoing_aborted:
                self.ongoing_aborted[txn.producer_id] = [txn, None]

    def on_data_batch(self, batch: Batch) -> bool:
        """onBatchRead: True when the batch is data of an aborted transaction (discardable). A
        transactional batch of no aborted transaction marks its producer's transaction as committed."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self.ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing[1] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch(self, batch: Batch) -> bool:
        """onControlBatchRead: True when the marker can be discarded. An ABORT is kept (and its entry
        written to the cleaned .txnindex) while a batch of its transaction was seen in this pass; a
        COMMIT while its producer's committed data was seen; other control types are kept; an empty
        control batch (emptied by an earlier pass) is discardable."""
        self._consume_up_to(batch.last_offset)
        marker = batch.control_marker()
        if marker is None:
            return True
        if marker[0] == ABORT:
            ongoing = self.ongoing_aborted.pop(batch.producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        if marker[0] == COMMIT:
            if batch.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(batch.producer_id)
                return False
            return True
        return False


# -- batch and record decisions -------------------------------------------------------------------
RETAIN_EMPTY, DELETE, DELETE_EMPTY = "RETAIN_EMPTY", "DELETE", "DELETE_EMPTY"


@dataclass
class _Pass:
    """What the decisions of one pass share (Cleaner.cleanInto's RecordFilter)."""

    omap: OffsetMap
    tracker: TxnTracker
    active: dict[int, ProducerEntry]  # UnifiedLog.lastRecordsOfActiveProducers
    upper_bound: int  # upperBoundOffsetOfCleaningRound = firstUncleanableOffset
    now: int
    delete_retention_ms: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))

    def is_last_record_of_producer(self, batch: Batch) -> bool:
        """checkBatchRetention's isBatchLastRecordOfProducer: the batch holding an active producer's
        last data offset or, when the producer has none (its last entry is a marker), a control
        batch of its current epoch."""
        entry = self.active.get(batch.producer_id)
        if entry is None:
            return False
        if entry.last_data_offset >= 0:
            return batch.last_offset == entry.last_data_offset
        return batch.is_control and batch.producer_epoch == entry.epoch

    def clean_batch(self, batch: Batch, retain_legacy_deletes: bool) -> list[bytes]:
        """The batches that replace `batch` in the cleaned segment: MemoryRecords.filterTo with the
        cleaner's RecordFilter."""
        # checkBatchRetention (shouldDiscardBatch -> CleanedTransactionMetadata)
        can_discard = self.tracker.on_control_batch(batch) if batch.is_control else self.tracker.on_data_batch(batch)
        if batch.is_control:  # markers go only once their delete horizon (KIP-534) has passed
            discard_records = (
                can_discard and batch.delete_horizon_ms is not None and batch.delete_horizon_ms <= self.now
            )
        else:
            discard_records = can_discard
        if batch.has_producer_id and self.is_last_record_of_producer(batch):
            retention = RETAIN_EMPTY
        elif batch.next_offset == self.upper_bound:
            retention = RETAIN_EMPTY  # the last batch of the round keeps its offsets
        elif discard_records:
            retention = DELETE
        else:
            retention = DELETE_EMPTY
        contains_marker_for_empty_txn = can_discard and batch.is_control

        # filterBatch: shouldRetainRecord per record; KAFKA-4298 rewrites a wrapper with a foreign magic
        retained, write_original, tombstones = [], True, False
        for record in batch.records():
            reason = self._record_fate(batch, record, discard_records, retain_legacy_deletes)
            self.counts[reason] += 1
            if reason == "kept":
                retained.append(record)
                write_original = write_original and record.magic == batch.magic
                tombstones = tombstones or record.value is None
            else:
                write_original = False
        if retention == DELETE:
            return []
        if retained:
            need_horizon = (
                batch.magic >= 2 and (tombstones or contains_marker_for_empty_txn) and not batch.has_delete_horizon
            )
            if write_original and not need_horizon:
                return [batch.data]
            if batch.magic < 2:
                return _rebuild_legacy(batch, retained)
            if need_horizon:  # currentTime + deleteRetentionMs, a Java long (it may wrap negative)
                horizon = (self.now + self.delete_retention_ms + 2**63) % 2**64 - 2**63
            else:
                horizon = batch.delete_horizon_ms if batch.has_delete_horizon else NO_TIMESTAMP
            return [_rebuild_v2(batch, retained, horizon)]
        if retention == RETAIN_EMPTY:
            if batch.magic < 2:
                raise IllegalStateError("Empty batches are only supported for magic v2 and above")
            self.counts["empty_batches"] = self.counts.get("empty_batches", 0) + 1
            return [_empty_v2(batch)]
        return []

    def _record_fate(self, batch: Batch, record: Rec, discard_records: bool, retain_legacy_deletes: bool) -> str:
        """The RecordFilter's shouldRetainRecord and Cleaner.shouldRetainRecord, naming the reason a
        record goes: all of a discarded batch; every record of a control batch; any record past the
        map's latest offset; else a keyed record at or after its key's mapped offset, a tombstone
        only while its v2 batch has no delete horizon or the horizon is still ahead (legacy: while its
        segment is newer than the legacy delete horizon). An unkeyed record is invalid."""
        if discard_records:
            return "marker_removed" if batch.is_control else "aborted_transaction"
        if batch.is_control or record.offset > self.omap.latest_offset:
            return "kept"
        if record.key is None:
            return "unkeyed"
        if record.offset < self.omap.get(record.key):
            return "superseded"
        if record.value is None:
            if batch.magic >= 2:
                retain_deletes = batch.delete_horizon_ms is None or self.now < batch.delete_horizon_ms
            else:
                retain_deletes = retain_legacy_deletes
            if not retain_deletes:
                return "tombstone_expired"
        return "kept"


# -- one pass -------------------------------------------------------------------------------------
def _with_txn_index(segs: Sequence[_Seg], aborted: Sequence[AbortedTxn]) -> list[_Seg]:
    """The segments with their .txnindex files: each entry in the segment holding its marker."""
    out = [replace(s, txn_index=[]) for s in segs]
    for txn in aborted:
        out[_floor(out, txn.last_offset)].txn_index.append(txn)
    return out


def clean(
    segments: Iterable,
    *,
    now: int,
    config: CleanerConfig = CleanerConfig(),
    log_start_offset: int | None = None,
    checkpoint: int | None = None,
    high_watermark: int | None = None,
    aborted_txns: Sequence[AbortedTxn] | None = None,
    producers: dict[int, ProducerEntry] | None = None,
    uncleanable_offset: int | None = None,
) -> CleanResult:
    """One pass of Kafka's cleaner (Cleaner.doClean) over a partition, at time `now`.

    segments: `(base_offset, [batch bytes], mtime_ms)` in offset order; the last is the active one.
    log_start_offset: default the first segment's base offset.
    checkpoint: the partition's cleaner-offset-checkpoint entry (None = absent).
    high_watermark: default the log end offset; the LSO is computed from the open transactions.
    aborted_txns: the partition's .txnindex entries; default derived by replaying the markers.
    producers: producer state to use instead of replaying the input (e.g. the state before an
        earlier pass, as a live broker would have it); expiration at `now` still applies.
    uncleanable_offset: overrides the computed first uncleanable offset (it is still rounded down
        to a segment boundary), like a hand-built LogToClean in Kafka's tests.
    """
    segs = load_segments(segments, config.index_interval_bytes)
    if log_start_offset is None:
        log_start_offset = segs[0].base_offset
    replayed = replay_producers(segs, log_start_offset)
    state = producers if producers is not None else replayed.producers
    segs = _with_txn_index(segs, aborted_txns if aborted_txns is not None else replayed.aborted_txns)
    log_end = segs[-1].read_next_offset
    lso = last_stable_offset(replayed, log_end if high_watermark is None else min(high_watermark, log_end))
    rng = cleanable_range(
        segs,
        checkpoint=checkpoint,
        log_start_offset=log_start_offset,
        last_stable=lso,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        now=now,
        uncleanable_offset=uncleanable_offset,
    )
    active = active_producers(state, now, config.producer_id_expiration_ms)

    def untouched(seg: _Seg) -> OutputSegment:
        return OutputSegment(seg.base_offset, [b.data for b in seg.batches], seg.mtime_ms, list(seg.txn_index))

    if rng.first_uncleanable <= rng.first_dirty:  # nothing cleanable: Kafka would not pick this log
        return CleanResult(
            [untouched(s) for s in segs],
            rng.first_dirty,
            rng.first_dirty,
            rng.first_uncleanable,
            rng.checkpoint_reset,
            False,
            lso,
            _totals({}),
            state,
            active,
        )

    omap = build_offset_map(segs, rng.first_dirty, rng.first_uncleanable, None, config.map_capacity, log_start_offset)
    end_offset = omap.latest_offset + 1
    # the legacy delete horizon: the last modified time of the last segment before the dirty section,
    # less delete.retention.ms (0 when there is none)
    before_dirty = [s for s in segs if s.base_offset < rng.first_dirty]
    legacy_horizon = before_dirty[-1].mtime_ms - config.delete_retention_ms if before_dirty else 0
    to_clean = [s for s in segs if s.base_offset < end_offset]  # UnifiedLog.logSegments(0, endOffset)
    ctx = _Pass(omap, TxnTracker(), active, rng.first_uncleanable, now, config.delete_retention_ms)
    out: list[OutputSegment] = []
    for group in group_segments(to_clean, config.segment_bytes, config.segment_index_bytes, rng.first_uncleanable):
        # Cleaner.cleanSegments: one transaction tracker for the whole pass, a new .txnindex per group
        batches: list[bytes] = []
        ctx.tracker.cleaned_index = index = []
        for j, seg in enumerate(group):
            upper = group[j + 1].base_offset if j + 1 < len(group) else seg.read_next_offset
            ctx.tracker.add_aborted(_collect_aborted(segs, seg.base_offset, upper, log_start_offset))
            retain_legacy = seg.mtime_ms > legacy_horizon  # retainLegacyDeletesAndTxnMarkers
            for batch in seg.batches:
                ctx.counts["batches_read"] = ctx.counts.get("batches_read", 0) + 1
                ctx.counts["bytes_read"] = ctx.counts.get("bytes_read", 0) + batch.size
                batches += ctx.clean_batch(batch, retain_legacy)
        ctx.counts["batches_written"] = ctx.counts.get("batches_written", 0) + len(batches)
        ctx.counts["bytes_written"] = ctx.counts.get("bytes_written", 0) + sum(map(len, batches))
        # the cleaned segment takes the last modified time of the last segment of its group
        out.append(OutputSegment(group[0].base_offset, batches, group[-1].mtime_ms, index))
    out += [untouched(s) for s in segs if s.base_offset >= end_offset]
    return CleanResult(
        out,
        end_offset,
        rng.first_dirty,
        rng.first_uncleanable,
        rng.checkpoint_reset,
        True,
        lso,
        _totals(ctx.counts),
        state,
        active,
    )


def _totals(counts: dict[str, int]) -> dict[str, int]:
    out = dict.fromkeys(REASONS, 0)
    out.update(
        dict.fromkeys(
            ("records_read", "batches_read", "batches_written", "empty_batches", "bytes_read", "bytes_written"), 0
        )
    )
    out.update(counts)
    out["records_read"] = sum(out[r] for r in REASONS)
    return out


def clean_twice(
    segments: Iterable, *, now: int, config: CleanerConfig = CleanerConfig(), carry_producers: bool = True, **kwargs
) -> tuple[CleanResult, CleanResult]:
    """Kafka's runTwoPassClean: a pass at `now` (which stamps delete horizons), then a pass over its
    output at now + delete.retention.ms + 1 with the same checkpoint (which removes what expired).
    The second pass reads the first one's .txnindex entries and, with `carry_producers`, the
    producer state of the first (a broker's producer state is not changed by cleaning)."""
    first = clean(segments, now=now, config=config, **kwargs)
    kwargs["aborted_txns"] = first.aborted_txns
    if carry_producers:
        kwargs["producers"] = first.producers
    second = clean(first.as_input(), now=now + config.delete_retention_ms + 1, config=config, **kwargs)
    return first, second


def with_config(config: CleanerConfig, **changes) -> CleanerConfig:
    return replace(config, **changes)


__all__ = [
    "AbortedTxn",
    "Batch",
    "CleanResult",
    "CleanableRange",
    "CleanerConfig",
    "IllegalStateError",
    "OffsetMap",
    "OutputSegment",
    "ProducerEntry",
    "ProducerState",
    "REASONS",
    "Rec",
    "Segment",
    "TxnTracker",
    "active_producers",
    "build_offset_map",
    "clean",
    "clean_twice",
    "cleanable_range",
    "group_segments",
    "last_stable_offset",
    "load_segments",
    "replay_producers",
    "split_batches",
    "with_config",
]
