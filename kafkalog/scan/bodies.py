"""The bodies view, for a repartition (spark/repartition.py): one row per record with what placing and
re-batching it needs, and its bytes after the offset delta (`body`: key, value and headers with their
lengths) instead of its value and headers decoded.

A v2 batch's records are read a window of batches at a time by `splice.read_spans`, which vouches
that each is written as Kafka writes a record: its body is then exactly what Kafka's re-encoding
would write after the new deltas, and is copied verbatim. Every other batch (legacy formats, control
batches, records not in Kafka's form, sections the vectorised pass gives up on) is decoded record by
record and its bodies encoded again (`splice.encode_bodies`): the same bytes a decode and re-encode
give, by the reference decoder, which raises the precise error for a bad one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import tuning
from ..codec.batch import RecordBatch
from ..codec.records import encode_headers
from ..codec.splice import encode_bodies, read_batch_spans, record_bodies
from .scan_plan import WorkUnit
from .views import DecodingBatch, ViewBuilder, _BatchColumns

BODIES_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("segmentBaseOffset", pa.int64()),
        ("baseOffset", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),  # epoch ms
        ("timestampType", pa.int32()),
        ("key", pa.binary()),
        ("body", pa.binary()),
        ("valueIsNull", pa.bool_()),
        ("producerId", pa.int64()),
        ("producerEpoch", pa.int16()),
        ("isTransactional", pa.bool_()),
        ("isControl", pa.bool_()),
        ("compresscodec", pa.int8()),
    ]
)

_BATCH_FIELDS = (
    "baseOffset",
    "timestampType",
    "producerId",
    "producerEpoch",
    "isTransactional",
    "isControl",
    "compresscodec",
)
_BATCH_TYPES = (pa.int64(), pa.int32(), pa.int64(), pa.int16(), pa.bool_(), pa.bool_(), pa.int8())


class BodiesBuilder(ViewBuilder):
    """Rows of `BODIES_SCHEMA` from a unit's batches (`scan.reader.read_unit`'s builder)."""

    schema = BODIES_SCHEMA

    def __init__(self, unit: WorkUnit):
        super().__init__(unit)
        self._reset()

    def _reset(self) -> None:
        self.parts: list[tuple] = []  # (offsets, timestamps, keys, bodies, value is null)
        self.batch = _BatchColumns(_BATCH_FIELDS)
        self.window: list[tuple[int, RecordBatch, bytes]] = []
        self.window_bytes = 0
        self.rows = 0

    def add(self, position: int, batch) -> None:
        if isinstance(batch, RecordBatch) and batch.records_count > 0 and not batch.is_control:
            self.window.append((position, batch, batch.records_section()))
            self.window_bytes += len(self.window[-1][2])
            self._count(batch, batch.records_count)
            if len(self.window) >= tuning.VIEW_WINDOW_BATCHES or self.window_bytes >= tuning.VIEW_WINDOW_BYTES:
                self.settle()
            return
        self.settle()
        self._decoded(position, batch)

    def _count(self, batch, n: int) -> None:
        self.rows += n
        values = (batch.base_offset, batch.timestamp_type, batch.producer_id, batch.producer_epoch)
        self.batch.add(self.rows, (*values, batch.is_transactional, batch.is_control, batch.codec))

    def _decoded(self, position: int, batch, counted: bool = False) -> None:
        with DecodingBatch(self.unit, position, batch):
            records = batch.records()
        if not records:
            return
        if not counted:
            self._count(batch, len(records))
        keys = pa.array([r.key for r in records], pa.binary())
        values = pa.array([r.value for r in records], pa.binary())
        headers = [encode_headers(r.headers) if r.headers else None for r in records]
        bodies = encode_bodies(keys, values, headers).cast(pa.binary())
        null = np.array([r.value is None for r in records])
        offsets, timestamps = (np.array(c, np.int64) for c in zip(*((r.offset, r.timestamp) for r in records)))
        self.parts.append((offsets, timestamps, keys, bodies, null))

    def settle(self) -> None:
        window, self.window, self.window_bytes = self.window, [], 0
        if not window:
            return
        if self._spliced(window):
            return
        for item in window:  # each batch on its own: decoded where its records are not as Kafka writes them
            if not self._spliced([item]):
                self._decoded(item[0], item[1], counted=True)

    def _spliced(self, window: list[tuple[int, RecordBatch, bytes]]) -> bool:
        """The window's records with their bodies copied (`splice.read_batch_spans`), if every one is as
        Kafka writes a record."""
        spans = read_batch_spans([b for _, b, _ in window], [s for _, _, s in window])
        if spans is None:
            return False
        keys, bodies = record_bodies(spans)
        self.parts.append((spans.offset, spans.timestamp, keys, bodies, spans.null_value))
        return True

    def flush(self) -> pa.RecordBatch:
        self.settle()
        n, unit, parts = self.rows, self.unit, self.parts
        columns = {
            "partition": pa.repeat(pa.scalar(unit.partition, pa.int32()), n),
            "segmentBaseOffset": pa.repeat(pa.scalar(unit.segment_base_offset, pa.int64()), n),
            "offset": pa.array(np.concatenate([p[0] for p in parts]), pa.int64()),
            "timestamp": pa.array(np.concatenate([p[1] for p in parts]), pa.int64()),
            "key": pa.concat_arrays([p[2] for p in parts]),
            "body": pa.concat_arrays([p[3] for p in parts]),
            "valueIsNull": pa.array(np.concatenate([p[4] for p in parts])),
        }
        columns.update({name: self.batch.expand(name, t) for name, t in zip(_BATCH_FIELDS, _BATCH_TYPES)})
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in BODIES_SCHEMA], schema=BODIES_SCHEMA)
        self._reset()
        return out
