"""Record batch v2 (magic 2, Kafka's DefaultRecordBatch): the 61-byte header, its attributes and
CRC-32C, records in and out.

`RecordBatch` is a view over a batch inside a larger buffer (a segment, a fetch response): it parses
the header eagerly and the records only when asked. `build_batch` and `build_empty_batch` write
batches byte for byte as Kafka's MemoryRecordsBuilder does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import crc32c

from ..errors import CorruptBatchError, CrcMismatchError, DecompressionLimitError, KafkaLogError, TruncatedDataError
from .compression import DEFAULT_DECOMPRESSION_LIMIT, MAX_RECORDS_PER_BATCH, Codec, compress, decompress
from .decode import RecordColumns, decode_columns, decode_section
from .records import Record, decode_record, encode_record

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [21, end of batch)
RECORDS_COUNT_OFFSET = 57
# The smallest v2 record: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength and
# headerCount, one byte each (a null key and value, no headers).
MIN_RECORD_SIZE = 7
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF

# An uncompressed batch of at least this many bytes whose records average at least _IN_PLACE_RECORD
# bytes is decoded where it lies in the segment's buffer rather than from a copy of its records
# section: the copy would cost as much memory as the batch, and with records this large the scalar
# decoder (which reads a memoryview) is as fast as the vectorised one (which needs bytes).
_IN_PLACE_SECTION = 1 << 20
_IN_PLACE_RECORD = 64 * 1024


class TimestampType:
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's 31-bit wrap-around of producer sequence numbers."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class AbstractBatch:
    """What a v2 batch (`RecordBatch`) and a legacy log entry (`legacy.LegacyBatch`) derive alike
    from their fields, as Kafka's AbstractRecordBatch does for both. A subclass has `buf`,
    `position`, `size`, `last_offset`, `attributes`, `crc` and `compute_crc()`."""

    __slots__ = ()

    if TYPE_CHECKING:  # what a subclass has, for the type checker
        buf: Any
        position: int
        attributes: int
        crc: int

        @property
        def size(self) -> int: ...

        @property
        def last_offset(self) -> int: ...

        def compute_crc(self) -> int: ...

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def data(self) -> bytes:
        """The batch's bytes, exactly as stored."""
        return bytes(self.buf[self.position : self.position + self.size])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc


class RecordBatch(AbstractBatch):
    """A v2 batch at `position` in `buf`. Header fields are plain attributes, named as in Kafka."""

    __slots__ = (
        "buf",
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )

    def __init__(self, buf, position: int = 0):
        self._read_header(buf, position)
        if position + LOG_OVERHEAD + self.batch_length > len(buf):
            raise TruncatedDataError(
                f"batch declares {self.size} bytes, {len(buf) - position} remain",
                position=position,
                offset=self.base_offset,
            )

    def _read_header(self, buf, position: int) -> None:
        """The 61-byte header at `position`, its magic and its length checked."""
        if len(buf) - position < RECORD_BATCH_OVERHEAD:
            raise TruncatedDataError(
                f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, {len(buf) - position} remain",
                position=position,
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = HEADER.unpack_from(buf, position)
        self.buf = buf
        self.position = position
        if self.magic != MAGIC:
            raise CorruptBatchError(
                f"expected magic 2, found {self.magic}", position=position + MAGIC_OFFSET, offset=self.base_offset
            )
        if self.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptBatchError(
                f"batch length {self.batch_length} is below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}",
                position=position + 8,
                offset=self.base_offset,
            )

    # -- derived header values ------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def timestamp_type(self) -> int:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def log_append_time(self) -> int | None:
        """The timestamp of every record of a LogAppendTime batch (its max timestamp); None otherwise."""
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    # -- checks ---------------------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c.crc32c(self.buf[self.position + ATTRIBUTES_OFFSET : self.position + self.size])

    def verify(self) -> None:
        """Raise CrcMismatchError unless the stored CRC-32C matches (Kafka's ensureValid)."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CrcMismatchError(
                f"CRC-32C mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                position=self.position + CRC_OFFSET,
                offset=self.base_offset,
            )

    # -- records --------------------------------------------------------------------------
    def records_section(self, limit: int = DEFAULT_DECOMPRESSION_LIMIT):
        """The concatenated records as bytes, decompressed (bytes index faster than a memoryview)."""
        start = self.position + RECORD_BATCH_OVERHEAD
        raw = self.buf[start : self.position + self.size]
        if self.codec == Codec.NONE:
            return bytes(raw)
        try:
            return decompress(self.codec, raw, magic=MAGIC, limit=limit)
        except KafkaLogError as err:  # name the batch; the codec only knows the payload
            raise err.located(base_position=start, offset=self.base_offset) from None

    def records(self, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> list[Record]:
        """Decode every record, checking that exactly `records_count` fill the section."""
        return self._decode(decode_section, limit)

    def record_columns(self, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> RecordColumns | list[Record]:
        """`records()` as columns (`RecordColumns`) where the vectorised decoder reads the batch; else
        the records as `records()` gives them (small batches, and those only the scalar decoder can
        judge), so that a caller holding many small batches' records keeps them as it likes."""
        return self._decode(decode_columns, limit)

    def _decode(self, vectorised, limit: int):
        count = self._checked_count()
        if count == 0:  # Kafka does not look at the payload of an empty batch
            return []
        log_append_time = self.log_append_time
        base_offset, base_timestamp = self.base_offset, self.base_timestamp
        start = self.position + RECORD_BATCH_OVERHEAD
        size = self.size - RECORD_BATCH_OVERHEAD
        if (
            self.codec == Codec.NONE
            and isinstance(self.buf, bytes)
            and size >= _IN_PLACE_SECTION
            and size >= count * _IN_PLACE_RECORD
        ):
            section = memoryview(self.buf)[start : start + size]
        else:
            section = self.records_section(limit)
            self.check_count_fits(count, len(section))
            # all records at once (numpy); None for small batches and whatever only the scalar path can tell
            out = vectorised(section, count, base_offset, base_timestamp, log_append_time)
            if out is not None:
                return out
        out = []
        pos = 0
        try:
            for _ in range(count):
                record, pos = decode_record(section, pos, base_offset, base_timestamp, log_append_time)
                out.append(record)
        except (CorruptBatchError, IndexError) as err:
            raise self._record_error(err, pos) from None
        if pos != len(section):
            raise CorruptBatchError(
                f"incorrect declared batch size: {len(section) - pos} bytes remain after {count} records",
                position=self.position,
                offset=self.base_offset,
            )
        return out

    def _checked_count(self) -> int:
        """The record count, refused before anything is decoded when it is negative or beyond
        MAX_RECORDS_PER_BATCH (whose comment says why)."""
        if self.records_count < 0:
            raise CorruptBatchError(
                f"invalid record count {self.records_count}",
                position=self.position + RECORDS_COUNT_OFFSET,
                offset=self.base_offset,
            )
        if self.records_count > MAX_RECORDS_PER_BATCH:
            raise DecompressionLimitError(
                f"the batch declares {self.records_count} records; kafkalog decodes at most "
                f"{MAX_RECORDS_PER_BATCH} records of one batch (docs/semantics.md)",
                position=self.position + RECORDS_COUNT_OFFSET,
                offset=self.base_offset,
            )
        return self.records_count

    def check_count_fits(self, count: int, section_size: int) -> None:
        """A count the records section cannot hold (MIN_RECORD_SIZE bytes a record) is refused
        before the records are decoded, rather than found short after the last one."""
        if count * MIN_RECORD_SIZE > section_size:
            where = "" if self.codec == Codec.NONE else " decompressed"
            raise CorruptBatchError(
                f"the batch declares {count} records, but its {section_size}{where} bytes of records hold at "
                f"most {section_size // MIN_RECORD_SIZE}",
                position=self.position + RECORDS_COUNT_OFFSET,
                offset=self.base_offset,
            )

    def _record_error(self, err: Exception, pos: int) -> CorruptBatchError:
        where = "" if self.codec == Codec.NONE else " of the decompressed records"
        detail = err.message if isinstance(err, CorruptBatchError) else "record runs past the end of the batch"
        return CorruptBatchError(
            f"record at byte {pos}{where}: {detail}", position=self.position, offset=self.base_offset
        )

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, codec={self.codec}, position={self.position})"
        )


class RecordBatchHeader(RecordBatch):
    """A v2 batch of which only the header is at hand (a header-only read of a segment, storage's
    SegmentReader, skips the records of a large batch): its header fields and what they tell, checked
    as RecordBatch checks them, but not that its records are in `buf`. What needs the records (its
    CRC, its records, its bytes) refuses: a caller that wants them reads the batch whole."""

    __slots__ = ()

    def __init__(self, buf, position: int = 0):
        self._read_header(buf, position)

    def _not_read(self, *_args, **_kwargs):
        raise TypeError(f"batch at offset {self.base_offset}: only its header was read, not its records")

    compute_crc = records_section = _decode = _not_read  # type: ignore[assignment]

    @property
    def data(self) -> bytes:
        return self._not_read()


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    codec: int = Codec.NONE,
    last_offset_delta: int | None = None,
    timestamp_type: int = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode `records` (offsets absolute, strictly increasing) as one v2 batch.

    `last_offset_delta` defaults to the last record's delta; a compacted batch passes its original
    one. The base timestamp is the delete horizon when one is given, else the first record's
    timestamp. For LogAppendTime, `log_append_time` is the batch max timestamp; for CreateTime it is
    the largest record timestamp unless `max_timestamp` is given (a purged batch keeps its own).
    """
    if not records:
        raise ValueError("a batch with no records is written with build_empty_batch")
    if base_offset is None:
        base_offset = records[0].offset
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else records[0].timestamp
    section = bytearray()
    largest = NO_TIMESTAMP
    for record in records:
        encode_record(section, record, base_offset, base_timestamp)
        if record.timestamp > largest:
            largest = record.timestamp
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("a LogAppendTime batch needs log_append_time")
        largest = log_append_time
    elif max_timestamp is not None:
        largest = max_timestamp
    return build_batch_of_section(
        bytes(section),
        len(records),
        base_offset=base_offset,
        codec=codec,
        last_offset_delta=last_offset_delta,
        timestamp_type=timestamp_type,
        base_timestamp=base_timestamp,
        max_timestamp=largest,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        has_delete_horizon=delete_horizon_ms is not None,
    )


def build_batch_of_section(
    section: bytes | memoryview,
    count: int,
    *,
    base_offset: int,
    codec: int,
    last_offset_delta: int,
    timestamp_type: int,
    base_timestamp: int,
    max_timestamp: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> bytes:
    """A v2 batch around `count` records already encoded (uncompressed) in `section`; the base
    timestamp is the delete horizon when `has_delete_horizon`."""
    payload = compress(codec, section, magic=MAGIC)
    return _assemble(
        base_offset,
        partition_leader_epoch,
        _attributes(codec, timestamp_type, is_transactional, is_control, has_delete_horizon),
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
        payload,
    )


def build_empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    max_timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """The 61-byte batch the cleaner keeps when every record is gone but the batch must stay
    (MemoryRecords.filterTo with BatchRetention.RETAIN_EMPTY, a producer's last batch say):
    uncompressed, base timestamp -1, no delete horizon, original range and producer fields."""
    return _assemble(
        base_offset,
        partition_leader_epoch,
        _attributes(Codec.NONE, timestamp_type, is_transactional, is_control, has_delete_horizon=False),
        last_offset_delta,
        NO_TIMESTAMP,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
        b"",
    )


def _attributes(
    codec: int, timestamp_type: int, is_transactional: bool, is_control: bool, has_delete_horizon: bool
) -> int:
    """A v2 batch's attributes: the codec in the low bits, then one bit per flag."""
    return (
        codec
        | (TIMESTAMP_TYPE_MASK if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_FLAG if is_transactional else 0)
        | (CONTROL_FLAG if is_control else 0)
        | (DELETE_HORIZON_FLAG if has_delete_horizon else 0)
    )


def _assemble(
    base_offset,
    partition_leader_epoch,
    attributes,
    last_offset_delta,
    base_timestamp,
    max_timestamp,
    producer_id,
    producer_epoch,
    base_sequence,
    count,
    payload,
) -> bytes:
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    HEADER.pack_into(
        out,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
