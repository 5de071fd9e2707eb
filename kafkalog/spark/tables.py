"""Writing a topic's table from Spark: Delta through delta-spark where the session has it, else, as
every other format, through storage/tables.py (the `deltalake` and `pyiceberg` packages, on the
driver), each commit carrying a note of what it holds (`note`: the export's offsets, a JSON object).

The note is committed in the same commit as the data (a Delta commit's `userMetadata`, an Iceberg
snapshot's summary): a table and the offsets it holds can never disagree. A run that stops before its
commit leaves the previous version, and its note, as they were; the next run starts from that note
and redoes the work once. Delta's idempotent-write identifiers (txnAppId/txnVersion) would guard the
same thing with a second record; one note in the data's own commit needs no second record.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from .. import tuning
from ..errors import ConfigError
from ..storage import tables
from ..storage.tables import DELETED
from .context import spark_context
from .session import delta_configured

FORMATS = ("delta", "iceberg", "parquet")
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# The tables delta-spark writes have deletion vectors: an incremental MERGE marks the rows it replaces
# or deletes in the files that hold them instead of rewriting those files, and the new keys of a run,
# spread over the whole table, would touch nearly every file (docs/benchmarks.md, "A topic as a
# table"). Python's `deltalake` reads them with `DeltaTable.scan()` (not `to_pyarrow_table()`).
DELETION_VECTORS = "delta.enableDeletionVectors"
# Set around the MERGE alone. With deletion vectors Delta's MERGE writes only the rows it changes, but
# it finds them with a left outer join of the new rows with the (partition, key) of every row of the
# table, which Spark sorts on both sides (a sort-merge join over a million keys for a few thousand
# new rows). With this threshold, adaptive execution, once the shuffle has run, builds a hash table
# of a side each of whose shuffled partitions is under it (the new rows) instead of sorting; a side
# with a bigger partition keeps the sort-merge join, so memory stays bounded. Measured at 1 M keys
# (docs/benchmarks.md, "The incremental run"): a quarter less JVM CPU for the incremental run.
MERGE_CONF = {"spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": str(64 << 20)}


def _text(note: dict, fmt: str) -> str:
    return tables.note_text(note, fmt)


def read_note(path: str, fmt: str) -> dict | None:
    """The note of the latest commit of the table at `path` that carries one; None when there is no
    table. A table without any note was not written by an export: refused."""
    if fmt not in ("delta", "iceberg"):
        raise ConfigError(f"--incremental needs a table format with commits (delta or iceberg), not {fmt}")
    texts = tables.notes(path, fmt)
    if texts is None:
        return None
    for text in texts:
        note = tables.parse_note(text, fmt)
        if note is not None:
            return note
    raise ConfigError(f"a {fmt} table that no kafkalog export wrote: choose another --output", file=path)


def tasks_stopped(spark, timeout_s: float = 60.0) -> None:
    """Wait until no executor runs a task (at most `timeout_s`): the tasks of a failed write that
    were still running are killed asynchronously, and one could add a file to the table after the
    failed commit's files were taken back. A Spark Connect session has no tracker to ask."""
    import time

    context = spark_context(spark)
    if context is None:
        return
    deadline = time.monotonic() + timeout_s
    try:
        tracker = context._jsc.sc().statusTracker()
        while any(e.numRunningTasks() for e in tracker.getExecutorInfos()) and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception:  # the session is going away (an interrupt stopped it): no task runs on
        return


def table_schema(path: str, fmt: str):
    """The Spark schema (StructType) of the table at `path`."""
    from pyspark.sql.types import StructType

    if fmt == "iceberg":
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(tables.iceberg_schema(path))
    return StructType.fromJson(tables.delta_schema(path))


def read_table(spark, path: str, fmt: str):
    """The table at `path` as a DataFrame. Iceberg's Spark runtime has no build for Spark 4.2 (README,
    Limits): an Iceberg table is read as the Parquet files of its current snapshot, which pyiceberg's
    scan plan lists (storage/iceberg_table.py); Delta through delta-spark where the session has it,
    else through the `deltalake` package on the driver."""
    if fmt == "iceberg":
        from ..storage.iceberg_table import data_files

        files = data_files(path)
        schema = table_schema(path, fmt)
        return spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    if fmt == "delta" and not delta_configured(spark):
        return spark.createDataFrame(tables.read_table(path, fmt))
    return spark.read.format(fmt).load(path)


def write_table(spark, df, path: str, fmt: str, note: dict, *, append: bool = False) -> None:
    """`df` as the whole table at `path` (a new version of it), or appended to it, in one commit with
    `note`. Parquet is written once: an existing directory is refused."""
    if fmt == "parquet":
        if append:
            raise ConfigError("parquet holds one-off snapshots: --incremental needs delta or iceberg")
        df.write.format("parquet").mode("errorifexists").save(path)
        tables.write_note_file(path, note)  # for a purge (storage/table_erase.py): what the files hold
        return
    if fmt == "delta" and delta_configured(spark):
        writer = (
            df.write.format("delta").mode("append" if append else "overwrite").option("userMetadata", _text(note, fmt))
        )
        if not append:
            writer = writer.option("overwriteSchema", "true").option(DELETION_VECTORS, "true")
        writer.save(path)
        return
    tables.write_table(path, df.toArrow(), fmt, append=append, note=_text(note, fmt))


def merge_latest(spark, changes, path: str, fmt: str, note: dict, *, records: int) -> None:
    """One commit applying `changes` (the last record per (partition, key) since the table's note, with
    `DELETED` true for a tombstone, from at most `records` new records) to the table at `path`, with
    `note`: a MERGE on (partition, key). A small Delta table is merged on the driver by `deltalake`,
    whose merge has none of delta-spark's fixed cost (`tuning.DRIVER_MERGE_BYTES` says when)."""
    delta_spark = fmt == "delta" and delta_configured(spark)
    if not delta_spark or (
        records <= tuning.DRIVER_MERGE_RECORDS and tables.delta_data_bytes(path) <= tuning.DRIVER_MERGE_BYTES
    ):
        tables.merge_table(path, changes.toArrow(), ("partition", "key"), fmt, note=_text(note, fmt))
        return
    view = f"kafkalog_export_{uuid.uuid4().hex}"
    changes.createOrReplaceTempView(view)
    table = "delta.`" + path.replace("`", "``") + "`"
    columns = [f"`{c}`" for c in changes.columns if c != DELETED]
    try:  # the MERGE's commit carries the note
        with session_conf(spark, {**MERGE_CONF, USER_METADATA_CONF: _text(note, fmt)}):
            spark.sql(
                f"MERGE INTO {table} AS t USING {view} AS s ON t.partition = s.partition AND t.key = s.key "
                f"WHEN MATCHED AND s.`{DELETED}` THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)} "
                f"WHEN NOT MATCHED AND NOT s.`{DELETED}` THEN INSERT ({', '.join(columns)}) "
                f"VALUES ({', '.join(f's.{c}' for c in columns)})"
            ).collect()
    finally:
        spark.catalog.dropTempView(view)


@contextmanager
def session_conf(spark, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` in the session while the block runs; each one as it was afterwards (unset again
    where it was not set)."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
