"""The range path of the latest table (spark/topic_table.latest_records): the last record per key of a
partition too large for one task (`tuning.ONE_TASK_BYTES`, `tuning.LATEST_TASK_RECORDS`), decided
with no task holding a row per key of the partition (docs/architecture.md, "A large partition").

The partition's work units are cut into **ranges** in offset order, of about `tuning.RANGE_BYTES`
each. Then:

1. Map (one Python task per range): the range's committed records are read (the first time) and
   only their **winners** leave the task: per distinct key, its winning record by (rank, version,
   offset) under the KIP-280 strategy (rules/key_map.key_winners), as a narrow row (partition, key,
   rank, version, offset, range): no value, no headers. The task holds at most about
   `LATEST_TASK_RECORDS` keys; past them it hands on what it holds and starts anew, as Kafka's
   cleaner starts another pass when its offset map is full.
2. Merge (Spark, by key): the winners of every range of a partition are grouped by (partition,
   key), a shuffle by a hash of the key, and each key's greatest (rank, version, offset) kept with
   its range (by offset alone: a hash aggregation of numbers). A narrow row per distinct key per
   range (or per map-full) crosses the shuffle, not a record per record, and Spark's aggregation
   spills to disk where a task's share does not fit.
3. Emit (one Python task per range): each range's winning offsets reach its task
   (`repartitionById`, the range's number as the partition), which reads the range again (the
   second and last time) and yields those records whole into the table.

No task holds a row per key of the partition: one of step 1 holds a bounded map, one of step 3 an
offset per row it yields. A range's transaction trackers start at its first batch, as a consumer's
fetch from there does (topic_table.committed_rows), so the same records are read committed as when
one task reads the partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..rules.compaction_strategy import OFFSET, CompactionStrategy, record_versions
from ..rules.key_map import WINNERS, key_winners
from ..scan.scan_plan import ScanFilter, WorkUnit, pack_units, plan_units
from ..storage.segment import LogSegment
from .tasks import task_frame

# what step 1 yields per key of a range, and step 3 reads back
_WINNER_DDL = "partition int, key binary, rank byte, version long, offset long, range int"
_CHOSEN_DDL = "range int, offset long"


def cut_ranges(segments: Sequence[LogSegment], flt: ScanFilter, max_bytes: int) -> list[tuple[WorkUnit, ...]]:
    """One partition's `segments` (in offset order, pruned by `flt`) as ranges of work units of at
    most about `max_bytes`: segments larger than a range cut at offset-index entries, as a scan cuts them."""
    units = plan_units(segments, flt, unit_bytes=max(1, max_bytes))
    return pack_units(units, max(1, max_bytes), open_cost=0)


def latest_in_ranges(
    spark,
    ranges: Sequence[tuple[WorkUnit, ...]],
    committed: Callable[[tuple[WorkUnit, ...]], Iterable[pa.RecordBatch]],
    strategy: CompactionStrategy,
    schema,
):
    """The last committed record per (partition, key) of the partitions whose `ranges` (each of one
    partition, in offset order) are given, as a DataFrame of `schema` (topic_table's columns).
    `committed(units)` yields the committed records of those units in that schema."""
    from pyspark.sql import functions as F

    held_keys, combine_rows = tuning.LATEST_TASK_RECORDS, tuning.COMBINE_ROWS  # read here: the tasks get these

    def mapped(i: int):
        yield from range_winners(committed(ranges[i]), i, strategy, held_keys, combine_rows)

    winners = task_frame(spark, len(ranges), mapped, _WINNER_DDL)
    by_key = winners.groupBy("partition", "key")
    if strategy == OFFSET:  # numbers only: Spark's hash aggregation, no sort
        chosen = by_key.agg(F.max_by("range", "offset").alias("range"), F.max("offset").alias("offset"))
        chosen = chosen.select("range", "offset")
    else:
        best = F.max(F.struct("rank", "version", "offset", "range")).alias("best")
        chosen = by_key.agg(best).select("best.range", "best.offset")
    # a row for every range, so that a range none of whose keys wins still has its task (and yields nothing)
    every = spark.createDataFrame([(i, None) for i in range(len(ranges))], _CHOSEN_DDL)

    def emitted(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from chosen_records(batches, lambda i: committed(ranges[i]))

    by_range = chosen.unionByName(every).repartitionById(len(ranges), "range")
    return by_range.mapInArrow(emitted, schema)


def range_winners(
    batches: Iterable[pa.RecordBatch], number: int, strategy: CompactionStrategy, held_keys: int, combine_rows: int
) -> Iterator[pa.RecordBatch]:
    """Step 1 of range `number`: per (partition, key) of the committed records `batches` (of one
    partition), its winner there, combined about `combine_rows` rows at a time. Where the winners
    held pass `held_keys` keys (`tuning.LATEST_TASK_RECORDS`) they are yielded and the task starts anew,
    as Kafka's cleaner starts a new pass when its offset map is full: a key may then leave the
    task more than once, and the merge keeps its best. Keyless records are left out."""
    held = WINNERS.empty_table()
    chunk: list[pa.Table] = []
    rows = 0
    for batch in batches:
        keyed = pa.Table.from_batches([batch.filter(pc.is_valid(batch["key"]))])
        if not keyed.num_rows:
            continue
        rank, version = record_versions(keyed, strategy)
        offset = keyed["offset"].combine_chunks()
        chunk.append(pa.table([keyed["key"], pa.array(rank), pa.array(version), offset, offset], schema=WINNERS))
        partition = keyed["partition"][0].as_py()
        rows += keyed.num_rows
        if rows >= combine_rows:
            held, chunk, rows = key_winners(pa.concat_tables([held, *chunk])), [], 0
            if held.num_rows >= held_keys:
                yield _winner_rows(held, partition, number)
                held = WINNERS.empty_table()
    held = key_winners(pa.concat_tables([held, *chunk]))
    if held.num_rows:
        yield _winner_rows(held, partition, number)


def _winner_rows(held: pa.Table, partition: int, number: int) -> pa.RecordBatch:
    """`held` (WINNERS of one partition) as step 1's rows (`_WINNER_DDL`)."""
    n = held.num_rows
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, partition, np.int32)),
            *(held[c].combine_chunks() for c in ("key", "rank", "version", "offset")),
            pa.array(np.full(n, number, np.int32)),
        ],
        names=["partition", "key", "rank", "version", "offset", "range"],
    )


def chosen_records(
    batches: Iterable[pa.RecordBatch], committed: Callable[[int], Iterable[pa.RecordBatch]]
) -> Iterator[pa.RecordBatch]:
    """Step 3 in one task: the chosen (range, offset) rows `batches` hold (an offset null where a
    range is only named), and of each range named, its committed records (`committed(range)`, read
    again) at those offsets."""
    chosen: dict[int, list[np.ndarray]] = {}
    for batch in batches:
        ranges, offsets = batch["range"].to_numpy(), batch["offset"]
        valid = pc.is_valid(offsets).to_numpy(zero_copy_only=False)
        values = offsets.fill_null(0).to_numpy()
        for i in np.unique(ranges).tolist():
            mine = ranges == i
            chosen.setdefault(i, []).append(values[mine & valid])
    for i, parts in sorted(chosen.items()):
        wanted = np.sort(np.concatenate(parts))
        if len(wanted):
            yield from _at_offsets(committed(i), wanted)


def _at_offsets(batches: Iterable[pa.RecordBatch], wanted: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The rows of `batches` whose offset is in `wanted` (sorted, of one partition)."""
    for batch in batches:
        offset = batch["offset"].to_numpy()
        at = np.minimum(np.searchsorted(wanted, offset), len(wanted) - 1)
        keep = wanted[at] == offset
        if keep.any():
            yield batch.filter(pa.array(keep))
