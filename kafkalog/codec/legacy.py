"""Legacy message formats v0 and v1 (magic 0 and 1): log entries, compressed wrappers, writers (Kafka's LegacyRecord).

Before record batches, every message was its own log entry: offset, messageSize, then a message
made of a CRC-32 (IEEE), magic, attributes, a timestamp (v1 only), key and value. Compression put a
whole message set into the value of one "wrapper" message, whose offset is that of the last inner
message. `LegacyBatch` shows one log entry under `RecordBatch`'s names, so the layers above can
treat v0/v1 and v2 alike; `build_legacy_message` and `build_legacy_batch` write them back.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import (
    CorruptBatchError,
    CrcMismatchError,
    DecompressionLimitError,
    KafkaLogError,
    TruncatedDataError,
    UnsupportedFormatError,
)

# shared with v2: the log overhead (offset and size), the attributes' low bits, "no timestamp"
from .batch import COMPRESSION_MASK, LOG_OVERHEAD, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, AbstractBatch, TimestampType
from .compression import DEFAULT_DECOMPRESSION_LIMIT, MAX_RECORDS_PER_BATCH, Codec, compress, decompress
from .records import Record

# offset, messageSize, crc, magic: what a reader needs to tell v0/v1 from v2 (HEADER_SIZE_UP_TO_MAGIC)
ENTRY_HEADER = struct.Struct(">qiIb")
OFFSET_SIZE_CRC = struct.Struct(">qiI")
OFFSET_AND_SIZE = struct.Struct(">qi")
TIMESTAMP = struct.Struct(">q")
LENGTH = struct.Struct(">i")
CRC_OFFSET = 12
MAGIC_OFFSET = 16  # the CRC covers [magic, end of message)
TIMESTAMP_OFFSET = 18
RECORD_OVERHEAD_V0 = 14  # crc, magic, attributes, key length, value length
RECORD_OVERHEAD_V1 = 22  # ... plus the timestamp

LEGACY_MAGICS = (0, 1)


class _Message(NamedTuple):
    """One decoded message of a wrapper's inner set, offset as stored (relative in v1 wrappers)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _header_size(magic: int) -> int:
    """Bytes from the entry start to the key length field."""
    return TIMESTAMP_OFFSET + (TIMESTAMP.size if magic == 1 else 0)


def _read_sized(buf, pos: int, end: int, what: str) -> tuple[tuple[int, int] | None, int]:
    """The span of an int32-length-prefixed field; any negative length is null, as in Kafka."""
    if pos + LENGTH.size > end:
        raise CorruptBatchError(f"{what} length runs past the end of the message", position=pos)
    (length,) = LENGTH.unpack_from(buf, pos)
    start = pos + LENGTH.size
    if length < 0:
        return None, start
    if start + length > end:
        raise CorruptBatchError(f"{what} of {length} bytes runs past the end of the message", position=pos)
    return (start, start + length), start + length


def _key_value_spans(buf, pos: int, end: int, magic: int):
    """Spans of key and value of the message whose entry starts at `pos` and ends at `end`."""
    key, p = _read_sized(buf, pos + _header_size(magic), end, "key")
    value, p = _read_sized(buf, p, end, "value")
    if p != end:  # Kafka never writes bytes after the value, and the CRC would cover them
        raise CorruptBatchError(f"{end - p} unexpected bytes after the value", position=p)
    return key, value


def _span_bytes(buf, span) -> bytes | None:
    return None if span is None else bytes(buf[span[0] : span[1]])


def _check_message_size(magic: int, size: int, pos: int, offset: int) -> None:
    if magic == 1 and size < RECORD_OVERHEAD_V1:
        raise CorruptBatchError(
            f"v1 message size {size} is below the minimum {RECORD_OVERHEAD_V1}", position=pos + 8, offset=offset
        )


class LegacyBatch(AbstractBatch):
    """The v0/v1 log entry at `position` in `buf`: one message, or a compressed wrapper of several.

    The fixed fields are read eagerly (`timestamp` is the message's own field, -1 in v0); key,
    value and a wrapper's inner messages only when asked, and then cached. Names follow
    `RecordBatch`; v2-only fields report what Kafka's legacy batches report (-1, False, None).
    """

    __slots__ = (
        "buf",
        "position",
        "last_offset",
        "message_size",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "_records",
        "_inner_magics",
    )
    last_offset: int
    _records: tuple[Record, ...] | None
    _inner_magics: tuple[int, ...] | None

    # v2-only header fields, as Kafka's legacy batches report them
    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon_ms = None
    has_producer_id = False

    def __init__(self, buf, position: int = 0):
        remaining = len(buf) - position
        if remaining < ENTRY_HEADER.size:
            raise TruncatedDataError(
                f"log entry header needs {ENTRY_HEADER.size} bytes, {remaining} remain", position=position
            )
        self.last_offset, self.message_size, self.crc, self.magic = ENTRY_HEADER.unpack_from(buf, position)
        self.buf = buf
        self.position = position
        if self.message_size < RECORD_OVERHEAD_V0:
            raise CorruptBatchError(
                f"message size {self.message_size} is below the minimum record overhead {RECORD_OVERHEAD_V0}",
                position=position + 8,
                offset=self.last_offset,
            )
        if self.size > remaining:
            raise TruncatedDataError(
                f"log entry declares {self.size} bytes, {remaining} remain", position=position, offset=self.last_offset
            )
        if self.magic == 2:
            raise CorruptBatchError(
                "magic 2 is a record batch, not a legacy message",
                position=position + MAGIC_OFFSET,
                offset=self.last_offset,
            )
        if self.magic not in LEGACY_MAGICS:
            raise UnsupportedFormatError(
                f"unknown magic {self.magic}", position=position + MAGIC_OFFSET, offset=self.last_offset
            )
        _check_message_size(self.magic, self.message_size, position, self.last_offset)
        self.attributes = buf[position + MAGIC_OFFSET + 1]
        self.timestamp = TIMESTAMP.unpack_from(buf, position + TIMESTAMP_OFFSET)[0] if self.magic == 1 else NO_TIMESTAMP
        self._records = None
        self._inner_magics = None

    # -- header values --------------------------------------------------------------------
    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.message_size

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        """The message's timestamp: for a v1 wrapper, the max inner (or the append) time."""
        return self.timestamp

    @property
    def base_offset(self) -> int:
        """The first record's offset: for a wrapper, this decodes the inner set."""
        if self.codec == Codec.NONE:
            return self.last_offset
        return self._decoded()[0].offset

    @property
    def records_count(self) -> int:
        return 1 if self.codec == Codec.NONE else len(self._decoded())

    @property
    def has_inconsistent_inner_magic(self) -> bool:
        """A wrapper holding messages of another magic (KAFKA-4298); the cleaner rewrites those."""
        if self.codec == Codec.NONE:
            return False
        self._decoded()
        assert self._inner_magics is not None  # decoding a wrapper sets it
        return any(magic != self.magic for magic in self._inner_magics)

    # -- checks ---------------------------------------------------------------------------
    def compute_crc(self) -> int:
        return zlib.crc32(memoryview(self.buf)[self.position + MAGIC_OFFSET : self.position + self.size])

    def verify(self) -> None:
        """Raise CrcMismatchError unless the stored CRC-32 matches (Kafka's ensureValid)."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CrcMismatchError(
                f"CRC-32 mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                position=self.position + CRC_OFFSET,
                offset=self.last_offset,
            )

    # -- records --------------------------------------------------------------------------
    def records(self, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> list[Record]:
        """The records with absolute offsets, as Kafka's deep iterator yields them."""
        return list(self._decoded(limit))

    def _decoded(self, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> tuple[Record, ...]:
        if self._records is None:
            if self.codec == Codec.NONE:
                key, value = self._key_value()
                self._records = (Record(self.last_offset, self.timestamp, key, value),)
            else:
                self._records = self._decode_wrapper(limit)
        return self._records

    def _key_value_spans(self):
        try:
            return _key_value_spans(self.buf, self.position, self.position + self.size, self.magic)
        except CorruptBatchError as err:
            err.offset = self.last_offset
            raise

    def _key_value(self):
        key, value = self._key_value_spans()
        return _span_bytes(self.buf, key), _span_bytes(self.buf, value)

    def _decode_wrapper(self, limit: int) -> tuple[Record, ...]:
        inner = self._inner_messages(self._decompressed_value(limit))
        self._inner_magics = tuple(message.magic for message in inner)
        base = self._absolute_base(inner[-1].offset)
        log_append_time = self.timestamp if self.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        out = []
        for message in inner:
            timestamp = message.timestamp
            # Only v1 inner messages take the wrapper's append time; v0 ones have no timestamp at all.
            if message.magic == 1 and log_append_time is not None:
                timestamp = log_append_time
            out.append(Record(base + message.offset, timestamp, message.key, message.value))
        return tuple(out)

    def _decompressed_value(self, limit: int) -> bytes:
        if self.codec == Codec.ZSTD:
            raise UnsupportedFormatError(
                f"zstd is not allowed with magic {self.magic}",
                position=self.position + MAGIC_OFFSET + 1,
                offset=self.last_offset,
            )
        if self.codec > Codec.ZSTD:
            raise UnsupportedFormatError(
                f"unknown compression codec id {self.codec}",
                position=self.position + MAGIC_OFFSET + 1,
                offset=self.last_offset,
            )
        _, value = self._key_value_spans()
        if value is None:
            raise CorruptBatchError(
                "compressed wrapper message has a null value", position=self.position, offset=self.last_offset
            )
        try:
            return decompress(self.codec, memoryview(self.buf)[value[0] : value[1]], magic=self.magic, limit=limit)
        except KafkaLogError as err:  # the codec only knows positions inside the value, if any
            located = err.located(base_position=value[0], offset=self.last_offset)
            if located.position is None:
                located.position = self.position
            raise located from None

    def _inner_messages(self, data) -> list[_Message]:
        messages: list[_Message] = []
        pos = 0
        try:
            # Kafka's inner reader ends quietly when fewer than 12 bytes or a partial entry remain.
            while len(data) - pos >= LOG_OVERHEAD:
                offset, size = OFFSET_AND_SIZE.unpack_from(data, pos)
                if size < RECORD_OVERHEAD_V0:
                    raise CorruptBatchError(
                        f"inner message size {size} is below the minimum {RECORD_OVERHEAD_V0}", position=pos + 8
                    )
                end = pos + LOG_OVERHEAD + size
                if end > len(data):
                    break
                if len(messages) == MAX_RECORDS_PER_BATCH:
                    raise DecompressionLimitError(
                        f"the wrapper holds more than {MAX_RECORDS_PER_BATCH} inner messages; kafkalog decodes "
                        "at most that many records of one batch (docs/semantics.md)",
                        position=self.position,
                        offset=self.last_offset,
                    )
                messages.append(self._inner_message(data, pos, end, offset, size))
                pos = end
        except CorruptBatchError as err:
            raise type(err)(
                f"{err.message} (byte {err.position} of the decompressed wrapper value)",
                position=self.position,
                offset=self.last_offset,
            ) from None
        if not messages:
            raise CorruptBatchError(
                "compressed wrapper message holds no inner messages", position=self.position, offset=self.last_offset
            )
        return messages

    @staticmethod
    def _inner_message(data, pos: int, end: int, offset: int, size: int) -> _Message:
        magic, attributes = data[pos + MAGIC_OFFSET], data[pos + MAGIC_OFFSET + 1]
        if magic not in LEGACY_MAGICS:
            raise CorruptBatchError(f"inner message has magic {magic}", position=pos + MAGIC_OFFSET)
        if attributes & COMPRESSION_MASK:
            raise CorruptBatchError("inner messages must not be compressed", position=pos + MAGIC_OFFSET + 1)
        _check_message_size(magic, size, pos, offset)
        timestamp = TIMESTAMP.unpack_from(data, pos + TIMESTAMP_OFFSET)[0] if magic == 1 else NO_TIMESTAMP
        key, value = _key_value_spans(data, pos, end, magic)
        return _Message(offset, magic, attributes, timestamp, _span_bytes(data, key), _span_bytes(data, value))

    def _absolute_base(self, last_inner_offset: int) -> int:
        """What to add to each inner offset: v0 inner offsets are absolute, v1 ones relative."""
        if self.magic == 0:
            return 0
        if self.last_offset == 0:  # some librdkafka versions leave the wrapper offset at 0
            return 0
        if self.last_offset < last_inner_offset:
            raise CorruptBatchError(
                f"wrapper offset {self.last_offset} is less than the last inner relative "
                f"offset {last_inner_offset} and not zero",
                position=self.position,
                offset=self.last_offset,
            )
        return self.last_offset - last_inner_offset

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, last_offset={self.last_offset}, codec={self.codec}, "
            f"size={self.size}, position={self.position})"
        )


# -- writers ------------------------------------------------------------------------------
def _check_magic_and_codec(magic: int, codec: int) -> None:
    if magic not in LEGACY_MAGICS:
        raise UnsupportedFormatError(f"legacy messages have magic 0 or 1, not {magic}")
    if codec == Codec.ZSTD:
        raise UnsupportedFormatError(f"zstd compression needs magic 2, not {magic}")
    if codec not in (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4):
        raise UnsupportedFormatError(f"unknown compression codec id {codec}")


def _append_sized(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += LENGTH.pack(-1)
    else:
        out += LENGTH.pack(len(data))
        out += data


def build_legacy_message(
    *,
    offset: int,
    magic: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    codec: int = Codec.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
) -> bytes:
    """One log entry. `codec` only sets the attribute bits: a wrapper's `value` is already compressed.
    `timestamp` and `timestamp_type` are not stored in v0."""
    _check_magic_and_codec(magic, codec)
    attributes = codec
    if magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    message = bytearray((magic, attributes))  # what the CRC covers: magic to the end of the value
    if magic == 1:
        message += TIMESTAMP.pack(timestamp)
    _append_sized(message, key)
    _append_sized(message, value)
    return OFFSET_SIZE_CRC.pack(offset, 4 + len(message), zlib.crc32(message)) + bytes(message)


def build_legacy_batch(
    records: Sequence[Record],
    *,
    magic: int,
    codec: int = Codec.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
) -> bytes:
    """Encode `records` (absolute offsets, increasing) as Kafka's MemoryRecordsBuilder does for v0/v1.

    Uncompressed: one entry per record (with LogAppendTime each takes `log_append_time`).
    Compressed: one wrapper at the last record's offset; inner offsets absolute in v0 and relative
    to the first record in v1; the v1 wrapper's timestamp is the append time, or for CreateTime
    the max inner timestamp. This is also how the cleaner re-encodes a legacy wrapper (MemoryRecords.filterTo).
    """
    _check_magic_and_codec(magic, codec)
    if not records:
        raise ValueError("legacy formats have no empty batches")
    if any(record.headers for record in records):
        raise UnsupportedFormatError(f"magic {magic} messages cannot carry record headers")
    log_append = magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME
    if log_append and log_append_time is None:
        raise ValueError("a LogAppendTime batch needs log_append_time")
    if codec == Codec.NONE:
        return b"".join(
            build_legacy_message(
                offset=r.offset,
                magic=magic,
                timestamp=log_append_time if log_append and log_append_time is not None else r.timestamp,
                key=r.key,
                value=r.value,
                timestamp_type=timestamp_type,
            )
            for r in records
        )
    base = records[0].offset if magic == 1 else 0
    inner = b"".join(
        build_legacy_message(
            offset=r.offset - base,
            magic=magic,
            timestamp=r.timestamp,
            key=r.key,
            value=r.value,
            timestamp_type=timestamp_type,
        )
        for r in records
    )
    wrapper_timestamp = (
        log_append_time if log_append and log_append_time is not None else max(r.timestamp for r in records)
    )
    return build_legacy_message(
        offset=records[-1].offset,
        magic=magic,
        timestamp=wrapper_timestamp,
        key=None,
        value=compress(codec, inner, magic=magic),
        codec=codec,
        timestamp_type=timestamp_type,
    )
