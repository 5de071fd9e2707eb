"""A scan task's reading, on an executor and without Spark: each work unit's byte range read batch by
batch (storage's SegmentReader), decoded into a view's Arrow record batches (views.py's builders), and
the scan filter's offsets and read_committed applied.

Errors name the `.log` file and the byte position: any failure while decoding a batch is a
`KafkaLogError` (the codec's, located in the file, or a CorruptBatchError wrapping the rest).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..errors import CorruptIndexError, KafkaLogError
from ..storage.fs import LogFileSystem
from ..storage.segment import SegmentReader, batch_first_offset
from .inventory import CountingFileSystem, IOStats
from .scan_plan import ScanFilter, WorkUnit
from .views import BUILDERS, DecodingBatch, NarrowBuilder, ViewBuilder, filesystem


def _offset_mask(batch: pa.RecordBatch, view: str, flt: ScanFilter) -> pa.Array | None:
    if view == "batches":
        low, high = batch.column("baseOffset"), batch.column("lastOffset")
    else:
        low = high = batch.column("offset")
    mask = None
    if flt.start_offset is not None:
        mask = pc.greater_equal(high, flt.start_offset)
    if flt.end_offset is not None:
        below = pc.less(low, flt.end_offset)
        mask = below if mask is None else pc.and_(mask, below)
    return mask


def read_unit(
    unit: WorkUnit,
    fs: LogFileSystem,
    view: str = "narrow",
    flt: ScanFilter = ScanFilter(),
    *,
    verify_crc: bool = True,
    batch_rows: int | None = None,
    header: bytes | None = None,
    builder: ViewBuilder | None = None,
    ends: dict | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode one work unit into Arrow record batches of `view`, keeping offsets the filter selects;
    with `header` (the narrow view only), each record's last header of that key too
    (`NARROW_HEADER_FIELDS`); `batch_rows` rows an Arrow batch at most (None: tuning.BATCH_ROWS).
    `builder`: another view's builder for the unit (rows with an `offset` column, as `view`'s).
    `ends`: where a unit read to its segment's end tells the segment's last offset, it is set
    there, by (topic, partition, segment base offset) (`_segment_end`).

    Errors name the `.log` file and the byte position: any failure while decoding a batch is a
    `KafkaLogError` (the codec's, located in the file, or a CorruptBatchError wrapping the rest).
    """
    if builder is None:
        builder = NarrowBuilder(unit, header) if header is not None else BUILDERS[view](unit)
    flt = flt.for_partition(unit.topic, unit.partition)
    try:
        rows = tuning.BATCH_ROWS if batch_rows is None else batch_rows
        yield from _read_unit(unit, fs, builder, view, flt, verify_crc, rows, ends)
    except Exception:
        builder.settle()  # the batches it holds back come first: the first of them to fail raises
        raise


def _read_unit(
    unit: WorkUnit,
    fs: LogFileSystem,
    builder: ViewBuilder,
    view: str,
    flt: ScanFilter,
    verify_crc: bool,
    batch_rows: int,
    ends: dict | None = None,
) -> Iterator[pa.RecordBatch]:
    reader = SegmentReader(
        fs,
        unit.path,
        unit.end,
        unit.start,
        torn_tail_ok=unit.next_base_offset is None or not unit.is_last_range,
        offset_range=(unit.segment_base_offset, unit.next_base_offset),
    )
    start, end = flt.start_offset, flt.end_offset
    low, high = unit.low_offset, unit.high_offset
    completed = True
    iterator = iter(reader)
    while True:
        try:
            item = next(iterator, None)
        except KafkaLogError:
            raise
        except Exception as err:  # an I/O failure: name the file and where the reader was
            raise KafkaLogError(
                f"cannot read: {type(err).__name__}: {err}", file=unit.path, position=reader.end_position
            ) from err
        if item is None:
            break
        position, batch = item
        with DecodingBatch(unit, position, batch):
            last, first = batch.last_offset, batch_first_offset(batch)
            if (high is not None and last >= high) or (low is not None and first is not None and first < low):
                raise CorruptIndexError(
                    f"the offset index of the segment disagrees with the log: the batch at byte {position} "
                    f"holds offsets up to {last}{'' if first is None else f' from {first}'}, outside the "
                    f"range [{low}, {high}) that the index gives bytes [{unit.start}, {unit.end})",
                    file=unit.index_path or unit.path,
                    position=position,
                    offset=last,
                )
            if end is not None and first is not None and first >= end:
                completed = False  # offsets only grow within a segment: nothing further is wanted
                break
            if start is not None and last < start:
                continue
            if verify_crc:
                batch.verify()
            reader.check_decoded_first_offset(position, batch)  # every view decodes a legacy wrapper
            builder.add(position, batch)
        if builder.rows >= batch_rows:
            yield _filtered(builder.flush(), view, flt)
    if completed and not unit.is_last_range and (reader.truncated_tail is not None or reader.end_position != unit.end):
        raise CorruptIndexError(
            f"the range [{unit.start}, {unit.end}) cut at an offset-index entry does not end at a batch "
            f"boundary: the last whole batch ends at byte {reader.end_position}",
            file=unit.index_path or unit.path,
            position=unit.end,
        )
    if builder.rows:
        yield _filtered(builder.flush(), view, flt)
    if ends is not None and completed:
        _segment_end(unit, reader, ends)


def _segment_end(unit: WorkUnit, reader: SegmentReader, ends: dict) -> None:
    """The segment's last offset, where this unit tells it: it read every batch up to the segment's
    end (in order: the reader checked it), and either found one or began the segment (none there
    then). A unit that ends the segment but holds no whole batch of it tells nothing."""
    if unit.is_last_range and (reader.last_offset_read is not None or unit.start == 0):
        ends[unit.topic, unit.partition, unit.segment_base_offset] = reader.last_offset_read


def _committed_mask(batch: pa.RecordBatch, view: str, aborted: Sequence[tuple[int, int, int]]) -> pa.Array:
    """What a read_committed consumer sees: no control record, and no record of an aborted
    transaction (a transactional batch of its producer within its offsets, as `.txnindex` lists them)."""
    offset = batch.column("baseOffset" if view == "batches" else "offset")
    producer = batch.column("producerId")
    dropped = batch.column("isControl")
    transactional = batch.column("isTransactional")
    for producer_id, first, last in aborted:
        txn = pc.and_(
            pc.equal(producer, producer_id), pc.and_(pc.greater_equal(offset, first), pc.less_equal(offset, last))
        )
        dropped = pc.or_(dropped, pc.and_(transactional, txn))
    return pc.invert(dropped)


def _offset_slice(batch: pa.RecordBatch, view: str, flt: ScanFilter) -> tuple[int, int] | None:
    """(first row, rows) that `_offset_mask` keeps, where the offsets rise along the batch (None where
    they do not: the mask then says)."""
    columns = ("baseOffset", "lastOffset") if view == "batches" else ("offset", "offset")
    if any(batch.column(c).null_count for c in columns):
        return None
    low, high = (batch.column(c).to_numpy() for c in columns)
    if len(low) > 1 and (np.any(low[1:] < low[:-1]) or np.any(high[1:] < high[:-1])):
        return None
    first = 0 if flt.start_offset is None else int(np.searchsorted(high, flt.start_offset, "left"))
    stop = len(low) if flt.end_offset is None else int(np.searchsorted(low, flt.end_offset, "left"))
    return first, max(stop - first, 0)


def _filtered(batch: pa.RecordBatch, view: str, flt: ScanFilter) -> pa.RecordBatch:
    if flt.has_offsets and not flt.committed_only:
        kept = _offset_slice(batch, view, flt)
        if kept is not None:  # a unit's rows are in offset order: the range is a slice, no copy
            return batch.slice(*kept)
    mask = _offset_mask(batch, view, flt) if flt.has_offsets else None
    if flt.committed_only:
        committed = _committed_mask(batch, view, flt.aborted_txns)
        mask = committed if mask is None else pc.and_(mask, committed)
    # a mask that keeps every row (most batches: no aborted transaction in them) copies nothing
    return batch if mask is None or mask.true_count == len(mask) else batch.filter(mask)


def read_task(
    root: str,
    units: Sequence[WorkUnit],
    view: str = "narrow",
    flt: ScanFilter = ScanFilter(),
    *,
    verify_crc: bool = True,
    batch_rows: int | None = None,
    stats: IOStats | None = None,
    headers: dict[str, bytes] | None = None,
    ends: dict | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode the units of one task, in order; every read is counted in `stats`. `headers`: the
    header key each topic's narrow rows carry (`read_unit`'s `header`), by topic; `ends`: the last
    offsets of the segments read to their end (`read_unit`'s)."""
    fs = filesystem(root)
    if stats is not None:
        fs = CountingFileSystem(fs, stats)
    for unit in units:
        header = headers.get(unit.topic) if headers else None
        for batch in read_unit(
            unit, fs, view, flt, verify_crc=verify_crc, batch_rows=batch_rows, header=header, ends=ends
        ):
            if batch.num_rows:
                yield batch
