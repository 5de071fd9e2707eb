"""A partition's segments held in memory by one task (spark/compaction.clean_partition, and a range of
them in spark/ranges.py): their batch headers and record fates read from the held bytes, and the
output segments written from the same bytes, so that a task reads each `.log` byte once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from ..errors import KafkaLogError
from ..rules.cleaner import LogToClean
from ..rules.compaction import FATES, PartitionOutcome, SegmentFacts, record_fates
from ..scan.reader import read_unit
from ..scan.scan_plan import ScanFilter
from ..storage.naming import segment_file_name
from ..storage.rewrite import CLEANED, BatchPlan, remove_staged
from .errors import worker_error
from .rewrite import REWRITE_STEP, rewrite_error, source_segments, write_output


@dataclass
class Cleaned:
    """What the task of one partition returns: the report's rows per source segment
    (PartitionOutcome.segments), its output segments and what writing them wrote; or its error as
    `worker_error` text, found while reading and deciding (`decided`: the partition is
    uncleanable, the others go on) or while writing (the pass fails)."""

    topic: str
    partition: int
    segments: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    written: list = field(default_factory=list)
    error: str | None = None
    decided: bool = True
    spread: bool = False  # more records than tuning.ONE_TASK_RECORDS: the window path cleans it


def batch_headers(held, log: LogToClean, units) -> Iterator[pa.RecordBatch]:
    """The `batches` view of `units` (in `held`) below the partition's upper bound (CRCs are left to
    the record scan, which reads every one of these batches)."""
    flt = ScanFilter.of(end_offset=log.upper_bound)
    return (b for u in units for b in read_unit(u, held, "batches", flt, verify_crc=False) if b.num_rows)


def discarded_positions(decided: pa.RecordBatch | pa.Table) -> dict[int, list[int]]:
    """The positions of the DECIDED batches whose records all go, by segment number."""
    discarded: dict[int, list[int]] = {}
    for segment, position, discard in zip(
        decided["segment"].to_pylist(), decided["position"].to_pylist(), decided["discard_records"].to_pylist()
    ):
        if discard:
            discarded.setdefault(segment, []).append(position)
    return discarded


def held_fates(held, log: LogToClean, units, numbers: dict, discarded: dict, now: int) -> pa.Table:
    """The `record_fates` of the records of `units` (in `held`) below the partition's upper bound, in
    file order; `numbers`: segment numbers by base offset, `discarded`: `discarded_positions`."""
    return pa.Table.from_batches(list(held_fate_batches(held, log, units, numbers, discarded, now)), schema=FATES)


def held_fate_batches(
    held, log: LogToClean, units, numbers: dict, discarded: dict, now: int
) -> Iterator[pa.RecordBatch]:
    """`held_fates` as it is read, a record batch at a time (a range's map holds a slice of them)."""
    flt = ScanFilter.of(end_offset=log.upper_bound)
    mtimes = {s.base_offset: s.mtime_ms for s in log.segments}
    for unit in units:
        number = numbers[unit.segment_base_offset]
        facts = SegmentFacts(
            0,
            number,
            mtimes[unit.segment_base_offset],
            log.range.first_dirty,
            log.upper_bound,
            log.legacy_delete_horizon_ms,
            True,
            log.strategy,
        )
        for batch in read_unit(unit, held, "narrow", flt, header=log.strategy.header_key):
            if batch.num_rows:
                yield record_fates(batch, facts, discarded.get(number, ()), now)


def write_cleaned(fs, root: str, log_path: str, held, cleaned: Cleaned, outcome: PartitionOutcome, fault=None) -> None:
    """Write `cleaned.outputs` into the partition directory `log_path` from the source bytes `held`
    (a HeldFileSystem over `fs`) as `.cleaned` files, with the batch changes of `outcome`; on
    failure, what is staged goes and `cleaned` gets the error and `decided` False (the pass fails)."""
    from ..scan.views import filesystem_and_path

    plans = {at: BatchPlan(*change[:4], spans=change.spans) for at, change in outcome.changes.items()}
    output = None
    try:
        for output in cleaned.outputs:
            if fault is not None:
                fault(REWRITE_STEP, fs.join(log_path, segment_file_name(output.base_offset, ".log" + CLEANED)))
            sources = source_segments(held, log_path, output)
            cleaned.written.append(write_output(held, log_path, sources, output, plans))
    except Exception as err:  # what is staged goes; the pass fails (as a failing rewrite task fails it)
        for staged in cleaned.outputs:
            try:
                remove_staged(fs, log_path, staged.base_offset)
            except (OSError, KafkaLogError):
                pass
        assert output is not None
        cleaned.error, cleaned.decided = worker_error(rewrite_error(err, filesystem_and_path(root)[1], output)), False
        cleaned.written = []
