"""Steps 5 and 6 of every rewrite (compaction, purge): output segments are written on executors,
then swapped in on the driver (docs/architecture.md).

A decide step hands over two things:

* its output segments (`OutputSegment`): small, built on the driver;
* a DataFrame of batch plans (`PLAN_COLUMNS`, one row per batch that changes), which can be
  large: it goes from the decide step's executors straight to the task that writes the batch's
  output segment, keyed by task, and never through the driver.

Each task writes its segment under `.cleaned` names; the driver then runs Kafka's swap protocol
per partition. A task that fails and is retried rewrites its `.cleaned` files from the start; a
crash before the swap leaves only `.cleaned` files, which recovery deletes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ..codec.filter import BatchRetention, Outcome
from ..errors import LogDirError
from ..storage.logdir import LogDir
from ..storage.partition import Partition
from ..storage.rewrite import BatchPlan, rewrite_segments
from ..storage.swap import FaultHook, replace_segments
from ..storage.txnindex import AbortedTxn

PLAN_COLUMNS = (
    "topic",
    "partition",
    "segment_base_offset",
    "batch_position",
    "retention",
    "removed",
    "marker_for_empty_txn",
    "has_tombstone",
    "tombstoned",
    "redacted",
)
_RETENTION = {r.value: r for r in BatchRetention}


@dataclass(frozen=True)
class OutputSegment:
    """One output segment: the source segments it replaces, and how its batches are rewritten."""

    topic: str
    partition: int
    bases: tuple  # source segment base offsets, ascending; the output keeps the first
    delete_horizon_ms: int  # the horizon given to batches that need one (now + delete.retention.ms)
    index_interval_bytes: int
    aborted_txns: tuple = ()  # AbortedTxn entries that stay in .txnindex
    nbytes: int = 0  # the sources' bytes: what packs output segments into tasks

    @property
    def base_offset(self) -> int:
        return self.bases[0]


@dataclass(frozen=True)
class OutputStats:
    """What one rewrite task wrote: a row of the per-segment report."""

    topic: str
    partition: int
    base_offset: int
    source_segments: int
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    batches_rewritten: int
    horizons_set: int

    def to_dict(self) -> dict:
        return asdict(self)


def write_outputs(spark, log_dir: str, outputs: Sequence[OutputSegment], plans) -> list[OutputStats]:
    """Step 5: Spark tasks write the output segments' `.cleaned` files, the segments packed into
    tasks by their bytes (many small ones share a task). `plans` is a DataFrame with
    `PLAN_COLUMNS` (a missing one is null). Its rows are cut, where they are, into one Arrow IPC
    blob per output segment (pickling the rows one by one, offsets and all, would cost more than
    the rewrite's codecs), and the blobs reach the task of their segment by an exact partitioner,
    so every task gets its output segments and all of their plans."""
    if not outputs:
        return []
    from pyspark.sql import functions as F

    from .scan import pack_tasks

    plans = plans.select(*[c if c in plans.columns else F.lit(None).alias(c) for c in PLAN_COLUMNS])
    segments = spark.createDataFrame(
        [(o.topic, o.partition, base, i) for i, o in enumerate(outputs) for base in o.bases],
        "topic string, partition int, segment_base_offset long, task int",
    )
    blobs = (
        plans.join(segments, ["topic", "partition", "segment_base_offset"])
        .mapInArrow(_plan_blobs, "task int, plans binary")
        .rdd.map(tuple)
    )
    outputs = list(outputs)
    tasks = pack_tasks(spark, range(len(outputs)), lambda i: outputs[i].nbytes)
    task_of = {i: t for t, members in enumerate(tasks) for i in members}
    every_output = spark.sparkContext.parallelize([(i, None) for i in range(len(outputs))], len(tasks))

    def run(rows: Iterable) -> Iterable[OutputStats]:
        blobs_of: dict = {}
        for i, blob in rows:
            blobs_of.setdefault(i, [])
            if blob is not None:
                blobs_of[i].append(blob)
        for i in sorted(blobs_of):
            yield rewrite_output(log_dir, outputs[i], _read_plans(blobs_of[i]))

    return blobs.union(every_output).partitionBy(len(tasks), task_of.__getitem__).mapPartitions(run).collect()


def _plan_blobs(batches: Iterable) -> Iterable:
    """The plan rows of this Spark partition as one Arrow IPC stream per task: (task, bytes)."""
    import numpy as np
    import pyarrow as pa

    batches = list(batches)
    if not sum(b.num_rows for b in batches):
        return
    table = pa.Table.from_batches(batches)
    table = table.sort_by("task")
    task = table.column("task").to_numpy()
    starts = np.flatnonzero(np.diff(task, prepend=-1))  # where each task's rows begin
    table = table.select(list(PLAN_COLUMNS))
    for begin, end in zip(starts.tolist(), [*starts[1:].tolist(), len(task)]):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(begin, end - begin))
        yield pa.record_batch(
            [pa.array([int(task[begin])], pa.int32()), pa.array([sink.getvalue().to_pybytes()])],
            names=["task", "plans"],
        )


def _read_plans(blobs: Iterable[bytes]) -> dict:
    """{(segment base offset, batch position): BatchPlan} from `_plan_blobs` streams."""
    import pyarrow as pa

    out = {}
    for blob in blobs:
        for row in pa.ipc.open_stream(blob).read_all().to_pylist():
            plan = BatchPlan(
                _RETENTION[row["retention"]],
                frozenset(row["removed"] or ()),
                bool(row["marker_for_empty_txn"]),
                bool(row["has_tombstone"]),
                frozenset(row["tombstoned"] or ()),
                frozenset(row["redacted"] or ()),
            )
            out[row["segment_base_offset"], row["batch_position"]] = plan
    return out


def rewrite_output(log_dir: str, output: OutputSegment, plans: dict) -> OutputStats:
    """Executor side: write one output segment as `.cleaned` files."""
    from .views import filesystem_and_path

    fs, root = filesystem_and_path(log_dir)
    part = Partition.open(fs, fs.join(root, f"{output.topic}-{output.partition}"))
    wanted = set(output.bases)
    sources = [s for s in part.segments if s.base_offset in wanted]
    if len(sources) != len(wanted):  # the swap would replace a segment whose records were never written
        missing = sorted(wanted - {s.base_offset for s in sources})
        raise LogDirError(
            f"segments {missing} of {output.topic}-{output.partition} are gone since the plan was made", file=part.path
        )
    _, stats = rewrite_segments(
        part.fs,
        part.path,
        sources,
        plans,
        delete_horizon_ms=output.delete_horizon_ms,
        index_interval_bytes=output.index_interval_bytes,
        aborted_txns=[AbortedTxn(*t) for t in output.aborted_txns],
    )
    rewritten = sum(n for outcome, n in stats.batches.items() if outcome != Outcome.VERBATIM.value)
    return OutputStats(
        output.topic,
        output.partition,
        output.base_offset,
        len(output.bases),
        stats.records_in,
        stats.records_out,
        stats.bytes_in,
        stats.bytes_out,
        rewritten,
        stats.horizons_set,
    )


def swap_in(opened: LogDir, outputs: Sequence[OutputSegment], fault: FaultHook | None = None) -> None:
    """Step 6, on the driver: per partition, Kafka's swap protocol replaces the source segments
    with the `.cleaned` outputs; producer snapshots of segments merged away are deleted."""
    by_partition: dict = {}
    for o in outputs:
        by_partition.setdefault((o.topic, o.partition), []).append(o)
    for tp in sorted(by_partition):
        part = opened.partition(*tp)
        written = [o.base_offset for o in by_partition[tp]]
        replaced = [b for o in by_partition[tp] for b in o.bases]
        extra = {} if fault is None else {"fault": fault}
        replace_segments(opened.fs, part.path, written, replaced, **extra)
