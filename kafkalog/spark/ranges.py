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
   once; the task stages its records' fates within the range for its rewrite (rules/ranges.map_range:
   those superseded there are decided), and its key map (rules/key_map.WINNERS: one row per distinct
   key, with the records of batches an aborted transaction may discard held back) cut into parts by
   a hash of the key (`key_parts`, one part a merge task); it returns its batch headers.
2. Decide (driver): Kafka's transaction tracker runs over the partition's headers in offset order, as
   one cleaning pass runs it (`decide_batches`: its state crosses the ranges): per batch, no key.
3. Merge (one task per part of the keys, as many parts as ranges): the ranges' maps of the part's
   keys merged (rules/ranges.merge_part, whole keys compared), the held-back records of discarded
   batches dropped; each range's winners of its keys held elsewhere are staged for its rewrite.
4. Rewrite (one task per range): the range's staged fates given their final value with those
   winners (rules/ranges.range_fates: no key decoded again), its output segments made and written as
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
from ..rules.compaction import PartitionOutcome, decide_batches, partition_outcome
from ..rules.ranges import batch_key, key_parts, map_range, merge_part, range_fates, range_of_groups
from ..scan.scan_plan import ScanFilter, plan_units
from ..scan.views import SCHEMAS, filesystem, filesystem_and_path
from ..storage.fs import HeldFileSystem, LogFileSystem, process_gone
from .compaction import OutputSettings, output_groups, partition_outputs, segment_files
from .context import default_parallelism, executors_on_this_host
from .errors import worker_error
from .held import Cleaned, batch_headers, held_fates, write_cleaned
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
    cut: list[list] = [[] for _ in range(count)]
    for group, number in zip(groups, range_of_groups([sum(s.size for s in g) for g in groups], count)):
        cut[number].append(group)
    cut = [groups for groups in cut if groups]
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


# the staging directory's name in a partition directory (Kafka's log loader reads only its files)
STAGING = ".kafkalog-ranges"
# a dry run's (`dry_run_staging`): `<temporary directory>/kafkalog-dry-run-<host>-<pid>-<run>`, or
# `<log dir>.kafkalog-dry-run-<host>-<pid>-<run>` on a cluster; it writes nothing into the log dir
DRY_RUN_STAGING = "kafkalog-dry-run-"


class Staging(NamedTuple):
    """A partition's staging directory: `path` in the filesystem of `where` (a log dir's root)."""

    where: str
    path: str


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
    merges, decisions = [], {}
    for tp, rs in ranges.items():
        maps = [m for (_, step), m in zip(jobs, mapped) if step.staging == staged[tp]]
        error = next((m for m in maps if isinstance(m, str)), None)
        if error is not None:
            results[tp] = Cleaned(*tp, error=error)
            continue
        decisions[tp] = _decide(rs, maps, now)
        merges += [(Step(staged[tp], j, len(rs)), decisions[tp].gone) for j in range(len(rs))]
    run_tasks(spark, [[m] for m in merges], lambda m: _merge_part(*m))
    rewrites = [(r, step, decisions[tp]) for r, step in jobs if (tp := (r.log.topic, r.log.partition)) in decisions]
    written = run_tasks(
        spark,
        pack_tasks(spark, rewrites, lambda job: job[0].nbytes),
        lambda job: _rewrite_range(filesystem(root), root, *job, now=now, write=write, fault=fault),
    )
    for (r, _, _), cleaned in zip(rewrites, written):
        tp = (r.log.topic, r.log.partition)
        whole = results.setdefault(tp, Cleaned(*tp))
        whole.segments += cleaned.segments
        whole.outputs += cleaned.outputs
        whole.written += cleaned.written
        if cleaned.error is not None and whole.error is None:
            whole.error, whole.decided = cleaned.error, cleaned.decided
    return [results[s.topic, s.partition] for s in logs]


def _map_range(fs, job: Range, step: Step, now: int):
    """Executor side, step 1: the range's batch headers (`_packed`), its staged fates and its parts
    of the key map written; or its error as `worker_error` text."""
    try:
        held = _held(fs, job)
        headers = pa.Table.from_batches(list(batch_headers(held, job.log, job.units)), SCHEMAS["batches"])
        fates = held_fates(held, job.log, job.units, job.numbers, {}, now)
    except KafkaLogError as err:
        return worker_error(err)
    aborting = {t.producer_id for t in job.log.aborted_txns}
    doubtful = np.zeros(fates.num_rows, bool)
    if headers.num_rows and aborting:  # data an aborted transaction may discard: decided after the tracker
        maybe = pc.and_(
            pc.and_(headers["isTransactional"], pc.invert(headers["isControl"])),
            pc.is_in(headers["producerId"], pa.array(sorted(aborting), pa.int64())),
        )
        at = headers.filter(maybe)
        numbers = pa.array([job.numbers[b] for b in at["segmentBaseOffset"].to_pylist()], pa.int32())
        doubtful = pc.is_in(batch_key(fates["segment"], fates["position"]), batch_key(numbers, at["position"]))
        doubtful = doubtful.to_numpy(zero_copy_only=False)
    fated, keys = map_range(fates, doubtful, step.number)
    _write(*step.file(f"fates-{step.number}.arrow"), fated)
    part = key_parts(keys["key"], step.total)
    order = np.argsort(part, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(step.total + 1))
    keys = keys.take(pa.array(order))
    for j in range(step.total):
        _write(*step.file(f"map-{j}-{step.number}.arrow"), keys.slice(cuts[j], cuts[j + 1] - cuts[j]))
    return _packed(headers)


def _write(fs, path: str, table: pa.Table) -> None:
    """`table` as an lz4-compressed Arrow IPC file (staged: not synced; a crash discards it all)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    with fs.open_output(path) as out:
        out.write(sink.getvalue())


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


def _merge_part(step: Step, gone: pa.Array) -> None:
    """Executor side, step 3: part `step.number` of a partition's keys merged across its ranges,
    and each range's winners of those keys held elsewhere staged for its rewrite."""
    maps = [_read(*step.file(f"map-{step.number}-{i}.arrow")) for i in range(step.total)]
    told = merge_part(pa.concat_tables(maps), gone)
    order = pc.sort_indices(told["range"]).to_numpy()
    ranges = told["range"].to_numpy()[order]
    cuts = np.searchsorted(ranges, np.arange(step.total + 1))
    told = told.take(pa.array(order)).drop_columns(["range"])
    for i in range(step.total):
        _write(*step.file(f"told-{i}-{step.number}.arrow"), told.slice(cuts[i], cuts[i + 1] - cuts[i]))


def _rewrite_range(
    fs, root: str, job: Range, step: Step, decision: Decided, *, now: int, write: bool, fault=None
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
    mine = pc.is_in(decided["segment"], pa.array(sorted(job.numbers.values()), pa.int32()))
    told = pa.concat_tables([_read(*step.file(f"told-{step.number}-{j}.arrow")) for j in range(step.total)])
    fates = range_fates(_read(*step.file(f"fates-{step.number}.arrow")), told, decision.gone)
    outcome: PartitionOutcome = partition_outcome(log, decided.filter(mine), fates, fates["fate"].to_numpy())
    cleaned.segments = outcome.segments
    files = {f[0]: f for f in job.segments}
    kept = set(decision.kept_markers)
    cleaned.outputs = partition_outputs(log, job.settings, kept, outcome.changed, files, job.groups)
    if write:
        write_cleaned(fs, root, log.path, held, cleaned, outcome, fault)
    return cleaned
