"""The range path: a partition too large for one task (`tuning.ONE_TASK_BYTES`, `ONE_TASK_RECORDS`)
cleaned by several, no record and no key passing through the JVM (docs/architecture.md, "A large
partition").

Its cleanable segments, grouped into output segments as Kafka's cleaner groups them, are cut into
**ranges** of whole groups of about `tuning.RANGE_BYTES`. Then, the steps' data handed on as Arrow
IPC files in a staging directory of the partition's (`STAGING`, removed when the pass ends, and by
the next compaction's recovery after a crash). A dry run writes nothing into the log dir
(`dry_run_staging`): in local mode it stages in this host's temporary directory, so that a read-only
log dir can be planned; on a cluster beside the log dir, where the executors reach it as they reach
the log dir, on object storage too. Either is removed when the run ends, and by the next dry run of
this host once the process that made it is gone:

1. Map (one task per range): the range's `.log` bytes are read once and its records' keys decoded
   once, in **slices** of whole batches of at most `tuning.RANGE_RECORDS` records (`_slices`; a
   larger batch alone), so that the task holds a slice's rows, not its range's; per slice it stages
   its records' fates within the slice for the rewrite (rules/ranges.map_range: those superseded there
   are decided), and its key map (rules/key_map.WINNERS: one row per distinct key, with the records
   of batches an aborted transaction may discard held back) in parts by a hash of the key
   (`key_parts`); it returns its batch headers and its slices' sizes.
2. Decide (driver): Kafka's transaction tracker runs over the partition's headers in offset order, as
   one cleaning pass runs it (`decide_batches`: its state crosses the ranges): per batch, no key. The
   keys are merged in as many parts as ranges, or more where the maps hold more than RANGE_RECORDS
   rows a part.
3. Merge (one task per part of the keys, a run of the map files' parts): the slices' maps of the part's keys
   merged (rules/ranges.merge_part, whole keys compared), the held-back records of discarded batches
   dropped; each slice's winners of its keys held elsewhere are staged for its rewrite.
4. Rewrite (one task per range): a slice at a time, the staged fates given their final value with
   those winners (rules/ranges.range_fates: no key decoded again) and their outcome found
   (rules/ranges.joined_outcome joins the slices'), its output segments made and written as
   `.cleaned` files from its bytes read a second time (the last; a batch none of whose records goes
   is copied, not decoded), which the driver swaps in with the other paths' (storage/swap.py).

The rules are rules/compaction.py's, rules/key_map.py's and rules/ranges.py's; the reading and writing
spark/held.py's, as on the one-task path, so that both paths write the same bytes.
"""

from __future__ import annotations

import os
import posixpath
import socket
import tempfile
import uuid
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..errors import KafkaLogError
from ..rules.cleaner import LogToClean
from ..rules.compaction import FATES, decide_batches, partition_outcome
from ..rules.ranges import (
    MAPPED,
    TOLD,
    batch_key,
    joined_outcome,
    key_parts,
    map_range,
    merge_part,
    range_fates,
    range_of_groups,
    slice_end,
    slice_sizes,
)
from ..scan.scan_plan import ScanFilter, plan_units
from ..scan.views import SCHEMAS, filesystem, filesystem_and_path
from ..storage.fs import HeldFileSystem, LogFileSystem, process_gone
from .compaction import OutputSettings, output_groups, partition_outputs, segment_files
from .context import default_parallelism, executors_on_this_host
from .errors import worker_error
from .held import Cleaned, batch_headers, held_fate_batches, write_cleaned
from .scan import pack_tasks
from .tasks import run_tasks

# at most, the parts a map file's keys are cut into (by `key_parts`), one record batch each: a merge
# task takes a run of them, so that the number of merge tasks is chosen once the maps' sizes are known
KEY_SLOTS = 1024


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
    slots: int  # the parts its slices' key maps are written in (`partition_ranges`)

    @property
    def nbytes(self) -> int:
        return sum(files[".log"].size for _, files, _ in self.segments)


def partition_ranges(plan, log: LogToClean, settings: OutputSettings, cores: int = 1) -> list[Range]:
    """The ranges of the chosen partition `log`: its output groups in order, cut into about as many
    ranges of equal bytes as tuning.RANGE_BYTES makes, rounded up to a multiple of `cores` (the
    executors' task slots: no wave of tasks leaves a core idle); a group is never cut. Their slices'
    key maps are written in as many parts (at most KEY_SLOTS) as the partition's keys can be merged in:
    the ranges, or one per RANGE_RECORDS of its offsets (which bound its records, and so its map rows)."""
    scanned = {s.base_offset: s for s in plan.scanned(log)}
    numbers = {base: i for i, base in enumerate(scanned)}
    groups = output_groups(log, settings)
    total = sum(s.size for g in groups for s in g)
    count = -(-max(-(-total // max(tuning.RANGE_BYTES, 1)), 1) // cores) * cores
    cut: list[list] = [[] for _ in range(count)]
    for group, number in zip(groups, range_of_groups([sum(s.size for s in g) for g in groups], count)):
        cut[number].append(group)
    cut = [groups for groups in cut if groups]
    offsets = log.upper_bound - min(scanned, default=log.upper_bound)
    slots = min(KEY_SLOTS, max(len(cut), -(-offsets // max(tuning.RANGE_RECORDS, 1))))
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
                slots,
            )
        )
    return ranges


# the staging directory's name in a partition directory (Kafka's log loader reads only its files)
STAGING = ".kafkalog-ranges"
# a dry run's (`dry_run_staging`): `<temporary directory>/kafkalog-dry-run-<host>-<pid>-<run>`, or
# `<log dir>.kafkalog-dry-run-<host>-<pid>-<run>` on a cluster; it writes nothing into the log dir
DRY_RUN_STAGING = "kafkalog-dry-run-"


class Staging(NamedTuple):
    """A partition's staging directory: `path` in the filesystem of `where` (a log dir's root)."""

    where: str
    path: str


class Mapped(NamedTuple):
    """What a partition's map step left for its merge and rewrite: per range, the first batch key
    (`batch_key`) of each of its slices (the first: -1, every batch before the second), and the
    parts its keys are merged in."""

    starts: tuple  # per range, a tuple of its slices' first batch keys
    parts: int
    slots: int  # the parts of each slice's key map file (Range.slots)

    def slices(self) -> list[tuple[int, int]]:
        """(range, slice) of each of the partition's slices, in file order: its number in the merge."""
        return [(r, c) for r, starts in enumerate(self.starts) for c in range(len(starts))]

    def first(self, number: int) -> int:
        """The merge's number of range `number`'s first slice."""
        return sum(len(starts) for starts in self.starts[:number])


class Step(NamedTuple):
    """Where a task finds and leaves the steps' files: its partition's staging directory, its number
    among the partition's ranges (or parts of the keys) and how many ranges (and parts) there are."""

    staging: Staging
    number: int
    total: int

    def file(self, name: str) -> tuple[LogFileSystem, str]:
        """(filesystem, path) of the staged file `name`."""
        fs = filesystem(self.staging.where)
        return fs, fs.join(self.staging.path, name)


def clean_in_ranges(spark, plan, logs: list[LogToClean], settings: dict, *, write: bool, fault=None) -> list[Cleaned]:
    """Steps 2 to 5 of the partitions `logs` by the range path (`settings` by topic): per partition,
    a Cleaned whose `error`, if any, makes it uncleanable (found in the map step, `decided`) or fails
    the pass (found in the rewrite). What is staged is removed however the pass ends."""
    where, beside = (plan.root, None) if write else dry_run_staging(spark, plan.root)
    fs = filesystem(where)
    staged = {}
    for s in logs:
        place = fs.join(beside, f"{s.topic}-{s.partition}") if beside else fs.join(s.path, STAGING)
        staged[s.topic, s.partition] = Staging(where, place)
        remove_staging(fs, place)  # a crashed pass's
        fs.make_dirs(place)
    try:
        return _clean(spark, plan, logs, settings, staged, write=write, fault=fault)
    finally:
        for staging in staged.values():
            remove_staging(fs, staging.path)
        if beside is not None:
            remove_staging(fs, beside)


def dry_run_staging(spark, root: str) -> tuple[str, str]:
    """(where, path): the directory a dry run stages in, named by this host and process. Where every
    executor runs on this host, in its temporary directory (a read-only log dir, or read-only object
    storage credentials, can then be planned); else beside the log dir `root`, which the executors reach.
    What a dry run of this host whose process is gone (killed) left there is removed first."""
    if executors_on_this_host(spark):
        where = tempfile.gettempdir()
        parent, prefix = where, DRY_RUN_STAGING
    else:
        fs, path = filesystem_and_path(root)
        where, (parent, name) = root, posixpath.split(path.rstrip("/"))
        prefix = f"{name}.{DRY_RUN_STAGING}"
    fs = filesystem(where)
    mine = f"{prefix}{socket.gethostname()}-"
    for entry in fs.list_dir(parent):
        owner = entry.name[len(mine) :].split("-")[0]
        if entry.name.startswith(mine) and owner.isdigit() and process_gone(int(owner)):
            remove_staging(fs, fs.join(parent, entry.name))
    return where, fs.join(parent, f"{mine}{os.getpid()}-{uuid.uuid4().hex[:12]}")


def remove_staging(fs, path: str) -> None:
    if fs.exists(path):
        fs.delete_dir(path)


def _clean(spark, plan, logs, settings, staged, *, write, fault) -> list[Cleaned]:
    root, now, cores = plan.root, plan.now, default_parallelism(spark)
    ranges = {(s.topic, s.partition): partition_ranges(plan, s, settings[s.topic], cores) for s in logs}
    jobs = [(r, Step(staged[tp], i, len(rs))) for tp, rs in ranges.items() for i, r in enumerate(rs)]
    mapped = run_tasks(spark, [[job] for job in jobs], lambda job: _map_range(filesystem(root), *job, now))
    results: dict = {}
    merges, decisions, mapping = [], {}, {}
    for tp, rs in ranges.items():
        maps = [m for (_, step), m in zip(jobs, mapped) if step.staging == staged[tp]]
        error = next((m for m in maps if isinstance(m, str)), None)
        if error is not None:
            results[tp] = Cleaned(*tp, error=error)
            continue
        decisions[tp] = _decide(rs, [headers for headers, _ in maps], now)
        rows = sum(n for _, slices in maps for n, _ in slices)
        parts = min(rs[0].slots, max(len(rs), -(-rows // max(tuning.RANGE_RECORDS, 1))))
        mapping[tp] = Mapped(tuple(tuple(start for _, start in slices) for _, slices in maps), parts, rs[0].slots)
        merges += [(Step(staged[tp], j, parts), mapping[tp], decisions[tp].gone) for j in range(parts)]
    run_tasks(spark, [[m] for m in merges], lambda m: _merge_part(*m))
    rewrites = [
        (r, step, decisions[tp], mapping[tp]) for r, step in jobs if (tp := (r.log.topic, r.log.partition)) in decisions
    ]
    written = run_tasks(
        spark,
        pack_tasks(spark, rewrites, lambda job: job[0].nbytes),
        lambda job: _rewrite_range(filesystem(root), root, *job, now=now, write=write, fault=fault),
    )
    for (r, *_), cleaned in zip(rewrites, written):
        tp = (r.log.topic, r.log.partition)
        whole = results.setdefault(tp, Cleaned(*tp))
        whole.segments += cleaned.segments
        whole.outputs += cleaned.outputs
        whole.written += cleaned.written
        if cleaned.error is not None and whole.error is None:
            whole.error, whole.decided = cleaned.error, cleaned.decided
    return [results[s.topic, s.partition] for s in logs]


def _map_range(fs, job: Range, step: Step, now: int):
    """Executor side, step 1: the range's records read in slices of whole batches of at most
    `tuning.RANGE_RECORDS` records (`_slices`), each slice's staged fates and key map written (its key
    map in `job.slots` parts of its keys); returns the range's batch headers (`_packed`) and per slice
    (its key map's rows, its first batch key); or its error as `worker_error` text."""
    try:
        held = _held(fs, job)
        headers = pa.Table.from_batches(list(batch_headers(held, job.log, job.units)), SCHEMAS["batches"])
        aborting = {t.producer_id for t in job.log.aborted_txns}
        maybe = pa.array([], pa.int64())
        if headers.num_rows and aborting:  # data an aborted transaction may discard: decided after the tracker
            at = headers.filter(
                pc.and_(
                    pc.and_(headers["isTransactional"], pc.invert(headers["isControl"])),
                    pc.is_in(headers["producerId"], pa.array(sorted(aborting), pa.int64())),
                )
            )
            numbers = pa.array([job.numbers[b] for b in at["segmentBaseOffset"].to_pylist()], pa.int32())
            maybe = batch_key(numbers, at["position"])
        slices = []
        batches = held_fate_batches(held, job.log, job.units, job.numbers, {}, now)
        for c, fates in enumerate(_slices(batches, tuning.RANGE_RECORDS)):
            keys = batch_key(fates["segment"], fates["position"])
            doubtful = pc.is_in(keys, maybe).to_numpy(zero_copy_only=False)
            fated, mapped = map_range(fates, doubtful, c)
            _write(*step.file(f"fates-{step.number}-{c}.arrow"), fated)
            part = key_parts(mapped["key"], job.slots)
            _write_parts(*step.file(f"map-{step.number}-{c}.arrow"), mapped, part, job.slots)
            slices.append((mapped.num_rows, keys[0].as_py() if c and len(keys) else -1))
    except KafkaLogError as err:
        return worker_error(err)
    return _packed(headers), slices


def _slices(batches, records: int):
    """The FATES rows of `batches` (in file order) cut into slices of whole batches of at most `records`
    records (rules/ranges.slice_end; one larger batch alone); at least one slice, empty where no row is."""
    held: list[pa.RecordBatch] = []
    rows, cut = 0, False
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        while rows > records:  # the batch after the slice has begun: the slice's batches are whole
            table = pa.Table.from_batches(held, FATES)
            sizes = _batch_sizes(table)
            taken = slice_end(sizes, records)
            if taken == len(sizes):  # one batch larger than a slice, not read to its end yet
                break
            end = int(sizes[:taken].sum())
            yield table.slice(0, end)
            held, rows, cut = table.slice(end).to_batches(), rows - end, True
    table = pa.Table.from_batches(held, FATES)
    sizes = _batch_sizes(table)
    ends = np.cumsum(sizes)[np.cumsum(slice_sizes(sizes, records), dtype=np.int64) - 1]
    for start, end in zip([0, *ends[:-1]], ends):
        yield table.slice(start, end - start)
    if not cut and not len(ends):
        yield table


def _batch_sizes(fates: pa.Table) -> np.ndarray:
    """The records of each batch of `fates` rows (file order: a batch's records are one run of rows)."""
    key = batch_key(fates["segment"], fates["position"]).to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.array([], np.int64)
    return np.diff(np.append(starts, len(key)))


def _write(fs, path: str, table: pa.Table) -> None:
    """`table` as an lz4-compressed Arrow IPC file (staged: not synced; a crash discards it all)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    with fs.open_output(path) as out:
        out.write(sink.getvalue())


def _write_parts(fs, path: str, table: pa.Table, part: np.ndarray, parts: int) -> None:
    """`table` as an lz4-compressed Arrow IPC file of `parts` record batches, batch j its rows of
    `part` j (empty where none is): a reader takes the parts it wants (`_read_parts`)."""
    if (part[1:] < part[:-1]).any():  # a merge's rows come in slice order already
        order = np.argsort(part, kind="stable")
        table, part = table.take(pa.array(order)), part[order]
    cuts = np.searchsorted(part, np.arange(parts + 1))
    whole = pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        for j in range(parts):
            writer.write_batch(whole.slice(cuts[j], cuts[j + 1] - cuts[j]))
    with fs.open_output(path) as out:
        out.write(sink.getvalue())


def _read_parts(fs, path: str, parts, schema: pa.Schema) -> pa.Table:
    """The record batches `parts` (numbers) of the Arrow IPC file `path`, and no other bytes of it."""
    with fs.open_input(path) as f:
        reader = pa.ipc.open_file(f)
        return pa.Table.from_batches([reader.get_batch(j) for j in parts], schema)


def _read(fs, path: str) -> pa.Table:
    return pa.ipc.open_file(pa.py_buffer(fs.read_bytes(path))).read_all()


def _packed(table: pa.Table) -> bytes:
    """`table` as zstd-compressed Arrow IPC: the batch headers a map task returns to the driver."""
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


class Decided(NamedTuple):
    """What the driver decides of a partition's batches (step 2), for its merge and rewrite tasks:
    its DECIDED rows (`_packed`), the `batch_key`s of the batches whose records all go, and the last
    offsets of the ABORT markers whose `.txnindex` entry stays."""

    decided: bytes
    gone: pa.Array
    kept_markers: frozenset


def _decide(ranges: list[Range], maps: list[bytes], now: int) -> Decided:
    """Driver side, step 2 for one partition: the transaction tracker over its batch headers."""
    numbers = {b: n for r in ranges for b, n in r.numbers.items()}
    headers = [b for m in maps for b in _unpacked(m).to_batches() if b.num_rows]
    decided = pa.Table.from_batches([decide_batches(headers, ranges[0].log, numbers, now)])
    gone = decided.filter(decided["discard_records"])
    kept_markers = frozenset(decided.filter(decided["keeps_txn_index_entry"])["lastOffset"].to_pylist())
    return Decided(_packed(decided), batch_key(gone["segment"], gone["position"]), kept_markers)


def _merge_part(step: Step, mapped: Mapped, gone: pa.Array) -> None:
    """Executor side, step 3: part `step.number` of `step.total` of a partition's keys (a run of the
    slots of each slice's key map) merged across its slices, and each slice's winners of
    those keys held elsewhere staged for its rewrite (`told-<part>`, a record batch per slice)."""
    j, parts = step.number, step.total
    mine = range(j * mapped.slots // parts, (j + 1) * mapped.slots // parts)
    maps = []
    for number, (r, c) in enumerate(mapped.slices()):
        rows = _read_parts(*step.file(f"map-{r}-{c}.arrow"), mine, MAPPED)
        tag = pa.array(np.full(rows.num_rows, number, np.int32))  # the slice's number in the partition
        maps.append(rows.set_column(MAPPED.get_field_index("range"), "range", tag))
    told = merge_part(pa.concat_tables(maps), gone)
    count = len(mapped.slices())
    _write_parts(*step.file(f"told-{j}.arrow"), told.drop_columns(["range"]), told["range"].to_numpy(), count)


def _rewrite_range(
    fs, root: str, job: Range, step: Step, decision: Decided, mapping: Mapped, *, now: int, write: bool, fault=None
) -> Cleaned:
    """Executor side, step 4: the range's staged fates made final with the partition's winners of
    its keys held elsewhere, its output segments made, and with `write` written, from its bytes read
    a second time."""
    log = job.log
    cleaned = Cleaned(log.topic, log.partition)
    try:
        held = _held(fs, job)
    except KafkaLogError as err:  # the map step read these bytes: the pass fails, as a failing rewrite does
        cleaned.error, cleaned.decided = worker_error(err), False
        return cleaned
    decided = _unpacked(decision.decided)
    decided = decided.filter(pc.is_in(decided["segment"], pa.array(sorted(job.numbers.values()), pa.int32())))
    at = batch_key(decided["segment"], decided["position"]).to_numpy()
    starts = mapping.starts[step.number]
    first = mapping.first(step.number)
    outcomes = []
    for c, start in enumerate(starts):  # a slice at a time: its staged fates, its winners held elsewhere
        told = pa.concat_tables(
            [_read_parts(*step.file(f"told-{j}.arrow"), [first + c], TOLD) for j in range(mapping.parts)]
        )
        fates = range_fates(_read(*step.file(f"fates-{step.number}-{c}.arrow")), told, decision.gone)
        end = starts[c + 1] if c + 1 < len(starts) else None
        batches = (at >= start) & (True if end is None else at < end)
        outcomes.append(partition_outcome(log, decided.filter(pa.array(batches)), fates, fates["fate"].to_numpy()))
    outcome = joined_outcome(outcomes)
    cleaned.segments = outcome.segments
    files = {f[0]: f for f in job.segments}
    kept = set(decision.kept_markers)
    cleaned.outputs = partition_outputs(log, job.settings, kept, outcome.changed, files, job.groups)
    if write:
        write_cleaned(fs, root, log.path, held, cleaned, outcome, fault)
    return cleaned
