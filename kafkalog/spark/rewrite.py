"""Steps 5 and 6 of every rewrite (compaction, purge): output segments are written on executors,
then swapped in on the driver (docs/architecture.md).

A decide step hands over two things:

* its output segments (`OutputSegment`): small, built on the driver;
* a DataFrame of batch plans (`PLAN_COLUMNS`, one row per batch that changes), which can be
  large: it goes from the decide step's executors straight to the task that writes the batch's
  output segment, keyed by task, and never through the driver. The offsets whose records go
  (`removed`) are runs of 64 offsets (`removed_run`): a fixed-size value per run, where a
  compaction removes millions of records.

Each task writes its segment under `.cleaned` names; the driver then runs Kafka's swap protocol
per partition. A task that fails and is retried rewrites its `.cleaned` files from the start; a
crash before the swap leaves only `.cleaned` files, which recovery deletes. A rewrite that fails,
of any kind (damaged input, a full disk, a bug), fails the whole step: its task returns the error
as a row (so that no other task is cut off mid-file), and the driver deletes every staged file of
every output before it raises the error as a KafkaLogError (kafkalog/spark/errors.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields, replace

from ..codec.filter import BatchRetention, Outcome
from ..errors import KafkaLogError, LogDirError
from ..rules.aborted_txn import AbortedTxn
from ..storage.fs import HashingFileSystem, LogFileSystem, refused
from ..storage.naming import segment_file_name
from ..storage.outputs import OutputSegment, OutputStats, remove_outputs, roots_of
from ..storage.partition import Partition
from ..storage.rewrite import CLEANED, BatchPlan, rewrite_segments
from ..storage.segment import LogSegment
from ..storage.swap import FaultHook
from .errors import collected, worker_error

PLAN_COLUMNS = (
    "topic",
    "partition",
    "segmentBaseOffset",
    "position",
    "retention",
    "removed",
    "marker_for_empty_txn",
    "has_tombstone",
    "tombstoned",
    "redacted",
)
_RETENTION = {r.value: r for r in BatchRetention}


def removed_run(offset):
    """A plan's `removed` is a list of runs, struct<run: bigint, bits: bigint>: offset `run * 64 + i`
    goes for every bit i set in `bits` (a run may be named more than once). This is the run of one
    offset (a column)."""
    from pyspark.sql import functions as F

    bit = F.call_function("shiftleft", F.lit(1).cast("long"), offset.bitwiseAND(63).cast("int"))
    return F.struct(F.shiftright(offset, 6).alias("run"), bit.alias("bits"))


# OutputStats as the rows the rewrite tasks yield: Spark's DDL and pyarrow's types of its fields, and
# `error`, the `worker_error` text of a rewrite that failed (its other fields null)
_COUNTS = [f.name for f in fields(OutputStats)[2:-1]]
_STATS_DDL = (
    f"topic string, partition int, {', '.join(f'{n} long' for n in _COUNTS)}, source_sha256 string, error string"
)
_STATS = [
    ("topic", "string"),
    ("partition", "int32"),
    *[(n, "int64") for n in _COUNTS],
    ("source_sha256", "string"),
    ("error", "string"),
]
# The FaultHook step each rewrite calls, on its executor, with the path of its output's `.log.cleaned`
# before writing it (a test hook: it may raise, as a failing rewrite would).
REWRITE_STEP = "rewrite"
# the plans of one output segment as one Arrow IPC stream, and the task that writes the segment
_BLOBS = "task int, output int, plans binary"


def write_outputs(
    spark, log_dir: str | Sequence[str], outputs: Sequence[OutputSegment], plans, fault: FaultHook | None = None
) -> list[OutputStats]:
    """Step 5: Spark tasks write the output segments' `.cleaned` files, the segments packed into
    tasks by their bytes (many small ones share a task). `log_dir`: the log dir, or the log dirs
    that the outputs' `copy` numbers index, all written by the one job. `plans` is a DataFrame with
    `PLAN_COLUMNS` (a missing one is null) and, with several log dirs, `copy`. Its rows are cut,
    where they are, into one Arrow IPC blob per output segment (pickling the rows one by one,
    offsets and all, would cost more than the rewrite's codecs), and the blobs reach the task of
    their segment by `repartitionById` (the partition is the task number itself, not a hash of
    it), so every task gets its output segments and all of their plans. DataFrames only: the
    same plan runs on Spark Connect.

    Any failure leaves no staged file behind and raises a KafkaLogError naming a file (the module
    docstring). `fault`, a test hook, is called in the tasks at `REWRITE_STEP`."""
    if not outputs:
        return []
    from pyspark.sql import functions as F

    from .scan import pack_tasks

    outputs, roots = list(outputs), roots_of(log_dir)
    tasks = pack_tasks(spark, range(len(outputs)), lambda i: outputs[i].nbytes)
    task_of = {i: t for t, members in enumerate(tasks) for i in members}
    copy = F.col("copy") if "copy" in plans.columns else F.lit(0)
    plans = plans.select(copy.alias("copy"), *[c if c in plans.columns else F.lit(None).alias(c) for c in PLAN_COLUMNS])
    segments = spark.createDataFrame(
        [(o.copy, o.topic, o.partition, base, task_of[i], i) for i, o in enumerate(outputs) for base in o.bases],
        "copy int, topic string, partition int, segmentBaseOffset long, task int, output int",
    )
    keys = ["copy", "topic", "partition", "segmentBaseOffset"]
    blobs = plans.join(segments, keys).mapInArrow(_plan_blobs, _BLOBS)
    # a row without plans for every output segment: one whose batches all stay still gets written
    every_output = spark.createDataFrame([(task_of[i], i, None) for i in range(len(outputs))], _BLOBS)

    def run(batches: Iterable) -> Iterable:
        import pyarrow as pa

        blobs_of: dict = {}
        for batch in batches:
            for i, blob in zip(batch.column("output").to_pylist(), batch.column("plans").to_pylist()):
                blobs_of.setdefault(i, [])
                if blob is not None:
                    blobs_of[i].append(blob)
        stats = []
        for i in sorted(blobs_of):
            root = roots[outputs[i].copy]
            try:
                stats.append(asdict(rewrite_output(root, outputs[i], _read_plans(blobs_of[i]), fault)))
            except Exception as err:  # the rest of this task is not written: the step has failed
                stats.append({"error": worker_error(rewrite_error(err, root, outputs[i]))})
                break
        if stats:
            yield pa.RecordBatch.from_pylist(stats, pa.schema(_STATS))

    written = blobs.unionByName(every_output).repartitionById(len(tasks), "task").mapInArrow(run, _STATS_DDL)
    rows = collected(written.collect, "a rewrite task", lambda: remove_outputs(log_dir, outputs))
    return [OutputStats(**{k: v for k, v in row.asDict().items() if k != "error"}) for row in rows]


def rewrite_error(err: Exception, log_dir: str, output: OutputSegment) -> KafkaLogError:
    """What failed a rewrite task, as a KafkaLogError naming a file: its own, or the output's
    first source segment."""
    if isinstance(err, KafkaLogError):
        return err
    source = LogFileSystem.join(
        log_dir, f"{output.topic}-{output.partition}", segment_file_name(output.base_offset, ".log")
    )
    if isinstance(err, OSError):
        path = err.filename or source
        return refused(err, "write", path) or KafkaLogError(f"cannot write: {err.strerror or err}", file=path)
    text = " ".join(str(err).split())  # one line: worker_error's text is read back by its last line
    return KafkaLogError(f"rewriting the segment failed: {type(err).__name__}: {text}", file=source)


def _plan_blobs(batches: Iterable) -> Iterable:
    """The plan rows of this Spark partition as one Arrow IPC stream per output segment:
    (task, output, bytes)."""
    import numpy as np
    import pyarrow as pa

    batches = list(batches)
    if not sum(b.num_rows for b in batches):
        return
    table = pa.Table.from_batches(batches)
    table = table.sort_by("output")
    output = table.column("output").to_numpy()
    task = table.column("task").to_numpy()
    starts = np.flatnonzero(np.diff(output, prepend=-1))  # where each output segment's rows begin
    table = table.select(list(PLAN_COLUMNS))
    for begin, end in zip(starts.tolist(), [*starts[1:].tolist(), len(output)]):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(begin, end - begin))
        yield pa.record_batch(
            [
                pa.array([int(task[begin])], pa.int32()),
                pa.array([int(output[begin])], pa.int32()),
                pa.array([sink.getvalue().to_pybytes()]),
            ],
            names=["task", "output", "plans"],
        )


def _read_plans(blobs: Iterable[bytes]) -> dict:
    """{(segment base offset, batch position): BatchPlan} from `_plan_blobs` streams."""
    import pyarrow as pa

    out = {}
    for blob in blobs:
        out.update(plans_from_table(pa.ipc.open_stream(blob).read_all()))
    return out


def plans_from_table(table) -> dict:
    """{(segment base offset, batch position): BatchPlan} from an Arrow table of `PLAN_COLUMNS` rows."""
    out = {}
    for row, removed in zip(table.drop_columns(["removed"]).to_pylist(), removed_offsets(table["removed"])):
        plan = BatchPlan(
            _RETENTION[row["retention"]],
            removed,
            bool(row["marker_for_empty_txn"]),
            bool(row["has_tombstone"]),
            frozenset(row["tombstoned"] or ()),
            frozenset(row["redacted"] or ()),
        )
        out[row["segmentBaseOffset"], row["position"]] = plan
    return out


def removed_offsets(runs) -> list[frozenset]:
    """Each row's `removed` runs (`removed_run`) as its set of offsets, all rows in one numpy pass."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    runs = runs.combine_chunks() if isinstance(runs, pa.ChunkedArray) else runs
    flat = pc.list_flatten(runs)
    bit = np.arange(64, dtype=np.uint64)
    sets = (flat.field("bits").to_numpy().view(np.uint64)[:, None] >> bit) & np.uint64(1) == 1
    offsets = ((flat.field("run").to_numpy()[:, None] << 6) + bit.astype(np.int64))[sets]
    # where each row's offsets end: its runs' offsets counted, in order
    run_ends = np.cumsum(pc.list_value_length(runs).fill_null(0).to_numpy())
    ends = np.concatenate([[0], np.cumsum(sets.sum(axis=1))])[run_ends]
    return [frozenset(o.tolist()) for o in np.split(offsets, ends[:-1])] if len(runs) else []


def rewrite_output(log_dir: str, output: OutputSegment, plans: dict, fault: FaultHook | None = None) -> OutputStats:
    """Executor side: write one output segment as `.cleaned` files."""
    from ..scan.views import filesystem_and_path

    fs, root = filesystem_and_path(log_dir)
    part_dir = fs.join(root, f"{output.topic}-{output.partition}")
    if fault is not None:
        fault(REWRITE_STEP, fs.join(part_dir, segment_file_name(output.base_offset, ".log" + CLEANED)))
    if output.sources and output.hash_source:  # its one source read once: hashed as it is rewritten
        ((_, files, _),) = output.sources
        hashing = HashingFileSystem(fs, [files[".log"].path])
        stats = write_output(fs, part_dir, source_segments(hashing, part_dir, output), output, plans)
        return replace(stats, source_sha256=hashing.sha256(files[".log"].path))
    if output.sources:
        return write_output(fs, part_dir, source_segments(fs, part_dir, output), output, plans)
    part = Partition.open(fs, part_dir)
    wanted = set(output.bases)
    sources = [s for s in part.segments if s.base_offset in wanted]
    if len(sources) != len(wanted):  # the swap would replace a segment whose records were never written
        missing = sorted(wanted - {s.base_offset for s in sources})
        raise LogDirError(
            f"segments {missing} of {output.topic}-{output.partition} are gone since the plan was made", file=part.path
        )
    return write_output(fs, part_dir, sources, output, plans)


def source_segments(fs: LogFileSystem, part_dir: str, output: OutputSegment) -> list[LogSegment]:
    """The LogSegments of `output.sources` (in `fs`, the partition directory `part_dir`)."""
    return [
        LogSegment(fs, part_dir, base, dict(files), next_base, output.topic, output.partition)
        for base, files, next_base in output.sources
    ]


def write_output(fs: LogFileSystem, part_dir: str, sources, output: OutputSegment, plans: dict) -> OutputStats:
    """Write `output` from its source LogSegments (`sources`, in `fs`) as `.cleaned` files in
    `part_dir`; `plans` by (source base offset, batch position)."""
    _, stats = rewrite_segments(
        fs,
        part_dir,
        sources,
        plans,
        delete_horizon_ms=output.delete_horizon_ms,
        index_interval_bytes=output.index_interval_bytes,
        aborted_txns=[AbortedTxn(*t) for t in output.aborted_txns],
        legacy_as_v2=output.legacy_as_v2,
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
        output.copy,
    )
