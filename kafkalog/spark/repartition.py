"""A topic repartitioned on Spark in two stages of Python tasks; no record goes through the JVM.

1. **Place** (`stage_records`): one task per scan task (work units packed by bytes, as every scan)
   reads the committed data records of the source (`topic_table.committed_rows`: aborted records and
   control batches dropped, each partition's range [log start, last stable offset)) as the bodies view
   (`scan.bodies`: each record's timestamp, key, and its bytes after its offset delta, copied verbatim
   where the record is written as Kafka writes one, else decoded and encoded again), gives each its
   new partition (`rules.partitioner.new_partitions`, murmur2 in numpy) and its merge key (the running
   maximum timestamp of its source partition, `running_max`), and appends it to the Arrow IPC file of
   (task, source partition, new partition) under `<staging>/.placed/<new partition>/`. A task reading
   a unit that does not start its partition takes, as the carry, the largest timestamp of the segments
   before the unit (and of the unit's own segment when the unit starts inside it): an upper bound of
   every merge key before it, so the keys never decrease along a source partition, whichever task
   reads which unit. A file holds one source's records in offset order: it is sorted by merge key.
2. **Write** (`write_partitions`): one task per new partition merges its files (`merged`: a k-way
   merge by (merge key, source partition, source offset), a chunk of each file at a time, so that a
   task's memory grows with neither the partition nor its keys), and writes the partition with
   `PartitionWriter` (the broker's append path: segments rolled at segment.bytes, indexes,
   leader-epoch checkpoint, partition.metadata), each record its staged body after a new length and
   deltas (`splice.join_records`: nothing decoded, nothing encoded), in batches of at most `BATCH_BYTES` (and
   max.message.bytes) of one codec and timestamp type, its part of the offset map as Parquet, and
   where each consumer group resumes (`GroupResume`). With `--compact` it reads the files twice: the
   first merge decides each key's survivor (`rules.partitioner.Compaction`), the second writes.

Spark only schedules the tasks (`tasks.run_tasks`): what reaches the JVM and the driver is each
task's summary. The staged files are removed with the staging directory.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TimestampType, build_batch_of_section
from ..codec.records import decode_record
from ..codec.splice import join_records, joined_records
from ..errors import KafkaLogError
from ..rules.cleaner import CleanedTransactionMetadata
from ..rules.compaction_strategy import CompactionStrategy
from ..rules.partitioner import Compaction, GroupResume, new_partitions, running_max
from ..scan.bodies import BodiesBuilder
from ..scan.reader import read_unit
from ..scan.scan_plan import ScanFilter, plan_scan
from ..scan.views import HEADERS_TYPE, filesystem
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter
from .scan import default_min_tasks
from .tasks import run_tasks
from .topic_table import PartitionRange, committed_rows

# Uncompressed bytes of records gathered into one batch: a producer's batches are 16 KiB by default;
# larger batches compress better and cost a consumer nothing (a fetch returns whole batches).
BATCH_BYTES = 256 * 1024
_RECORD_OVERHEAD = 8  # a record's length, attributes and deltas, roughly: enough to cut batches by size
# Rows of each staged file a merging task holds at once: its memory is this times the files it merges
MERGE_ROWS = 16_384
PLACED = ".placed"  # the staged records' directory in the staging directory

PLACED_SCHEMA = pa.schema(
    [
        ("order", pa.int64()),  # the merge key: the source partition's running maximum timestamp
        ("source", pa.int32()),
        ("sourceOffset", pa.int64()),
        ("key", pa.binary()),
        ("body", pa.binary()),  # the record's bytes after its offset delta (scan.bodies)
        ("valueIsNull", pa.bool_()),
        ("timestamp", pa.int64()),  # epoch ms
        ("timestampType", pa.int32()),
        ("codec", pa.int8()),
        ("deleteHorizonMs", pa.int64()),  # the source batch's, read for --compact only
    ]
)


@dataclass(frozen=True)
class WriteSpec:
    """What each task needs (it pickles): where and how to write, and the groups' commits."""

    staging: str  # the directory the new partition directories are written in
    topic: str
    topic_id: str
    partitions: int
    leader_epochs: Mapping[int, int]
    segment_bytes: int
    segment_ms: int
    index_interval_bytes: int
    segment_index_bytes: int
    max_message_bytes: int
    codec: int | None  # None: each record keeps its source batch's codec (compression.type=producer)
    offset_map: str | None  # the directory of the offset map's Parquet parts
    committed: Mapping[str, Mapping[int, int]]  # group -> source partition -> committed offset
    compaction: CompactionStrategy | None = None  # --compact: the target's strategy
    now: int = 0  # --compact: the clock a tombstone's delete horizon is read against
    delete_retention_ms: int = 86_400_000  # --compact: a kept tombstone's batch gets now + this

    @property
    def placed(self) -> str:
        return os.path.join(self.staging, PLACED)


def carries(log_dir, topic: str, units) -> dict[tuple[int, int, int], int]:
    """(partition, segment base offset, unit start) -> the largest timestamp before the unit: of the
    partition's earlier segments, and of the unit's own segment when the unit starts inside it."""
    from ..storage.logdir import LogDir

    opened = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    largest: dict[int, list[tuple[int, int]]] = {}
    for unit in units:
        if unit.partition not in largest:
            segments = opened.partition(topic, unit.partition).segments
            largest[unit.partition] = [
                (s.base_offset, s.meta(with_last_offset=False).largest_timestamp) for s in segments
            ]
    out = {}
    for unit in units:
        before = [ts for base, ts in largest[unit.partition] if base < unit.segment_base_offset]
        if unit.start > 0:
            before += [ts for base, ts in largest[unit.partition] if base == unit.segment_base_offset]
        out[unit.partition, unit.segment_base_offset, unit.start] = max(before, default=-1)
    return out


# -- stage 1: place ---------------------------------------------------------------------------------------


def stage_records(spark, log_dir, topic: str, ranges: Sequence[PartitionRange], spec: WriteSpec) -> dict:
    """Stage the committed records of `topic` in `ranges` per new partition (the module's step 1):
    the records staged and the largest peak resident memory of the tasks' processes (MiB)."""
    wanted = {r.partition: r for r in ranges if r.end > r.start}
    for q in range(spec.partitions):
        os.makedirs(os.path.join(spec.placed, str(q)), exist_ok=True)
    if not wanted:
        return {"records": 0, "peakRssMiB": 0}
    flt = ScanFilter.of(topic, wanted, min(r.start for r in wanted.values()), max(r.end for r in wanted.values()))
    plan = plan_scan(log_dir, flt, min_tasks=default_min_tasks(spark))
    carried = carries(log_dir, topic, plan.units)
    root = plan.root
    # a task's units of one source in offset order: each staged file is then in merge-key order
    tasks = [sorted(t, key=lambda u: (u.partition, u.segment_base_offset, u.start)) for t in plan.tasks]

    def task(i: int) -> tuple[int, float]:
        return _stage_task(i, tasks[i], filesystem(root), flt, wanted, carried, spec), peak_rss_mib()

    done = run_tasks(spark, [[i] for i in range(len(tasks))], task)
    return {"records": sum(n for n, _ in done), "peakRssMiB": max(rss for _, rss in done)}


def peak_rss_mib() -> float:
    """The peak resident memory of this process so far (a Python worker runs many tasks in turn: an
    upper bound of each task's)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stage_task(i: int, units, fs, flt: ScanFilter, wanted, carried, spec: WriteSpec) -> int:
    files = _StagedFiles(spec.placed, i)
    trackers: dict[int, dict[int, CleanedTransactionMetadata]] = {}
    staged = 0
    try:
        for unit in units:
            files.start_source(unit.partition)
            carry = carried[unit.partition, unit.segment_base_offset, unit.start]
            horizons = _delete_horizons(unit, fs, flt) if spec.compaction is not None else None
            for batch in read_unit(unit, fs, "records", flt, builder=BodiesBuilder(unit)):
                kept = committed_rows(batch, wanted[unit.partition], trackers.setdefault(unit.partition, {}))
                if not kept.num_rows:
                    continue
                q, placed = place(kept, spec.partitions, carry, horizons)
                carry = int(placed["order"][-1].as_py())
                by_q = np.argsort(q, kind="stable")  # each new partition's rows, in their order
                placed, q = placed.take(pa.array(by_q)), q[by_q]
                cuts = [0, *(np.flatnonzero(q[1:] != q[:-1]) + 1).tolist(), len(q)]
                for start, end in zip(cuts, cuts[1:]):
                    files.write(int(q[start]), placed.slice(start, end - start))
                staged += kept.num_rows
        files.start_source(None)
    except BaseException:
        files.abort()
        raise
    return staged


class _StagedFiles:
    """The IPC files of one stage-1 task: one per (source, new partition), open while its source is
    read (a task's units are sorted by source), written under a temporary name and renamed when
    whole, so a retried task's files replace a failed attempt's and a merge never reads half a file."""

    def __init__(self, placed: str, task: int):
        self.placed, self.task = placed, task
        self.source: int | None = None
        self.open: dict[int, tuple[pa.ipc.RecordBatchFileWriter, pa.NativeFile, str]] = {}

    def start_source(self, source: int | None) -> None:
        if source == self.source:
            return
        for writer, sink, path in self.open.values():
            writer.close()
            sink.close()
            os.replace(path + ".tmp", path)
        self.open, self.source = {}, source

    def write(self, q: int, rows: pa.RecordBatch) -> None:
        if q not in self.open:
            path = os.path.join(self.placed, str(q), f"{self.task:05d}-{self.source:05d}.arrow")
            sink = pa.OSFile(path + ".tmp", "wb")
            self.open[q] = (pa.ipc.new_file(sink, PLACED_SCHEMA), sink, path)
        self.open[q][0].write_batch(rows)

    def abort(self) -> None:
        for _, sink, path in self.open.values():
            sink.close()
            os.remove(path + ".tmp")
        self.open = {}


def _delete_horizons(unit, fs, flt: ScanFilter) -> dict[int, int]:
    """base offset -> delete horizon of the unit's batches that have one (their headers only)."""
    out: dict[int, int] = {}
    for batch in read_unit(unit, fs, "batches", flt):
        horizon = batch["deleteHorizonMs"]
        has = pc.is_valid(horizon)
        out.update(zip(batch["baseOffset"].filter(has).to_pylist(), horizon.filter(has).to_pylist()))
    return out


def place(
    batch: pa.RecordBatch, partitions: int, carry: int, horizons: Mapping[int, int] | None = None
) -> tuple[np.ndarray, pa.RecordBatch]:
    """Rows of the bodies view (one source partition's, in offset order): their new partitions, and
    the rows as PLACED_SCHEMA rows (`horizons`: the delete horizon of each batch that has one)."""
    source = batch["partition"].to_numpy()
    timestamps = batch["timestamp"].to_numpy()
    if horizons:
        base = batch["baseOffset"].to_numpy()
        found = np.array([horizons.get(b, -1) for b in np.unique(base).tolist()], np.int64)
        horizon = found[np.searchsorted(np.unique(base), base)]
        horizon_column = pa.array(horizon, mask=horizon < 0)
    else:
        horizon_column = pa.nulls(batch.num_rows, pa.int64())
    columns = {
        "order": pa.array(running_max(timestamps, carry), pa.int64()),
        "source": batch["partition"],
        "sourceOffset": batch["offset"],
        "key": batch["key"],
        "body": batch["body"],
        "valueIsNull": batch["valueIsNull"],
        "timestamp": batch["timestamp"],
        "timestampType": batch["timestampType"],
        "codec": batch["compresscodec"],
        "deleteHorizonMs": horizon_column,
    }
    placed = pa.RecordBatch.from_arrays(list(columns.values()), schema=PLACED_SCHEMA)
    return new_partitions(batch["key"], source, partitions), placed


# -- stage 2: merge and write -----------------------------------------------------------------------------


class _Run:
    """One staged file read a chunk at a time: its rows are in merge-key order."""

    def __init__(self, path: str):
        self.reader = pa.ipc.open_file(pa.memory_map(path))
        self.next = 0
        self.rows: pa.RecordBatch | None = None

    def fill(self) -> bool:
        """Hold at least one row (up to about MERGE_ROWS); False once the file is read."""
        if self.rows is not None and self.rows.num_rows:
            return True
        held, count = [], 0
        while self.next < self.reader.num_record_batches and count < MERGE_ROWS:
            batch = self.reader.get_batch(self.next)
            self.next += 1
            held.append(batch)
            count += batch.num_rows
        held = [b for b in held if b.num_rows]
        if not held:
            return False
        self.rows = held[0] if len(held) == 1 else pa.Table.from_batches(held).combine_chunks().to_batches()[0]
        return True

    def last(self) -> tuple[int, int, int]:
        assert self.rows is not None
        return tuple(int(self.rows[c][-1].as_py()) for c in ("order", "source", "sourceOffset"))  # type: ignore

    def take_through(self, bound: tuple[int, int, int]) -> pa.RecordBatch:
        """Its held rows at or before `bound` in the merge order (a prefix)."""
        assert self.rows is not None
        order, offset = self.rows["order"].to_numpy(), self.rows["sourceOffset"].to_numpy()
        source = int(self.rows["source"][0].as_py())
        tie = source < bound[1] or (source == bound[1] and bool(offset[-1] <= bound[2]))
        if source == bound[1] and not tie:
            count = int(np.count_nonzero((order < bound[0]) | ((order == bound[0]) & (offset <= bound[2]))))
        else:
            count = int(np.searchsorted(order, bound[0], side="right" if tie else "left"))
        taken, self.rows = self.rows.slice(0, count), self.rows.slice(count)
        return taken


def merged(paths: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The rows of the staged files, merged by (merge key, source, source offset): the held rows of
    every file up to the smallest last held row of any (no row still unread can come before it)."""
    runs = [run for run in map(_Run, paths) if run.fill()]
    while runs:
        bound = min(run.last() for run in runs)
        parts = [part for part in (run.take_through(bound) for run in runs) if part.num_rows]
        rows = parts[0] if len(parts) == 1 else pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
        if len(parts) > 1:
            columns = (rows[c].to_numpy() for c in ("sourceOffset", "source", "order"))
            rows = rows.take(pa.array(np.lexsort(tuple(columns))))
        yield rows
        runs = [run for run in runs if run.fill()]


def write_partitions(spark, spec: WriteSpec) -> list[dict]:
    """Write each new partition from its staged files (the module's step 2); the summary rows."""
    return run_tasks(spark, [[q] for q in range(spec.partitions)], lambda q: write_partition(q, spec))


class _Batcher:
    """Rows (PLACED_SCHEMA, in their new order) gathered into batches of one codec and timestamp type
    (and, for LogAppendTime, one append time), cut at `limit` bytes of records, and appended to
    `writer`. A batch may span the Arrow batches the merge hands over: the rows of the last, unfinished
    one wait for the next (so the batches do not depend on the merge's chunks)."""

    def __init__(self, writer: PartitionWriter, codec: int | None, limit: int, horizon: int | None = None):
        self.writer, self.codec, self.limit = writer, codec, limit
        self.horizon = horizon  # --compact: the delete horizon a batch holding a tombstone gets
        self.pending: pa.RecordBatch | None = None

    def add(self, rows: pa.RecordBatch) -> None:
        if self.pending is not None:
            rows = pa.Table.from_batches([self.pending, rows]).combine_chunks().to_batches()[0]
        cuts = self._cuts(rows)
        if len(cuts) > 2:  # every batch but the last is whole
            self._append(rows.slice(0, cuts[-2]), cuts[:-1])
        self.pending = rows.slice(cuts[-2]) if len(cuts) > 1 else None

    def flush(self) -> None:
        if self.pending is not None and self.pending.num_rows:
            self._append(self.pending, [0, self.pending.num_rows])
        self.pending = None

    def _cuts(self, rows: pa.RecordBatch) -> list[int]:
        """Where batches start: at each change of kind, and where the bytes would pass the limit."""
        n = rows.num_rows
        codec = rows["codec"].to_numpy() if self.codec is None else np.full(n, self.codec)
        ts_type = rows["timestampType"].to_numpy() == TimestampType.LOG_APPEND_TIME
        stamp = np.where(ts_type, rows["timestamp"].to_numpy(), np.iinfo(np.int64).min)
        changed = (codec[1:] != codec[:-1]) | (ts_type[1:] != ts_type[:-1]) | (stamp[1:] != stamp[:-1])
        kinds = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
        size = _RECORD_OVERHEAD + pc.binary_length(rows["body"]).to_numpy().astype(np.int64)
        total = np.concatenate(([0], np.cumsum(size)))
        cuts = [0]
        for start, end in zip(kinds, kinds[1:]):
            at = start
            while at < end:
                # the first row past the limit ends the batch; a row larger than the limit goes alone
                stop = int(np.searchsorted(total, total[at] + self.limit, side="right")) - 1
                at = min(max(stop, at + 1), end)
                cuts.append(at)
        return cuts

    def _append(self, rows: pa.RecordBatch, cuts: Sequence[int]) -> None:
        """Append the batches of `rows` that start at `cuts` (the last cut: the rows' end). Their
        records are joined in one pass (`splice.joined_records`: numpy's and Arrow's cost per call paid
        once for all of them) and each batch's section is a slice of the join."""
        n, base = rows.num_rows, self.writer.log_end_offset
        starts = np.asarray(cuts[:-1], np.int64)
        batch = np.repeat(np.arange(len(starts)), np.diff(cuts))  # each row's batch
        timestamps = rows["timestamp"].to_numpy()
        base_timestamps = timestamps[starts]
        max_timestamps = np.maximum.reduceat(timestamps, starts)
        horizon = np.zeros(len(starts), bool)
        if self.horizon is not None:
            # as the cleaner writes a batch holding a tombstone it keeps: its base timestamp the delete
            # horizon (never before a source batch's own horizon: a tombstone is kept no shorter than there)
            horizon = np.logical_or.reduceat(rows["valueIsNull"].to_numpy(zero_copy_only=False), starts)
            source = pc.fill_null(rows["deleteHorizonMs"], np.iinfo(np.int64).min).to_numpy()
            horizons = np.maximum(self.horizon, np.maximum.reduceat(source, starts))
            base_timestamps = np.where(horizon, horizons, base_timestamps)
        deltas = np.arange(n) - starts[batch]
        data, bounds = joined_records(deltas, timestamps - base_timestamps[batch], rows["body"])
        codecs = rows["codec"].to_numpy()[starts] if self.codec is None else np.full(len(starts), self.codec)
        log_append = rows["timestampType"].to_numpy()[starts] == TimestampType.LOG_APPEND_TIME
        for i, (start, end) in enumerate(zip(cuts, cuts[1:])):
            self.writer.append(
                build_batch_of_section(
                    data[bounds[start] : bounds[end]],
                    end - start,
                    base_offset=base + start,
                    codec=int(codecs[i]),
                    last_offset_delta=end - start - 1,
                    timestamp_type=TimestampType.LOG_APPEND_TIME if log_append[i] else TimestampType.CREATE_TIME,
                    base_timestamp=int(base_timestamps[i]),
                    max_timestamp=int(max_timestamps[i]),
                    partition_leader_epoch=self.writer.partition_leader_epoch,
                    producer_id=NO_PRODUCER_ID,
                    producer_epoch=NO_PRODUCER_EPOCH,
                    base_sequence=NO_SEQUENCE,
                    is_transactional=False,
                    is_control=False,
                    has_delete_horizon=bool(horizon[i]),
                )
            )


def write_partition(q: int, spec: WriteSpec) -> dict:
    """The writing task of new partition `q`: its staged files merged, written, summarised."""
    import pyarrow.parquet as pq

    fs, staging = LogFileSystem.for_path(spec.staging)
    own = fs.join(staging, f"{spec.topic}-{q}")
    if fs.exists(own):  # an earlier attempt of this task: only it writes there
        fs.delete_dir(own)
    paths = sorted(glob.glob(os.path.join(spec.placed, str(q), "*.arrow")))
    survivors = removed = None
    if spec.compaction is not None:
        compaction = Compaction(spec.compaction, spec.now)
        for rows in merged(paths):
            compaction.feed(with_headers(rows) if spec.compaction.name == "header" else rows)
        survivors = compaction.survivors()
        removed = {"records": int(len(survivors) - np.count_nonzero(survivors)), "unkeyed": compaction.unkeyed}
    writer = PartitionWriter(
        fs,
        staging,
        spec.topic,
        q,
        segment_bytes=spec.segment_bytes,
        segment_ms=spec.segment_ms,
        index_interval_bytes=spec.index_interval_bytes,
        segment_index_bytes=spec.segment_index_bytes,
        leader_epoch=spec.leader_epochs.get(q, 0),
        topic_id=spec.topic_id,
    )
    horizon = spec.now + spec.delete_retention_ms if spec.compaction is not None else None
    batcher = _Batcher(writer, spec.codec, min(BATCH_BYTES, spec.max_message_bytes), horizon)
    resumes = {group: GroupResume(c) for group, c in spec.committed.items()}
    parts = None
    if spec.offset_map is not None:
        # no dictionaries: offsets rarely repeat (measured: a part of 565,000 rows 0.025 CPU s and 5.5 MB
        # without, 0.063 s and 6.4 MB with)
        parts = pq.ParquetWriter(f"{spec.offset_map}/part-{q:05d}.parquet", OFFSET_MAP_SCHEMA, use_dictionary=False)
    last_source: dict[int, int] = {}
    records = read = 0
    try:
        for batch in merged(paths):
            if survivors is not None:
                batch, read = batch.filter(pa.array(survivors[read : read + batch.num_rows])), read + batch.num_rows
                if not batch.num_rows:
                    continue
            sources, source_offsets = batch["source"].to_numpy(), batch["sourceOffset"].to_numpy()
            _check_order(sources, source_offsets, last_source, spec.topic, q)
            new_offsets = np.arange(records, records + batch.num_rows, dtype=np.int64)  # dense from 0
            batcher.add(batch)
            records += batch.num_rows
            for resume in resumes.values():
                resume.feed(sources, source_offsets, new_offsets)
            if parts is not None:
                columns = [batch["source"], batch["sourceOffset"], pa.array(np.full(batch.num_rows, q, np.int32))]
                parts.write_batch(
                    pa.RecordBatch.from_arrays([*columns, pa.array(new_offsets)], schema=OFFSET_MAP_SCHEMA)
                )
        batcher.flush()
        written = writer.close()
    finally:
        if parts is not None:
            parts.close()
    if written.log_end_offset != records:
        raise KafkaLogError(f"partition {q} of {spec.topic} ends at offset {written.log_end_offset}, not {records}")
    summary = {
        "partition": q,
        "records": records,
        "logEndOffset": written.log_end_offset,
        "segments": len(written.segments),
        "bytes": sum(s.size for s in written.segments),
        "groups": {group: resume.result(written.log_end_offset) for group, resume in resumes.items()},
    }
    if removed is not None:
        summary["removed"] = removed
    summary["peakRssMiB"] = peak_rss_mib()
    return summary


def with_headers(rows: pa.RecordBatch) -> pa.RecordBatch:
    """Staged rows with each record's headers decoded from its body (`--compact` by a header's version:
    the only use of a record's headers, so decoded only then)."""
    n = rows.num_rows
    section, pos, headers = join_records(np.zeros(n), np.zeros(n), rows["body"]), 0, []
    for _ in range(n):
        record, pos = decode_record(section, pos, 0, 0, None)
        headers.append(list(record.headers) or None)
    return rows.append_column("headers", pa.array(headers, HEADERS_TYPE))


OFFSET_MAP_SCHEMA = pa.schema(
    [("sourcePartition", pa.int32()), ("sourceOffset", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64())]
)


def _check_order(sources: np.ndarray, offsets: np.ndarray, last: dict[int, int], topic: str, q: int) -> None:
    """Refuse to write a source partition's records out of their order: the merge keys rely on the
    segments' time indexes bounding their timestamps, which a segment a broker never closed may not."""
    for source in np.unique(sources).tolist():
        mine = offsets[sources == source]
        previous = last.get(source, -1)
        if mine[0] <= previous or (len(mine) > 1 and np.any(np.diff(mine) <= 0)):
            raise KafkaLogError(
                f"records of source partition {source} would reach partition {q} of {topic} out of their order "
                "(a segment's time index understates its timestamps); run kafkalog validate on the log dir"
            )
        last[source] = int(mine[-1])
