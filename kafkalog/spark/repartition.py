"""A topic repartitioned on Spark in two stages of Python tasks; no record goes through the JVM.

1. **Place** (`stage_records`): each source partition is cut into blocks of offsets
   (`rules.partitioner.blocks`), and tasks share the blocks out (`plan_blocks`). A task reads a block's
   committed data records (`topic_table.committed_rows`: aborted records and control batches dropped,
   each partition's range [log start, last stable offset)) as the bodies view (`scan.bodies`: each
   record's timestamp, key, and its bytes after its offset delta, copied verbatim where the record is
   written as Kafka writes one, else decoded and encoded again), gives each its new partition
   (`rules.partitioner.new_partitions`, murmur2 in numpy), and writes the block's records of each new
   partition as the new partition's batches (`_Batcher`: at most `BATCH_BYTES` of records, one codec
   and timestamp type, compressed with the target's codec): a record set in
   `<staging>/.placed/<new partition>/<source>-<first block>.log`, and beside it (`.arrow`) each record's
   source offset and its block's running maximum timestamp. A batch holds one block's records only,
   so the batches depend on the records alone, not on the tasks (nor the segments).
2. **Write** (`write_partitions`): one task per new partition merges its staged batches (`merged`: a
   k-way merge by (the source's running maximum timestamp at the batch's first record, source
   partition, source offset), `block_carries` joining each block's own running maximum to those of the
   blocks before it) and appends them as they are, each given its new base offset (the CRC does not
   cover it), with `PartitionWriter` (the broker's append path: segments rolled at segment.bytes,
   indexes, leader-epoch checkpoint, partition.metadata); it writes its part of the offset map as
   Parquet, and where each consumer group resumes (`GroupResume`). With `--compact` the batches are
   read twice: the first merge decides each key's survivor (`rules.partitioner.Compaction`), the
   second takes the survivors out of their batches and batches them again.

Spark only schedules the tasks (`tasks.run_tasks`): what reaches the JVM and the driver is each
task's summary. While a session the command line started is starting, the driver places blocks
itself (`tasks.DriverShare`), and Spark's tasks get the rest. The staged files are removed with the
staging directory.
"""

from __future__ import annotations

import glob
import heapq
import mmap
import os
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tuning
from ..codec.batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RecordBatch,
    TimestampType,
    build_batch_of_section,
)
from ..codec.reader import BatchReader
from ..codec.records import decode_record
from ..codec.splice import join_records, joined_records, read_batch_spans, record_bodies
from ..errors import KafkaLogError
from ..rules.cleaner import CleanedTransactionMetadata
from ..rules.compaction_strategy import CompactionStrategy
from ..rules.partitioner import (
    BLOCK_OFFSETS,
    NO_CARRY,
    Compaction,
    GroupResume,
    blocks,
    new_partitions,
    running_max,
)
from ..scan.bodies import BodiesBuilder
from ..scan.inventory import log_dir_uri
from ..scan.reader import read_unit
from ..scan.scan_plan import ScanFilter, WorkUnit, pack, prune_segments, task_bytes, unit_of_offsets
from ..scan.views import HEADERS_TYPE, filesystem
from ..storage.fs import LogFileSystem
from ..storage.log_writer import PartitionWriter
from .scan import default_min_tasks
from .tasks import DriverShare, run_tasks
from .topic_table import PartitionRange, committed_rows

# Uncompressed bytes of records gathered into one batch: a producer's batches are 16 KiB by default;
# larger batches compress better and cost a consumer nothing (a fetch returns whole batches).
BATCH_BYTES = 256 * 1024
_RECORD_OVERHEAD = 8  # a record's length, attributes and deltas, roughly: enough to cut batches by size
# Records of staged batches a compacting write gathers before it hands them on (its memory: this
# times a record, plus one staged batch of each file it merges)
MERGE_ROWS = 16_384
PLACED = ".placed"  # the staged batches' directory in the staging directory

# A record in placing (and in a compacting write): what batching it needs
PLACED_SCHEMA = pa.schema(
    [
        ("order", pa.int64()),  # the running maximum timestamp of its block, up to it
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
# What is staged of each record beside its batch (deleteHorizonMs with --compact only)
STAGED_FIELDS = ("order", "sourceOffset")


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
    carries: Mapping[tuple[int, int], int] | None = None  # (source, block) -> running maximum before it

    @property
    def placed(self) -> str:
        return os.path.join(self.staging, PLACED)

    @property
    def staged_fields(self) -> tuple[str, ...]:
        return STAGED_FIELDS + (("deleteHorizonMs",) if self.compaction is not None else ())

    @property
    def batch_limit(self) -> int:
        return min(BATCH_BYTES, self.max_message_bytes)


@dataclass(frozen=True)
class Block:
    """The records of one source partition with offsets in one block (`range`: the block's offsets
    and the partition's aborted transactions), and the bytes of its segments that hold them."""

    range: PartitionRange
    units: tuple[WorkUnit, ...]

    @property
    def nbytes(self) -> int:
        return sum(u.nbytes for u in self.units)


def plan_blocks(partitions: Sequence, topic: str, ranges: Sequence[PartitionRange]) -> list[Block]:
    """The blocks of each partition's range, in partition and offset order, from the source's
    partitions as the plan opened them (on the driver: the offset indexes of the segments cut inside
    are read)."""
    ranges = [r for r in ranges if r.end > r.start]
    segments = []
    for part in partitions:
        part.ensure_regular_files()
        segments.extend(part.segments)
    out = []
    for r in ranges:
        for low, high in blocks(r.start, r.end, BLOCK_OFFSETS):
            held = prune_segments(segments, ScanFilter.of(topic, r.partition, low, high))
            units = tuple(unit_of_offsets(seg, low, high) for seg in held)
            out.append(Block(PartitionRange(r.partition, low, high, r.aborted), units))
    return out


# -- stage 1: place ---------------------------------------------------------------------------------------


def stage_records(spark, log_dir, topic: str, planned: Sequence[Block], spec: WriteSpec) -> dict:
    """Stage the committed records of `planned` blocks of `topic` as batches of each new partition (the
    module's step 1): the records staged, each block's greatest timestamp ((source, block) -> it, for
    `block_carries`), the largest peak resident memory of the tasks' processes (MiB), the blocks the
    driver placed and the seconds it waited for the session. `spark`: a session, or a Future of one:
    while it starts, the driver places blocks itself (`tasks.DriverShare`)."""
    for q in range(spec.partitions):
        os.makedirs(os.path.join(spec.placed, str(q)), exist_ok=True)
    root = log_dir_uri(log_dir)

    def place_blocks(blocks: Sequence[Block]) -> tuple[int, dict, float]:
        staged, maxima = _stage_task(blocks, filesystem(root), topic, spec)
        return staged, maxima, peak_rss_mib()

    clock = time.perf_counter()
    with DriverShare(spark, [[b] for b in planned], place_blocks) as share:
        spark, rest = share.session()
        waited = time.perf_counter() - clock
        done = run_tasks(spark, [[t] for t in _placing_tasks(spark, [planned[i] for i in rest])], place_blocks)
    done += share.done.values()
    return {
        "records": sum(n for n, _, _ in done),
        "maxima": {k: v for _, m, _ in done for k, v in m.items()},
        "peakRssMiB": max((rss for _, _, rss in done), default=0),
        "blocksPlacedByDriver": len(share.done),
        "sessionSeconds": waited,
    }


def _placing_tasks(spark, blocks: Sequence[Block]) -> list[tuple[Block, ...]]:
    """`blocks` packed into tasks by bytes, the largest first: Spark starts tasks in their order, so the
    small ones (a partition's last block) fill the cores' last gaps instead of leaving one core to
    finish a large one alone."""
    if not blocks:
        return []
    total = sum(b.nbytes for b in blocks)
    tasks = pack(blocks, lambda b: b.nbytes, task_bytes(total, tuning.MAX_BYTES_PER_TASK, default_min_tasks(spark)), 0)
    return sorted(tasks, key=lambda task: sum(b.nbytes for b in task), reverse=True)


def peak_rss_mib() -> float:
    """The peak resident memory of this process so far (a Python worker runs many tasks in turn: an
    upper bound of each task's)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stage_task(task: Sequence[Block], fs, topic: str, spec: WriteSpec) -> tuple[int, dict]:
    """Stage the blocks of one task: the records staged, and each block's greatest timestamp."""
    files = _StagedFiles(spec)
    staged, maxima = 0, {}
    try:
        for block in task:
            source, number = block.range.partition, block.range.start // BLOCK_OFFSETS
            files.start_block(source, number)
            trackers: dict[int, CleanedTransactionMetadata] = {}
            flt = ScanFilter.of(topic, source, block.range.start, block.range.end)
            order = None
            for unit in block.units:
                horizons = _delete_horizons(unit, fs, flt) if spec.compaction is not None else None
                for batch in read_unit(unit, fs, "records", flt, builder=BodiesBuilder(unit)):
                    kept = committed_rows(batch, block.range, trackers)
                    if not kept.num_rows:
                        continue
                    q, placed = place(kept, spec.partitions, NO_CARRY if order is None else order, horizons)
                    order = int(placed["order"][-1].as_py())
                    by_q = np.argsort(q, kind="stable")  # each new partition's rows, in their order
                    placed, q = placed.take(pa.array(by_q)), q[by_q]
                    cuts = [0, *(np.flatnonzero(q[1:] != q[:-1]) + 1).tolist(), len(q)]
                    for start, end in zip(cuts, cuts[1:]):
                        files.batcher(int(q[start])).add(placed.slice(start, end - start))
                    staged += kept.num_rows
            files.end_block()
            if order is not None:
                maxima[source, number] = order
        files.close()
    except BaseException:
        files.abort()
        raise
    return staged, maxima


class _StagedRun:
    """The staged batches of one new partition from a task's consecutive blocks of one source (named
    by source and first block: one task's alone): a record set (`.log`, base offsets
    counted from 0 in the file) and each record's `staged_fields` (`.arrow`), both written under a
    temporary name and renamed when whole, so a retried task's files replace a failed attempt's and a
    merge never reads half a file. It is the `_Batcher`'s writer in placing."""

    def __init__(self, spec: WriteSpec, q: int, source: int, block: int):
        self.path = os.path.join(spec.placed, str(q), f"{source:05d}-{block:09d}")
        self.fields = spec.staged_fields
        self.log = open(self.path + ".log.tmp", "wb")
        self.sink = pa.OSFile(self.path + ".arrow.tmp", "wb")
        self.schema = pa.schema([PLACED_SCHEMA.field(f) for f in self.fields])
        self.side = pa.ipc.new_file(self.sink, self.schema)
        self.log_end_offset = 0
        self.partition_leader_epoch = spec.leader_epochs.get(q, 0)

    def append(self, data: bytes) -> None:
        self.log.write(data)

    def appended(self, rows: pa.RecordBatch) -> None:
        """The rows of the batches just appended, in their order."""
        self.side.write_batch(pa.RecordBatch.from_arrays([rows[f] for f in self.fields], schema=self.schema))
        self.log_end_offset += rows.num_rows

    def close(self) -> None:
        self.side.close()
        self.sink.close()
        self.log.close()
        for ext in (".log", ".arrow"):
            os.replace(self.path + ext + ".tmp", self.path + ext)

    def abort(self) -> None:
        self.sink.close()
        self.log.close()
        for ext in (".log", ".arrow"):
            os.remove(self.path + ext + ".tmp")


class _StagedFiles:
    """The staged batches of one placing task: a `_Batcher` into a `_StagedRun` per new partition of
    the source being read, every batch flushed at the end of each block (a block's batches are its
    own). The runs stay open while the task reads the source's next block."""

    def __init__(self, spec: WriteSpec):
        self.spec = spec
        self.source: int | None = None
        self.block = -1
        self.runs: dict[int, _StagedRun] = {}
        self.batchers: dict[int, _Batcher] = {}

    def start_block(self, source: int, block: int) -> None:
        if source != self.source or block != self.block + 1:
            self.close()
            self.source = source
        self.block = block

    def batcher(self, q: int) -> _Batcher:
        if q not in self.batchers:
            assert self.source is not None
            self.runs[q] = _StagedRun(self.spec, q, self.source, self.block)
            self.batchers[q] = _Batcher(self.runs[q], self.spec.codec, self.spec.batch_limit)
        return self.batchers[q]

    def end_block(self) -> None:
        for batcher in self.batchers.values():
            batcher.flush()

    def close(self) -> None:
        for run in self.runs.values():
            run.close()
        self.runs, self.batchers = {}, {}

    def abort(self) -> None:
        for run in self.runs.values():
            run.abort()
        self.runs, self.batchers = {}, {}


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
    the rows as PLACED_SCHEMA rows (`carry`: the running maximum before them; `horizons`: the delete
    horizon of each batch that has one)."""
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


class _Staged:
    """One staged run read back: its batches in order, each with its records' staged fields."""

    def __init__(self, path: str):
        self.source = int(os.path.basename(path).split("-")[0])
        with open(path + ".log", "rb") as f:
            self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
        self.side = pa.ipc.open_file(pa.memory_map(path + ".arrow"))

    def batches(
        self, carries: Mapping[tuple[int, int], int]
    ) -> Iterator[tuple[tuple[int, int, int], memoryview, pa.RecordBatch]]:
        """(merge key, batch bytes, its records' staged fields) of each batch, in order."""
        batches = iter(BatchReader(self.data))
        for i in range(self.side.num_record_batches):
            rows, at = self.side.get_batch(i), 0
            orders, offsets = rows["order"].to_numpy(), rows["sourceOffset"].to_numpy()
            while at < rows.num_rows:
                batch = next(batches)
                count = batch.records_count
                first = int(offsets[at])
                key = (max(carries[self.source, first // BLOCK_OFFSETS], int(orders[at])), self.source, first)
                yield key, memoryview(self.data)[batch.position : batch.position + batch.size], rows.slice(at, count)
                at += count


def merged(
    paths: Sequence[str], carries: Mapping[tuple[int, int], int]
) -> Iterator[tuple[int, memoryview, pa.RecordBatch]]:
    """The staged batches of one new partition in merge order: (source, batch bytes, staged fields);
    each run's batches are in merge-key order already, so a heap of one batch per run merges them."""
    runs = [_Staged(path) for path in paths]
    for key, data, rows in heapq.merge(*(run.batches(carries) for run in runs), key=lambda item: item[0]):
        yield key[1], data, rows


def write_partitions(spark, spec: WriteSpec) -> list[dict]:
    """Write each new partition from its staged batches (the module's step 2); the summary rows."""
    return run_tasks(spark, [[q] for q in range(spec.partitions)], lambda q: write_partition(q, spec))


class _Batcher:
    """Rows (PLACED_SCHEMA, in their new order) gathered into batches of one codec and timestamp type
    (and, for LogAppendTime, one append time), cut at `limit` bytes of records, and appended to
    `writer` (a `PartitionWriter`, or a `_StagedRun` in placing, which is also told the rows). A batch
    may span the Arrow batches handed over: the rows of the last, unfinished one wait for the next
    (so the batches do not depend on how the rows come)."""

    def __init__(self, writer, codec: int | None, limit: int, horizon: int | None = None):
        self.writer, self.codec, self.limit = writer, codec, limit
        self.horizon = horizon  # --compact: the delete horizon a batch holding a tombstone gets
        self.pending: pa.RecordBatch | None = None

    def add(self, rows: pa.RecordBatch) -> None:
        held = self.pending
        p = 0 if held is None else held.num_rows
        cuts = self._cuts([b for b in (held, rows) if b is not None])
        whole = cuts[:-1]  # the whole batches' starts, and the end of the last of them
        if p and len(whole) > 1:  # the held rows start the first batch: only its rows are joined to them
            assert whole[1] >= p
            self._append(_joined_rows([held, rows.slice(0, whole[1] - p)]), [0, whole[1]])
            whole = [c - p for c in whole[1:]]
        if len(whole) > 1:
            self._append(rows.slice(whole[0], whole[-1] - whole[0]), [c - whole[0] for c in whole])
        if len(cuts) < 2:
            self.pending = None
        elif cuts[-2] >= p:
            self.pending = rows.slice(cuts[-2] - p)
        else:  # no batch was finished: the held rows wait with these
            self.pending = rows if held is None else _joined_rows([held, rows])

    def flush(self) -> None:
        if self.pending is not None and self.pending.num_rows:
            self._append(self.pending, [0, self.pending.num_rows])
        self.pending = None

    def _cuts(self, parts: Sequence[pa.RecordBatch]) -> list[int]:
        """Where the batches of `parts` (rows end to end) start: at each change of kind, and where the
        bytes would pass the limit."""

        def column(name: str) -> np.ndarray:
            return np.concatenate([b[name].to_numpy() for b in parts]) if parts else np.zeros(0, np.int64)

        n = sum(b.num_rows for b in parts)
        codec = column("codec") if self.codec is None else np.full(n, self.codec)
        ts_type = column("timestampType") == TimestampType.LOG_APPEND_TIME
        stamp = np.where(ts_type, column("timestamp"), np.iinfo(np.int64).min)
        changed = (codec[1:] != codec[:-1]) | (ts_type[1:] != ts_type[:-1]) | (stamp[1:] != stamp[:-1])
        kinds = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
        lengths = [pc.binary_length(b["body"]).to_numpy().astype(np.int64) for b in parts]
        size = _RECORD_OVERHEAD + (np.concatenate(lengths) if lengths else np.zeros(0, np.int64))
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
        if isinstance(self.writer, _StagedRun):
            self.writer.appended(rows)


def _joined_rows(parts: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    """Arrow batches of one schema as one (copied)."""
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def write_partition(q: int, spec: WriteSpec) -> dict:
    """The writing task of new partition `q`: its staged batches merged, written, summarised."""
    import pyarrow.parquet as pq

    fs, staging = LogFileSystem.for_path(spec.staging)
    own = fs.join(staging, f"{spec.topic}-{q}")
    if fs.exists(own):  # an earlier attempt of this task: only it writes there
        fs.delete_dir(own)
    paths = sorted(p[: -len(".log")] for p in glob.glob(os.path.join(spec.placed, str(q), "*.log")))
    carries = spec.carries or {}
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
    resumes = {group: GroupResume(c) for group, c in spec.committed.items()}
    parts = None
    if spec.offset_map is not None:
        # no dictionaries: offsets rarely repeat (measured: a part of 565,000 rows 0.025 CPU s and 5.5 MB
        # without, 0.063 s and 6.4 MB with)
        parts = pq.ParquetWriter(f"{spec.offset_map}/part-{q:05d}.parquet", OFFSET_MAP_SCHEMA, use_dictionary=False)
    records = 0

    def written(sources: np.ndarray, source_offsets: np.ndarray) -> None:
        """Bookkeeping of records just written (new offsets from `records` on)."""
        nonlocal records
        new_offsets = np.arange(records, records + len(sources), dtype=np.int64)  # dense from 0
        records += len(sources)
        for resume in resumes.values():
            resume.feed(sources, source_offsets, new_offsets)
        if parts is not None:
            columns = [
                pa.array(sources, pa.int32()),
                pa.array(source_offsets),
                pa.array(np.full(len(sources), q, np.int32)),
            ]
            parts.write_batch(pa.RecordBatch.from_arrays([*columns, pa.array(new_offsets)], schema=OFFSET_MAP_SCHEMA))

    removed = None
    try:
        if spec.compaction is None:
            _copy_batches(writer, merged(paths, carries), written)
        else:
            removed = _compact_batches(writer, paths, carries, spec, written)
        written_partition = writer.close()
    finally:
        if parts is not None:
            parts.close()
    if written_partition.log_end_offset != records:
        raise KafkaLogError(
            f"partition {q} of {spec.topic} ends at offset {written_partition.log_end_offset}, not {records}"
        )
    summary = {
        "partition": q,
        "records": records,
        "logEndOffset": written_partition.log_end_offset,
        "segments": len(written_partition.segments),
        "bytes": sum(s.size for s in written_partition.segments),
        "groups": {group: resume.result(written_partition.log_end_offset) for group, resume in resumes.items()},
    }
    if removed is not None:
        summary["removed"] = removed
    summary["peakRssMiB"] = peak_rss_mib()
    return summary


_BASE_OFFSET = struct.Struct(">q")


def _copy_batches(writer: PartitionWriter, batches, written) -> None:
    """Append each staged batch as it is but for its base offset (outside its CRC), the records'
    bookkeeping done a chunk of `MERGE_ROWS` records at a time."""
    sources: list[np.ndarray] = []
    offsets: list[np.ndarray] = []
    held = 0
    for source, data, rows in batches:
        batch = bytearray(data)
        _BASE_OFFSET.pack_into(batch, 0, writer.log_end_offset)
        writer.append(batch)
        sources.append(np.full(rows.num_rows, source, np.int32))
        offsets.append(rows["sourceOffset"].to_numpy())
        held += rows.num_rows
        if held >= MERGE_ROWS:
            written(np.concatenate(sources), np.concatenate(offsets))
            sources, offsets, held = [], [], 0
    if held:
        written(np.concatenate(sources), np.concatenate(offsets))


def _compact_batches(writer: PartitionWriter, paths, carries, spec: WriteSpec, written) -> dict:
    """--compact: the merged records read twice, the first time to decide the survivors, the second to
    batch the survivors again; what was removed."""
    assert spec.compaction is not None
    compaction = Compaction(spec.compaction, spec.now)
    for rows in _record_chunks(merged(paths, carries)):
        compaction.feed(with_headers(rows) if spec.compaction.name == "header" else rows)
    survivors = compaction.survivors()
    batcher = _Batcher(writer, spec.codec, spec.batch_limit, spec.now + spec.delete_retention_ms)
    read = 0
    for rows in _record_chunks(merged(paths, carries)):
        rows, read = rows.filter(pa.array(survivors[read : read + rows.num_rows])), read + rows.num_rows
        if rows.num_rows:
            batcher.add(rows)
            written(rows["source"].to_numpy(), rows["sourceOffset"].to_numpy())
    batcher.flush()
    return {"records": int(len(survivors) - np.count_nonzero(survivors)), "unkeyed": compaction.unkeyed}


def _record_chunks(batches) -> Iterator[pa.RecordBatch]:
    """The records of merged staged batches as PLACED_SCHEMA rows, about `MERGE_ROWS` at a time."""
    held: list[pa.RecordBatch] = []
    count = 0
    for source, data, rows in batches:
        held.append(_records(source, data, rows))
        count += held[-1].num_rows
        if count >= MERGE_ROWS:
            yield _joined_rows(held)
            held, count = [], 0
    if held:
        yield _joined_rows(held)


def _records(source: int, data: memoryview, rows: pa.RecordBatch) -> pa.RecordBatch:
    """The records of one staged batch (written by `_Batcher`, as Kafka writes records) as rows."""
    batch = RecordBatch(data)
    spans = read_batch_spans([batch], [batch.records_section()])
    if spans is None:
        raise KafkaLogError("a staged batch does not read back as written", offset=int(rows["sourceOffset"][0].as_py()))
    keys, bodies = record_bodies(spans)
    n = rows.num_rows
    columns = {
        "order": rows["order"],
        "source": pa.array(np.full(n, source, np.int32)),
        "sourceOffset": rows["sourceOffset"],
        "key": keys,
        "body": bodies,
        "valueIsNull": pa.array(spans.null_value),
        "timestamp": pa.array(spans.timestamp, pa.int64()),
        "timestampType": pa.array(np.full(n, batch.timestamp_type, np.int32)),
        "codec": pa.array(np.full(n, batch.codec, np.int8)),
        "deleteHorizonMs": rows["deleteHorizonMs"],
    }
    return pa.RecordBatch.from_arrays(list(columns.values()), schema=PLACED_SCHEMA)


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
