"""The range path: a partition too large for one task (`tuning.ONE_TASK_BYTES`, `ONE_TASK_RECORDS`)
cleaned by several, no record passing through the JVM (docs/architecture.md, "A large partition").

Its cleanable segments, grouped into output segments as Kafka's cleaner groups them, are cut into
**ranges** of whole groups of about `tuning.RANGE_BYTES`. Then:

1. Map (one task per range): the range's `.log` bytes are read once; the task returns its batch
   headers (the `batches` view) and its key map (rules/key_map.WINNERS: one row per distinct key). The
   records of batches that an aborted transaction may discard (transactional data of a producer with
   an aborted transaction in `.txnindex`) stay out of the map and come back one by one, with their batch.
2. Merge (driver): Kafka's transaction tracker runs over the partition's headers in offset order, as
   one cleaning pass runs it (`decide_batches`: its state crosses the ranges); the records of the batches
   it discards are dropped, and the ranges' maps merged by key (`key_winners`). Each range is handed
   its batch decisions and the winners of its keys that another range holds (`differing`).
3. Rewrite (one task per range): the range's bytes are read again (the second and last time), its
   records superseded with those winners (`partition_outcome`), and its output segments written as
   `.cleaned` files, which the driver swaps in with the other paths' (storage/swap.py).

The rules are rules/compaction.py's and rules/key_map.py's; the reading and writing spark/held.py's, as
on the one-task path, so that both paths write the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..errors import KafkaLogError
from ..rules.cleaner import LogToClean
from ..rules.compaction import EXPIRE_TOMBSTONE, PartitionOutcome, decide_batches, partition_outcome
from ..rules.key_map import WINNERS, differing, key_winners
from ..scan.scan_plan import ScanFilter, plan_units
from ..scan.views import SCHEMAS, filesystem
from ..storage.fs import HeldFileSystem
from .compaction import OutputSettings, output_groups, partition_outputs, segment_files
from .context import default_parallelism
from .errors import worker_error
from .held import Cleaned, batch_headers, discarded_positions, held_fates, write_cleaned
from .scan import pack_tasks
from .tasks import run_tasks


@dataclass(frozen=True)
class Range:
    """Whole output groups of one partition, read by one task in each of the map and rewrite steps:
    its LogToClean, its segments' files as the plan listed them, their numbers in the partition, work
    units (whole segments), its output groups and how they are written."""

    log: LogToClean
    segments: tuple  # (base offset, {suffix: FileEntry}, next base offset) of each of its segments
    numbers: dict  # the partition's number of each of its segments, by base offset
    units: tuple
    groups: tuple  # its output groups: lists of SegmentMeta
    settings: OutputSettings

    @property
    def nbytes(self) -> int:
        return sum(files[".log"].size for _, files, _ in self.segments)


def partition_ranges(plan, log: LogToClean, settings: OutputSettings, cores: int = 1) -> list[Range]:
    """The ranges of the chosen partition `log`: its output groups in order, cut into about as many
    ranges of equal bytes as tuning.RANGE_BYTES makes, rounded up to a multiple of `cores` (the
    executors' task slots: no wave of tasks leaves a core idle); a group is never cut."""
    scanned = {s.base_offset: s for s in plan.scanned(log)}
    numbers = {base: i for i, base in enumerate(scanned)}
    groups = output_groups(log, settings)
    total = sum(s.size for g in groups for s in g)
    count = -(-max(-(-total // max(tuning.RANGE_BYTES, 1)), 1) // cores) * cores
    cut: list[list] = [[]]
    before = 0  # the bytes of the groups before this one
    for group in groups:
        if cut[-1] and before >= total * len(cut) / count:
            cut.append([])
        cut[-1].append(group)
        before += sum(s.size for s in group)
    ranges = []
    for groups in cut:
        segments = [scanned[s.base_offset] for g in groups for s in g if s.base_offset in scanned]
        units = plan_units(segments, ScanFilter(), unit_bytes=1 << 62)  # whole segments, no index read
        ranges.append(
            Range(
                log,
                tuple(segment_files(segments)),
                {s.base_offset: numbers[s.base_offset] for s in segments},
                tuple(units),
                tuple(groups),
                settings,
            )
        )
    return ranges


def clean_in_ranges(spark, plan, logs: list[LogToClean], settings: dict, *, write: bool, fault=None) -> list[Cleaned]:
    """Steps 2 to 5 of the partitions `logs` by the range path (`settings` by topic): per partition,
    a Cleaned whose `error`, if any, makes it uncleanable (found in the map step, `decided`) or fails
    the pass (found in the rewrite)."""
    cores = default_parallelism(spark)
    ranges = {(s.topic, s.partition): partition_ranges(plan, s, settings[s.topic], cores) for s in logs}
    every = [r for rs in ranges.values() for r in rs]
    root, now = plan.root, plan.now
    mapped = run_tasks(spark, [[r] for r in every], lambda r: _map_range(filesystem(root), r, now))
    by_range = dict(zip(map(id, every), mapped))
    results: dict = {}
    rewrites = []
    for tp, rs in ranges.items():
        maps = [by_range[id(r)] for r in rs]
        error = next((m for m in maps if isinstance(m, str)), None)
        if error is not None:
            results[tp] = Cleaned(*tp, error=error)
            continue
        rewrites += list(zip(rs, _merge(rs, maps, now)))
    written = run_tasks(
        spark,
        pack_tasks(spark, rewrites, lambda job: job[0].nbytes),
        lambda job: _rewrite_range(filesystem(root), root, *job, now=now, write=write, fault=fault),
    )
    for (r, _), cleaned in zip(rewrites, written):
        tp = (r.log.topic, r.log.partition)
        whole = results.setdefault(tp, Cleaned(*tp))
        whole.segments += cleaned.segments
        whole.outputs += cleaned.outputs
        whole.written += cleaned.written
        if cleaned.error is not None and whole.error is None:
            whole.error, whole.decided = cleaned.error, cleaned.decided
    return [results[s.topic, s.partition] for s in logs]


def _map_range(fs, job: Range, now: int):
    """Executor side, step 1: (batch headers, key map, the records out of the map) of one range, read
    once; or its error as `worker_error` text."""
    try:
        held = _held(fs, job)
        headers = pa.Table.from_batches(list(batch_headers(held, job.log, job.units)), SCHEMAS["batches"])
        fates = held_fates(held, job.log, job.units, job.numbers, {}, now)
    except KafkaLogError as err:
        return worker_error(err)
    keyed = pc.less_equal(fates["fate"], EXPIRE_TOMBSTONE)
    aborting = {t.producer_id for t in job.log.aborted_txns}
    if headers.num_rows and aborting:  # data an aborted transaction may discard: decided on the driver
        maybe = pc.and_(
            pc.and_(headers["isTransactional"], pc.invert(headers["isControl"])),
            pc.is_in(headers["producerId"], pa.array(sorted(aborting), pa.int64())),
        )
        at = headers.filter(maybe)
        numbers = pa.array([job.numbers[b] for b in at["segmentBaseOffset"].to_pylist()], pa.int32())
        doubtful = pc.is_in(_batch_key(fates["segment"], fates["position"]), _batch_key(numbers, at["position"]))
    else:
        doubtful = pa.array([False] * fates.num_rows)
    sure = fates.filter(pc.and_(keyed, pc.invert(doubtful)))
    held_back = fates.filter(pc.and_(keyed, doubtful)).select(["segment", "position", *WINNERS.names])
    return _packed(headers), _packed(key_winners(sure)), _packed(held_back)


def _packed(table: pa.Table) -> bytes:
    """`table` as zstd-compressed Arrow IPC: what crosses the JVM between the steps (a map of a
    million keys is tens of MB before; the JVM's heap holds every task's result at once)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _unpacked(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def _held(fs, job: Range) -> HeldFileSystem:
    """`fs` with the range's `.log` files read whole into memory (once per step)."""
    logs = [files[".log"] for _, files, _ in job.segments]
    return HeldFileSystem(fs, {e.path: fs.read_range(e.path, 0, e.size) for e in logs})


def _batch_key(segment, position):
    """A batch's (segment number, position) as one int64."""
    return pc.add(pc.shift_left(pc.cast(segment, pa.int64()), 40), position)


class Merged(NamedTuple):
    """What the driver hands a range's rewrite (step 2), `_packed`: its DECIDED rows, the partition's
    winners of its keys held elsewhere (rules/key_map.WINNERS); the last offsets of the ABORT markers
    whose `.txnindex` entry stays."""

    decided: bytes
    winners: bytes
    kept_markers: frozenset


def _merge(ranges: list[Range], maps: list, now: int) -> list[Merged]:
    """Driver side, step 2 for one partition: what each of its ranges' rewrites takes."""
    log = ranges[0].log
    numbers = {b: n for r in ranges for b, n in r.numbers.items()}
    maps = [tuple(map(_unpacked, m)) for m in maps]
    headers = [b for h, _, _ in maps for b in h.to_batches() if b.num_rows]
    decided = pa.Table.from_batches([decide_batches(headers, log, numbers, now)])
    gone = [(s, p) for s, ps in discarded_positions(decided).items() for p in ps]
    gone_keys = pa.array([(s << 40) + p for s, p in gone], pa.int64())
    local = []
    for _, sure, held_back in maps:
        kept = held_back.filter(pc.invert(pc.is_in(_batch_key(held_back["segment"], held_back["position"]), gone_keys)))
        local.append(key_winners(pa.concat_tables([sure, kept.select(WINNERS.names)])) if kept.num_rows else sure)
    merged = key_winners(pa.concat_tables(local))
    tagged = pa.concat_tables(
        [own.append_column("range", pa.array([i] * own.num_rows, pa.int32())) for i, own in enumerate(local)]
    )
    told = differing(tagged, merged)  # one join for all the ranges
    kept_markers = frozenset(decided.filter(decided["keeps_txn_index_entry"])["lastOffset"].to_pylist())
    jobs = []
    for i, r in enumerate(ranges):
        mine = pc.is_in(decided["segment"], pa.array(sorted(r.numbers.values()), pa.int32()))
        winners = told.filter(pc.equal(told["range"], i)).drop_columns(["range"])
        jobs.append(Merged(_packed(decided.filter(mine)), _packed(winners), kept_markers))
    return jobs


def _rewrite_range(fs, root: str, job: Range, merged: Merged, *, now: int, write: bool, fault=None) -> Cleaned:
    """Executor side, step 3: the range's records decided with the partition's `winners` of keys held
    elsewhere, its output segments made, and with `write` written, from its bytes read a second time."""
    log = job.log
    cleaned = Cleaned(log.topic, log.partition)
    try:
        held = _held(fs, job)
        decided = _unpacked(merged.decided)
        fates = held_fates(held, log, job.units, job.numbers, discarded_positions(decided), now)
        outcome: PartitionOutcome = partition_outcome(log, decided, fates, _unpacked(merged.winners))
    except KafkaLogError as err:  # the map step read these bytes: the pass fails, as a failing rewrite does
        cleaned.error, cleaned.decided = worker_error(err), False
        return cleaned
    cleaned.segments = outcome.segments
    files = {f[0]: f for f in job.segments}
    cleaned.outputs = partition_outputs(log, job.settings, set(merged.kept_markers), outcome.changed, files, job.groups)
    if write:
        write_cleaned(fs, root, log.path, held, cleaned, outcome, fault)
    return cleaned
