"""Scanning a log directory into Spark DataFrames: a scan planned on the driver (scan_plan.py) and
decoded on executors (views.py), one Spark task per planned task, with `mapInArrow`.

`narrow_scan`, `read_records` and `read_batches` are the three views; `scan_dataframe` runs a plan a
caller made (a compaction's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow as pa

from .. import tuning
from ..scan.inventory import IOStats, inventory_rows, list_segments
from ..scan.reader import read_task
from ..scan.scan_plan import ScanFilter, ScanPlan, pack, plan_scan, task_bytes
from ..scan.views import SCHEMAS, TIMESTAMP_TYPE
from .context import default_parallelism
from .tasks import task_frame


def spark_schema(schema: pa.Schema):
    """The Spark StructType of an Arrow schema of this module (every field nullable)."""
    from pyspark.sql import types as T

    simple = {
        pa.string(): T.StringType(),
        pa.binary(): T.BinaryType(),
        pa.bool_(): T.BooleanType(),
        pa.int8(): T.ByteType(),
        pa.int16(): T.ShortType(),
        pa.int32(): T.IntegerType(),
        pa.int64(): T.LongType(),
        TIMESTAMP_TYPE: T.TimestampType(),
    }

    def convert(t: pa.DataType):
        if t in simple:
            return simple[t]
        if pa.types.is_list(t):
            return T.ArrayType(convert(t.value_type), True)
        if pa.types.is_struct(t):
            return T.StructType([T.StructField(f.name, convert(f.type), True) for f in t])
        raise TypeError(f"no Spark type for {t}")

    return T.StructType([T.StructField(f.name, convert(f.type), True) for f in schema])


T = TypeVar("T")


def pack_tasks(spark, items: Sequence[T], nbytes: Callable[[T], int]) -> list[tuple[T, ...]]:
    """Items (partitions to decide, segments to write) packed into tasks by bytes, at least twice
    the default parallelism of them where the bytes allow. Their fixed cost is a small Python call,
    not a file open on a cluster store: a small open cost."""
    open_cost = tuning.SMALL_OPEN_COST
    total = sum(nbytes(i) + open_cost for i in items)
    return pack(items, nbytes, task_bytes(total, tuning.MAX_BYTES_PER_TASK, default_min_tasks(spark)), open_cost)


# -- Spark -----------------------------------------------------------------------------------------


class ScanMetrics:
    """What a scan's tasks read, plus what planning read on the driver: `executor` and `driver` are
    `IOStats` (opens and bytes per file). Each task ends its output with one row of what it read,
    which Spark's `DataFrame.observe` gathers and the scan then drops (an observation, not an
    accumulator, so that Spark Connect sessions have it too): `executor` holds what the first
    action on each scan's DataFrame read, and on a classic session waits for that action."""

    # the column of the tasks' rows of what they read, in the tasks' output only
    COLUMN = "_kafkalog_io"
    TYPE = pa.list_(pa.struct([("path", pa.string()), ("opens", pa.int64()), ("bytes", pa.int64())]))

    def __init__(self) -> None:
        self.driver = IOStats()
        self._observations: list = []

    def observe(self, df):
        """`df` (with `COLUMN`) observed, without the rows of what tasks read nor their column."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation()
        self._observations.append(observation)
        observed = df.observe(observation, F.flatten(F.collect_list(self.COLUMN)).alias("io"))
        return observed.where(F.col(self.COLUMN).isNull()).drop(self.COLUMN)

    @property
    def executor(self) -> IOStats:
        stats = IOStats()
        for observation in self._observations:
            for path, opens, nbytes in observation.get["io"]:
                stats.record(path, opens, nbytes)
        return stats


def default_min_tasks(spark) -> int:
    """Twice the default parallelism (so both halves of a skewed plan keep every core busy)."""
    return 2 * default_parallelism(spark)


# With `scan_dataframe(..., segment_ends=True)`: the column of the rows that tell, for each segment a
# task read to its end, its last offset (null: the segment holds no batch), every other column null.
SEGMENT_END = "_kafkalog_segment_end"
SEGMENT_END_TYPE = pa.struct(
    [("topic", pa.string()), ("partition", pa.int32()), ("base_offset", pa.int64()), ("last_offset", pa.int64())]
)


def scan_dataframe(
    spark,
    plan: ScanPlan,
    view: str,
    *,
    verify_crc: bool = True,
    batch_rows: int | None = None,
    metrics: ScanMetrics | None = None,
    columns: Sequence[str] | None = None,
    segment_ends: bool = False,
):
    """Run a plan with `mapInArrow`: one Spark partition (task) per planned task. `columns` projects
    the view on the executors, before Spark converts it: a column the caller does not read then
    costs the JVM nothing. `batch_rows` None: tuning.BATCH_ROWS, read here on the driver.
    `segment_ends`: each task's rows are followed by a `SEGMENT_END` row for each segment it read
    to its end (scan/reader `read_unit`'s `ends`), which the caller takes out: data, not an
    observation, so that no plan Spark optimises can lose it while the scan's rows are used."""
    batch_rows = tuning.BATCH_ROWS if batch_rows is None else batch_rows
    arrow_schema = SCHEMAS[view] if columns is None else pa.schema([SCHEMAS[view].field(c) for c in columns])
    extra = [pa.field(SEGMENT_END, SEGMENT_END_TYPE)] if segment_ends else []
    tasks = plan.tasks
    if not tasks:
        return spark.createDataFrame([], spark_schema(pa.schema([*arrow_schema, *extra])))
    root, flt = plan.root, plan.flt
    observed = metrics is not None
    extra += [pa.field(ScanMetrics.COLUMN, ScanMetrics.TYPE)] if observed else []  # each task's row of what it read
    arrow_schema = pa.schema([*arrow_schema, *extra])
    schema = spark_schema(arrow_schema)

    def task(task_id: int):
        stats = IOStats()
        ends: dict[tuple, int | None] | None = {} if segment_ends else None
        for batch in read_task(
            root, tasks[task_id], view, flt, verify_crc=verify_crc, batch_rows=batch_rows, stats=stats, ends=ends
        ):
            batch = batch if columns is None else batch.select(columns)
            for f in extra:
                batch = batch.append_column(f, pa.nulls(batch.num_rows, f.type))
            yield batch
        if observed and stats.by_path:
            read = [{"path": p, "opens": o, "bytes": n} for p, (o, n) in stats.as_dict().items()]
            yield _rows_of(arrow_schema, ScanMetrics.COLUMN, [read])
        if ends:
            told = [{"topic": t, "partition": p, "base_offset": b, "last_offset": o} for (t, p, b), o in ends.items()]
            yield _rows_of(arrow_schema, SEGMENT_END, told)

    df = task_frame(spark, len(tasks), task, schema)
    return metrics.observe(df) if metrics is not None else df


def _rows_of(schema: pa.Schema, column: str, values: list) -> pa.RecordBatch:
    """Rows with `values` in `column` and every other column null."""
    return pa.RecordBatch.from_arrays(
        [pa.array(values, f.type) if f.name == column else pa.nulls(len(values), f.type) for f in schema],
        schema=schema,
    )


def _scan(
    spark,
    view: str,
    log_dir,
    flt: ScanFilter,
    *,
    max_bytes_per_task: int | None,
    min_tasks: int | None,
    verify_crc: bool,
    metrics: ScanMetrics | None,
    remote_storage: str | None,
    columns: Sequence[str] | None = None,
):
    """`view` of the records of `log_dir` that `flt` selects, planned on the driver and read by
    `scan_dataframe`; the options are `narrow_scan`'s."""
    plan = plan_scan(
        log_dir,
        flt,
        max_bytes_per_task=max_bytes_per_task,
        min_tasks=default_min_tasks(spark) if min_tasks is None else min_tasks,
        stats=metrics.driver if metrics is not None else None,
        remote_storage=remote_storage,
    )
    return scan_dataframe(spark, plan, view, verify_crc=verify_crc, metrics=metrics, columns=columns)


def narrow_scan(
    spark,
    log_dir,
    topics=None,
    partitions=None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    *,
    max_bytes_per_task: int | None = None,
    min_tasks: int | None = None,
    verify_crc: bool = True,
    metrics: ScanMetrics | None = None,
    remote_storage: str | None = None,
    columns: Sequence[str] | None = None,
):
    """The compaction view of `log_dir` (`NARROW_SCHEMA`): one row per record with its key, value
    size and byte span, and its batch's header fields; values are not read. Offsets are selected in
    [start_offset, end_offset); segments and index ranges outside the selection are not opened.
    `columns` keeps only those columns, projected on the executors. `remote_storage` (tiered storage,
    every scan): a LocalTieredStorage directory whose remote segments are read before each partition's
    local ones, each offset once (`storage/remote_log.tiered_segments`)."""
    return _scan(
        spark,
        "narrow",
        log_dir,
        ScanFilter.of(topics, partitions, start_offset, end_offset),
        max_bytes_per_task=max_bytes_per_task,
        min_tasks=min_tasks,
        verify_crc=verify_crc,
        metrics=metrics,
        remote_storage=remote_storage,
        columns=columns,
    )


def read_records(
    spark,
    log_dir,
    topics=None,
    partitions=None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    *,
    max_bytes_per_task: int | None = None,
    min_tasks: int | None = None,
    verify_crc: bool = True,
    metrics: ScanMetrics | None = None,
    remote_storage: str | None = None,
):
    """The records of `log_dir` (`RECORDS_SCHEMA`): Spark's Kafka source columns (key, value, topic,
    partition, offset, timestamp, timestampType, headers; headers null when a record has none) plus
    producerId, producerEpoch, sequence (the record's), isTransactional, isControl,
    partitionLeaderEpoch, compresscodec, segmentBaseOffset and baseOffset. Control records are included."""
    return _scan(
        spark,
        "records",
        log_dir,
        ScanFilter.of(topics, partitions, start_offset, end_offset),
        max_bytes_per_task=max_bytes_per_task,
        min_tasks=min_tasks,
        verify_crc=verify_crc,
        metrics=metrics,
        remote_storage=remote_storage,
    )


def read_batches(
    spark,
    log_dir,
    topics=None,
    partitions=None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    *,
    max_bytes_per_task: int | None = None,
    min_tasks: int | None = None,
    verify_crc: bool = True,
    metrics: ScanMetrics | None = None,
    remote_storage: str | None = None,
):
    """One row per batch (`BATCHES_SCHEMA`), batches overlapping [start_offset, end_offset)."""
    return _scan(
        spark,
        "batches",
        log_dir,
        ScanFilter.of(topics, partitions, start_offset, end_offset),
        max_bytes_per_task=max_bytes_per_task,
        min_tasks=min_tasks,
        verify_crc=verify_crc,
        metrics=metrics,
        remote_storage=remote_storage,
    )


def segment_inventory(spark, log_dir, topics=None, partitions=None, *, stats: IOStats | None = None):
    """A DataFrame of the segments of `log_dir`, one row each, built on the driver from metadata:
    topic, partition, baseOffset, size (bytes), path (of the `.log`), firstOffset, lastOffset
    (None: no batch; firstOffset also None for a legacy compressed wrapper), maxTimestamp (epoch
    ms, None if unknown), isActive (the last segment of its partition) and mtime (the `.log` file's
    modification time, epoch ms)."""
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("baseOffset", LongType(), False),
            StructField("size", LongType(), False),
            StructField("path", StringType(), False),
            StructField("firstOffset", LongType(), True),
            StructField("lastOffset", LongType(), True),
            StructField("maxTimestamp", LongType(), True),
            StructField("isActive", BooleanType(), False),
            StructField("mtime", LongType(), False),
        ]
    )
    rows = inventory_rows(list_segments(log_dir, topics, partitions, stats=stats))
    return spark.createDataFrame(rows, schema)
