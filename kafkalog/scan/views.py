"""Decoding work units on executors into Arrow record batches of one of three views (no Spark):

* ``narrow``: the compaction view, one row per record, keys but no values (`NARROW_SCHEMA`);
* ``records``: the full view, the schema of Spark's Kafka source plus kafkalog's batch fields
  (`RECORDS_SCHEMA`);
* ``batches``: one row per batch, header fields only (`BATCHES_SCHEMA`).

Here: the views' schemas and their builders, which turn decoded batches into Arrow record batches;
reader.py's `read_task` reads a task's units (scan_plan.py) through them, and spark/scan.py runs it
with `mapInArrow`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..codec.batch import INT32_MAX, RecordBatch
from ..codec.control import ControlType, parse_control_type, parse_coordinator_epoch
from ..codec.decode import RecordColumns
from ..codec.scan import ABSENT, KeyColumns, scan_batches, scan_keys
from ..errors import CorruptBatchError, KafkaLogError
from ..storage.fs import LogFileSystem
from ..storage.segment import locate
from .scan_plan import WorkUnit

VIEWS = ("narrow", "records", "batches")

# -- schemas -----------------------------------------------------------------------------------------

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

NARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segmentBaseOffset", pa.int64()),
        ("baseOffset", pa.int64()),
        ("lastOffset", pa.int64()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("valueIsNull", pa.bool_()),
        ("valueSize", pa.int32()),
        ("recordSpanStart", pa.int32()),
        ("recordSpanSize", pa.int32()),
        ("producerId", pa.int64()),
        ("producerEpoch", pa.int16()),
        ("isTransactional", pa.bool_()),
        ("isControl", pa.bool_()),
        ("controlType", pa.int16()),
        ("deleteHorizonMs", pa.int64()),
        ("magic", pa.int8()),
        ("compresscodec", pa.int8()),
    ]
)

RECORDS_SCHEMA = pa.schema(
    [
        # Spark's Kafka source, in its order and types
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("timestampType", pa.int32()),
        ("headers", HEADERS_TYPE),
        # kafkalog's: the record's sequence, its batch's fields and where it lies, named as
        # kafka-dump-log names them
        ("producerId", pa.int64()),
        ("producerEpoch", pa.int16()),
        ("sequence", pa.int32()),
        ("isTransactional", pa.bool_()),
        ("isControl", pa.bool_()),
        ("partitionLeaderEpoch", pa.int32()),
        ("compresscodec", pa.int8()),
        ("segmentBaseOffset", pa.int64()),
        ("baseOffset", pa.int64()),
    ]
)

BATCHES_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segmentBaseOffset", pa.int64()),
        ("position", pa.int64()),
        ("size", pa.int32()),
        ("baseOffset", pa.int64()),
        ("lastOffset", pa.int64()),
        ("count", pa.int32()),
        ("baseTimestamp", pa.int64()),
        ("maxTimestamp", pa.int64()),
        ("timestampType", pa.int32()),
        ("producerId", pa.int64()),
        ("producerEpoch", pa.int16()),
        ("baseSequence", pa.int32()),
        ("lastSequence", pa.int32()),
        ("isTransactional", pa.bool_()),
        ("isControl", pa.bool_()),
        ("controlType", pa.int16()),
        ("coordinatorEpoch", pa.int32()),
        ("deleteHorizonMs", pa.int64()),
        ("partitionLeaderEpoch", pa.int32()),
        ("magic", pa.int8()),
        ("compresscodec", pa.int8()),
        ("crc", pa.int64()),
    ]
)

SCHEMAS = {"narrow": NARROW_SCHEMA, "records": RECORDS_SCHEMA, "batches": BATCHES_SCHEMA}
# The narrow view read with a header key (KIP-280's `header` strategy): its last occurrence in each
# record, the size of its value (null without one, -1 for a null value) and, where that is 8 bytes,
# the value as a big-endian signed long.
NARROW_HEADER_FIELDS = [("headerSize", pa.int32()), ("headerValue", pa.int64())]
NARROW_HEADER_SCHEMA = pa.schema([*NARROW_SCHEMA, *NARROW_HEADER_FIELDS])


# -- reading (executors, pure) -----------------------------------------------------------------------

_FILESYSTEMS: dict[str, tuple[LogFileSystem, str]] = {}


def filesystem(root: str) -> LogFileSystem:
    """The filesystem of a log-dir path or URI, created once per process."""
    return filesystem_and_path(root)[0]


def filesystem_and_path(root: str) -> tuple[LogFileSystem, str]:
    """The filesystem of a log-dir path or URI and the log dir's path in it, made once per process."""
    if root not in _FILESYSTEMS:
        _FILESYSTEMS[root] = LogFileSystem.for_path(root)
    return _FILESYSTEMS[root]


def _arrow(values, type_: pa.DataType) -> pa.Array:
    """An Arrow array from whatever sequence a column holds (list, array, numpy, Arrow)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == type_ else values.cast(type_)
    return pa.array(values, type_)


def _constant(value, type_: pa.DataType, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type_), n)


class DecodingBatch:
    """A block decoding the batch at `position` of the unit's file: what it raises leaves as a
    KafkaLogError naming the file and byte (the codec's, located, or a CorruptBatchError wrapping
    anything else)."""

    __slots__ = ("unit", "position", "batch")

    def __init__(self, unit: WorkUnit, position: int, batch):
        self.unit, self.position, self.batch = unit, position, batch

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind, err, traceback) -> None:
        if not isinstance(err, Exception) or isinstance(err, KafkaLogError) and err.file is not None:
            return
        if isinstance(err, KafkaLogError):
            raise locate(err, self.unit.path, self.position, self.batch) from None
        raise CorruptBatchError(
            f"cannot decode the batch: {type(err).__name__}: {err}",
            file=self.unit.path,
            position=self.position,
            offset=getattr(self.batch, "last_offset", None),
        ) from err


class _BatchColumns:
    """Per-batch values and each batch's run of rows, expanded to per-row columns by run-end decoding."""

    def __init__(self, names: Sequence[str]):
        self.names = names
        self.values: dict[str, list[Any]] = {name: [] for name in names}
        self.run_ends: list[int] = []

    def add(self, rows_end: int, values: Sequence) -> None:
        self.run_ends.append(rows_end)
        for name, value in zip(self.names, values):
            self.values[name].append(value)

    def expand(self, name: str, type_: pa.DataType) -> pa.Array:
        values = pa.array(self.values[name], type_)
        if not self.run_ends:
            return values
        ree = pa.RunEndEncodedArray.from_arrays(pa.array(self.run_ends, pa.int32()), values)
        return pc.run_end_decode(ree)


class ViewBuilder:
    """Collects decoded batches of one work unit and turns them into Arrow record batches."""

    schema: pa.Schema

    def __init__(self, unit: WorkUnit):
        self.unit = unit
        self.rows = 0

    def add(self, position: int, batch) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def settle(self) -> None:
        """Decode the batches `add` holds back, if any; errors name their batch's file and byte."""

    def flush(self) -> pa.RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError


_NARROW_BATCH_FIELDS = (
    "baseOffset",
    "lastOffset",
    "position",
    "producerId",
    "producerEpoch",
    "isTransactional",
    "isControl",
    "deleteHorizonMs",
    "magic",
    "compresscodec",
)


class NarrowBuilder(ViewBuilder):
    """The compaction view: the keys of a window of batches scanned at once (`scan_batches`),
    batch by batch (`scan_keys`) where that pass does not vouch for them all (values are never
    materialised). `add` holds the window's batches back until it is full (tuning.VIEW_WINDOW_*),
    `settle` or `flush`;
    `rows` counts them already."""

    schema = NARROW_SCHEMA

    def __init__(self, unit: WorkUnit, header: bytes | None = None):
        super().__init__(unit)
        self.header = header
        if header is not None:
            self.schema = NARROW_HEADER_SCHEMA
        self._reset()

    def _reset(self) -> None:
        self.keys = KeyColumns(self.header)
        self.batch = _BatchColumns(_NARROW_BATCH_FIELDS)
        self.control_types: list[tuple[int, int]] = []  # (row, control type) of control records
        self.rows = 0
        self.window: list[tuple[int, RecordBatch, bytes]] = []  # (position, batch, records section)
        self.window_bytes = 0

    def add(self, position: int, batch) -> None:
        if not isinstance(batch, RecordBatch) or batch.records_count <= 0:
            self.settle()  # legacy, empty or with an invalid count: on its own, as before
            n = scan_keys(batch, self.keys)
            if n:
                self._count(position, batch, n)
            return
        section = batch.records_section()  # a decompression error is this batch's, raised now
        if batch.is_control:
            self._control_types(batch, section)
        self.window.append((position, batch, section))
        self.window_bytes += len(section)
        self._count(position, batch, batch.records_count)
        if len(self.window) >= tuning.VIEW_WINDOW_BATCHES or self.window_bytes >= tuning.VIEW_WINDOW_BYTES:
            self.settle()

    def _control_types(self, batch: RecordBatch, section: bytes) -> None:
        """Note the control type of each record of a control batch (rare and tiny: decoded)."""
        try:
            types = [int(parse_control_type(record.key)[1]) for record in batch.records()]
        except Exception:  # the batch's own scan error, if it has one, comes first (as without windows)
            self.settle()
            scan_keys(batch, KeyColumns(self.header), section=section)
            raise
        self.control_types += [(self.rows + i, t) for i, t in enumerate(types)]

    def _count(self, position: int, batch, n: int) -> None:
        self.rows += n
        self.batch.add(
            self.rows,
            (
                batch.base_offset,
                batch.last_offset,
                position,
                batch.producer_id,
                batch.producer_epoch,
                batch.is_transactional,
                batch.is_control,
                batch.delete_horizon_ms,
                batch.magic,
                batch.codec,
            ),
        )

    def settle(self) -> None:
        window = self.window
        self.window, self.window_bytes = [], 0
        if len(window) > 1 and scan_batches([b for _, b, _ in window], [s for _, _, s in window], self.keys):
            return
        for position, batch, section in window:  # the first failing batch raises its own error
            with DecodingBatch(self.unit, position, batch):
                scan_keys(batch, self.keys, section=section)

    def flush(self) -> pa.RecordBatch:
        self.settle()
        n, unit, b, k = self.rows, self.unit, self.batch, self.keys
        key = k.key_array()
        value_size = _arrow(k.value_size, pa.int32())
        columns = {
            "topic": _constant(unit.topic, pa.string(), n),
            "partition": _constant(unit.partition, pa.int32(), n),
            "segmentBaseOffset": _constant(unit.segment_base_offset, pa.int64(), n),
            "baseOffset": b.expand("baseOffset", pa.int64()),
            "lastOffset": b.expand("lastOffset", pa.int64()),
            "position": b.expand("position", pa.int64()),
            "offset": _arrow(k.offset, pa.int64()),
            "timestamp": _arrow(k.timestamp, pa.int64()),
            "key": key,
            "valueIsNull": pc.less(value_size, 0),
            "valueSize": value_size,
            "recordSpanStart": _arrow(k.span_start, pa.int32()),
            "recordSpanSize": _arrow(k.span_size, pa.int32()),
            "producerId": b.expand("producerId", pa.int64()),
            "producerEpoch": b.expand("producerEpoch", pa.int16()),
            "isTransactional": b.expand("isTransactional", pa.bool_()),
            "isControl": b.expand("isControl", pa.bool_()),
            "controlType": _sparse(self.control_types, n, pa.int16()),
            "deleteHorizonMs": b.expand("deleteHorizonMs", pa.int64()),
            "magic": b.expand("magic", pa.int8()),
            "compresscodec": b.expand("compresscodec", pa.int8()),
        }
        if self.header is not None:
            size = k.header_size
            columns["headerSize"] = pa.array(size, pa.int32(), mask=size == ABSENT)
            columns["headerValue"] = pa.array(k.header_value, pa.int64(), mask=size != 8)
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)
        self._reset()
        return out


def _sparse(values: list[tuple[int, int]], n: int, type_: pa.DataType) -> pa.Array:
    """A column of `n` nulls but for the (row, value) pairs given."""
    if not values:
        return pa.nulls(n, type_)
    column: list = [None] * n
    for row, value in values:
        column[row] = value
    return pa.array(column, type_)


_RECORD_BATCH_FIELDS = (
    "timestampType",
    "producerId",
    "producerEpoch",
    "baseSequence",
    "isTransactional",
    "isControl",
    "partitionLeaderEpoch",
    "compresscodec",
    "baseOffset",
)


class RecordsBuilder(ViewBuilder):
    """The full view: every record decoded, with headers; Spark's Kafka source columns first. A
    batch the vectorised decoder reads arrives as columns (`RecordColumns`) and stays so; the
    records of small batches are gathered in lists and made columns together, in order."""

    schema = RECORDS_SCHEMA
    parts: list[RecordColumns]
    keys: list[bytes | None]
    values: list[bytes | None]
    offsets: list[int]
    timestamps: list[int]
    headers: list[list[tuple[str, bytes | None]] | None]

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.parts = []
        self._reset_lists()
        self.batch = _BatchColumns(_RECORD_BATCH_FIELDS)
        self.rows = 0

    def _reset_lists(self) -> None:
        self.keys, self.values, self.offsets, self.timestamps, self.headers = [], [], [], [], []

    def add(self, position: int, batch) -> None:
        decoded = batch.record_columns() if isinstance(batch, RecordBatch) else batch.records()
        if isinstance(decoded, RecordColumns):
            self._lists_to_part()
            self.parts.append(decoded)
            n = len(decoded.offsets)
        elif decoded:
            for record in decoded:
                self.keys.append(record.key)
                self.values.append(record.value)
                self.offsets.append(record.offset)
                self.timestamps.append(record.timestamp)
                self.headers.append(list(record.headers) if record.headers else None)
            n = len(decoded)
        else:
            return
        self.rows += n
        self.batch.add(
            self.rows,
            (
                batch.timestamp_type,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.is_transactional,
                batch.is_control,
                batch.partition_leader_epoch,
                batch.codec,
                batch.base_offset,
            ),
        )

    def _lists_to_part(self) -> None:
        """The records gathered in lists so far, as one part."""
        if not self.offsets:
            return
        self.parts.append(
            RecordColumns(
                np.array(self.offsets, np.int64),
                np.array(self.timestamps, np.int64),
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                self.headers if any(h is not None for h in self.headers) else None,
            )
        )
        self._reset_lists()

    def flush(self) -> pa.RecordBatch:
        self._lists_to_part()
        n, unit, b, parts = self.rows, self.unit, self.batch, self.parts
        offset = pa.array(np.concatenate([p.offsets for p in parts]), pa.int64())  # rows: a part at least
        millis = pa.array(np.concatenate([p.timestamps for p in parts]), pa.int64())
        try:
            timestamp = pc.multiply_checked(millis, 1000).cast(TIMESTAMP_TYPE)
        except pa.ArrowInvalid:
            raise CorruptBatchError(
                "a record timestamp is outside the range a Spark timestamp holds", file=unit.path, position=unit.start
            ) from None
        batch_base = b.expand("baseOffset", pa.int64())
        columns = {
            "key": pa.concat_arrays([p.keys for p in parts]),
            "value": pa.concat_arrays([p.values for p in parts]),
            "topic": _constant(unit.topic, pa.string(), n),
            "partition": _constant(unit.partition, pa.int32(), n),
            "offset": offset,
            "timestamp": timestamp,
            "timestampType": b.expand("timestampType", pa.int32()),
            "headers": _headers_column(parts, n),
            "producerId": b.expand("producerId", pa.int64()),
            "producerEpoch": b.expand("producerEpoch", pa.int16()),
            "sequence": record_sequences(b.expand("baseSequence", pa.int64()), offset, batch_base),
            "isTransactional": b.expand("isTransactional", pa.bool_()),
            "isControl": b.expand("isControl", pa.bool_()),
            "partitionLeaderEpoch": b.expand("partitionLeaderEpoch", pa.int32()),
            "compresscodec": b.expand("compresscodec", pa.int8()),
            "segmentBaseOffset": _constant(unit.segment_base_offset, pa.int64(), n),
            "baseOffset": batch_base,
        }
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in RECORDS_SCHEMA], schema=RECORDS_SCHEMA)
        self._reset()
        return out


def _headers_column(parts: list[RecordColumns], n: int) -> pa.Array:
    """Each record's headers, null where it has none: nulls alone where no part has any."""
    if all(p.headers is None for p in parts):
        return pa.nulls(n, HEADERS_TYPE)
    rows: list = []
    for p in parts:
        rows += p.headers if p.headers is not None else [None] * len(p.offsets)
    return pa.array(rows, HEADERS_TYPE)


def record_sequences(base_sequence: pa.Array, offset: pa.Array, batch_base_offset: pa.Array) -> pa.Array:
    """Each record's sequence: the batch's base sequence plus the record's offset delta, wrapping
    past 2^31-1 to 0 as Kafka's producer sequences do; -1 where the batch has none."""
    raw = pc.add(base_sequence, pc.subtract(offset, batch_base_offset))
    wrapped = pc.if_else(pc.greater(raw, INT32_MAX), pc.subtract(raw, INT32_MAX + 1), raw)
    return pc.if_else(pc.less(base_sequence, 0), -1, wrapped).cast(pa.int32())


class BatchesBuilder(ViewBuilder):
    """One row per batch (legacy compressed wrappers are decompressed for their base offset and count)."""

    schema = BATCHES_SCHEMA

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.columns: dict[str, list[Any]] = {f.name: [] for f in BATCHES_SCHEMA}
        self.rows = 0

    def add(self, position: int, batch) -> None:
        control_type = coordinator_epoch = None
        if batch.is_control:
            records = batch.records()
            if records:
                _, ctype = parse_control_type(records[0].key)
                control_type = int(ctype)
                if ctype in (ControlType.ABORT, ControlType.COMMIT):
                    coordinator_epoch = parse_coordinator_epoch(records[0].value)
        v2 = isinstance(batch, RecordBatch)
        values = {
            "topic": self.unit.topic,
            "partition": self.unit.partition,
            "segmentBaseOffset": self.unit.segment_base_offset,
            "position": position,
            "size": batch.size,
            "baseOffset": batch.base_offset,
            "lastOffset": batch.last_offset,
            "count": batch.records_count,
            "baseTimestamp": batch.base_timestamp if v2 else batch.timestamp,
            "maxTimestamp": batch.max_timestamp,
            "timestampType": batch.timestamp_type,
            "producerId": batch.producer_id,
            "producerEpoch": batch.producer_epoch,
            "baseSequence": batch.base_sequence,
            "lastSequence": batch.last_sequence,
            "isTransactional": batch.is_transactional,
            "isControl": batch.is_control,
            "controlType": control_type,
            "coordinatorEpoch": coordinator_epoch,
            "deleteHorizonMs": batch.delete_horizon_ms,
            "partitionLeaderEpoch": batch.partition_leader_epoch,
            "magic": batch.magic,
            "compresscodec": batch.codec,
            "crc": batch.crc,
        }
        for name, value in values.items():
            self.columns[name].append(value)
        self.rows += 1

    def flush(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays(
            [pa.array(self.columns[f.name], f.type) for f in BATCHES_SCHEMA], schema=BATCHES_SCHEMA
        )
        self._reset()
        return out


BUILDERS = {"narrow": NarrowBuilder, "records": RecordsBuilder, "batches": BatchesBuilder}
