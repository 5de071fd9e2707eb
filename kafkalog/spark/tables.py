"""The table module through Spark (the Spark-free side is kafkalog/storage/tables/): read, write,
append and the one delta-spark MERGE. Delta through delta-spark where the session has it, else, as
every other format, through storage/tables (the `deltalake` and `pyiceberg` packages, on the
driver). Export's tables, the purge ledger's (spark/ledger.py) and purge's key tables come here.

Export's commits carry a note of what they hold (`note`: the export's offsets, a JSON object),
committed in the same commit as the data (a Delta commit's `userMetadata`, an Iceberg snapshot's
summary): a table and the offsets it holds can never disagree. A run that stops before its commit
leaves the previous version, and its note, as they were; the next run starts from that note and
redoes the work once. Delta's idempotent-write identifiers (txnAppId/txnVersion) would guard the
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
from ..storage.tables.iceberg import data_files
from .context import spark_context
from .session import delta_configured

FORMATS = ("delta", "iceberg", "parquet")
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# The tables delta-spark writes have deletion vectors: an incremental MERGE marks the rows it replaces
# or deletes in the files that hold them instead of rewriting those files, and the new keys of a run,
# spread over the whole table, would touch nearly every file (docs/benchmarks.md, "A topic as a
# table"). Python's `deltalake` reads them with `DeltaTable.scan()` (not `to_pyarrow_table()`).
DELETION_VECTORS = "delta.enableDeletionVectors"


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

        return from_arrow_schema(tables.table_schema(path, fmt))
    return StructType.fromJson(tables.delta.schema_json(path))


def read_table(spark, path: str, fmt: str):
    """The table at `path` as a DataFrame (CSV: a header row names its columns). Iceberg's Spark
    runtime has no build for Spark 4.2 (README, Limits): an Iceberg table is read as the Parquet files
    of its current snapshot, which pyiceberg's scan plan lists (storage/tables/iceberg.py); Delta
    through delta-spark where the session has it, else through the `deltalake` package on the driver
    (either applies the deletion vectors export's MERGE leaves)."""
    if fmt == "iceberg":
        files = data_files(path)
        schema = table_schema(path, fmt)
        return spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    if fmt == "delta" and not delta_configured(spark):
        return spark.createDataFrame(tables.read_table(path, fmt))
    if fmt == "csv":
        return spark.read.option("header", True).csv(path)
    return spark.read.format(fmt).load(path)


def write_table(
    spark, df, path: str, fmt: str, note: dict | None = None, *, append: bool = False, add_columns: bool = False
) -> None:
    """`df` as the whole table at `path` (a new version of it), or appended to it (`add_columns`: a
    Delta table gains the columns it lacks), in one commit with `note`. Parquet is written once: an
    existing directory is refused."""
    if fmt == "parquet":
        if append:
            raise ConfigError("parquet holds one-off snapshots: --incremental needs delta or iceberg")
        df.write.format("parquet").mode("errorifexists").save(path)
        if note is not None:
            tables.write_note_file(path, note)  # for a purge (storage/tables/erase.py): what the files hold
        return
    text = None if note is None else _text(note, fmt)
    if fmt == "delta" and delta_configured(spark):
        writer = df.write.format("delta").mode("append" if append else "overwrite")
        if text is not None:
            writer = writer.option("userMetadata", text)
        if add_columns:
            writer = writer.option("mergeSchema", "true")
        if not append:
            writer = writer.option("overwriteSchema", "true").option(DELETION_VECTORS, "true")
        writer.save(path)
        return
    tables.write_table(path, df.toArrow(), fmt, append=append, note=text, add_columns=add_columns)


def merge_latest(spark, changes, path: str, fmt: str, note: dict, *, records: int) -> None:
    """One commit applying `changes` (the last record per (partition, key) since the table's note, with
    `DELETED` true for a tombstone, from at most `records` new records) to the table at `path`, with
    `note`: a MERGE on (partition, key). A small Delta table is merged on the driver by `deltalake`,
    whose merge has none of delta-spark's fixed cost (`tuning.DRIVER_MERGE_BYTES` says when)."""
    delta_spark = fmt == "delta" and delta_configured(spark)
    if not delta_spark or (
        records <= tuning.DRIVER_MERGE_RECORDS and tables.delta.data_bytes(path) <= tuning.DRIVER_MERGE_BYTES
    ):
        tables.merge_table(path, changes.toArrow(), ("partition", "key"), fmt, note=_text(note, fmt))
        return
    merge(spark, changes, path, ("partition", "key"), note=_text(note, fmt))


def merge(
    spark, rows, path: str, on: tuple[str, ...], *, update: bool = True, note: str | None = None, add_columns=False
) -> int:
    """delta-spark's one MERGE: the DataFrame `rows` into the Delta table at `path` on the identity
    `on`, in one commit carrying `note` (storage/tables/delta.py's `merge` is deltalake's, with the
    same rules). A row whose identity the table holds replaces its match (`update`) or is left out;
    the others are inserted. With a `DELETED` column, a row true there deletes its match and is not
    inserted. `add_columns`: schema evolution, the columns the table lacks added. The MERGE runs with
    `tuning.MERGE_CONF` set around it alone. Returns how many rows were inserted."""
    view = f"kafkalog_merge_{uuid.uuid4().hex}"
    rows.createOrReplaceTempView(view)
    table = delta_table(path)
    match = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on)
    if DELETED in rows.columns:
        columns = [f"`{c}`" for c in rows.columns if c != DELETED]
        clauses = [
            f"WHEN MATCHED AND s.`{DELETED}` THEN DELETE",
            f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)}" if update else "",
            f"WHEN NOT MATCHED AND NOT s.`{DELETED}` THEN INSERT ({', '.join(columns)}) "
            f"VALUES ({', '.join(f's.{c}' for c in columns)})",
        ]
    else:
        clauses = ["WHEN MATCHED THEN UPDATE SET *" if update else "", "WHEN NOT MATCHED THEN INSERT *"]
    settings = {**tuning.MERGE_CONF, **({} if note is None else {USER_METADATA_CONF: note})}
    evolution = " WITH SCHEMA EVOLUTION" if add_columns else ""
    try:
        with session_conf(spark, settings):
            (merged,) = spark.sql(
                f"MERGE{evolution} INTO {table} AS t USING {view} AS s ON {match} " + " ".join(c for c in clauses if c)
            ).collect()
    finally:
        spark.catalog.dropTempView(view)
    return int(merged["num_inserted_rows"])


def delta_table(path: str) -> str:
    """The Delta table at `path` as Spark SQL names it."""
    return "delta.`" + path.replace("`", "``") + "`"


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
