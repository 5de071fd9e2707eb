"""The purge ledger from Spark: through delta-spark's `format("delta")` when the session has it, else
with the `deltalake` package (kafkalog/storage/ledger.py).

Both write the same tables: the schemas (RECORDS_SCHEMA, RUNS_SCHEMA), the rows (`ledger_rows`,
`run_table`) and the merge identity (ROW_IDENTITY) are storage/ledger.py's, so either writer reads and
extends a table the other wrote. Through Spark the records rows are built on the executors, one Arrow
batch at a time (`mapInArrow`), and merged with Delta's MERGE INTO: insert the rows whose (log
directory, topic, partition, offset, action) is not there yet. They never reach the driver; the key
fingerprint secret reaches the tasks inside the function they run, not as a literal of the plan
(plans are shown in Spark's UI and event logs).

A session has delta-spark when its `spark.sql.extensions` include Delta's extension and its
`spark_catalog` is Delta's catalog (`kafkalog.spark.session.delta_conf`, or
`local_session(delta=True)`, gives a new session both, with the jars from Maven Central).
"""

from __future__ import annotations

import pyarrow as pa

from ..storage.ledger import (
    RECORDS_SCHEMA,
    ROW_IDENTITY,
    RUNS_SCHEMA,
    SEGMENT_IDENTITY,
    SEGMENTS_SCHEMA,
    LedgerError,
    ledger_rows,
    log_dir_identity,
    records_table,
    run_table,
    runs_path,
    segments_path,
    write_records,
    write_run,
    write_segments,
)
from .scan import spark_schema
from .session import delta_configured
from .tables import delta_table, merge, write_table

# Hadoop's UnsupportedFileSystemException: the session cannot reach the table's scheme
NO_FILESYSTEM = "No FileSystem for scheme"
PURGED_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "action", "matched_by", "reason")
COPY_COLUMNS = ("log_dir", "node_id")  # which copy a record was purged from, where `log_dir` is not given


def write_ledger_records(
    spark, ledger: str, purged, *, secret: bytes, run_id: str, purged_at_ms: int, log_dir: str | None = None
) -> int:
    """Add to `ledger` the rows of the records in `purged` (a DataFrame with PURGED_COLUMNS, timestamp
    in epoch ms, and without `log_dir`, COPY_COLUMNS: each row's log dir, named already by
    `log_dir_identity`, and broker) that it does not hold yet; creates the table when there is none. Returns how many
    rows were added. Through delta-spark where the session has it and its Hadoop reaches the path;
    else (an `s3://` path on a session without an S3 filesystem, say) with deltalake on the driver."""
    purged = purged.select(*PURGED_COLUMNS, *(COPY_COLUMNS if log_dir is None else ()))
    if delta_configured(spark):
        try:
            return _merge_through_spark(
                spark, ledger, purged, secret=secret, run_id=run_id, purged_at_ms=purged_at_ms, log_dir=log_dir
            )
        except _Unreachable:
            pass
    return write_records(
        ledger,
        records_table(purged.toArrow(), secret=secret, run_id=run_id, purged_at_ms=purged_at_ms, log_dir=log_dir),
    )


class _Unreachable(Exception):
    """Spark's Hadoop has no filesystem for the table's scheme."""


def _merge_through_spark(
    spark, ledger: str, purged, *, secret: bytes, run_id: str, purged_at_ms: int, log_dir: str | None
) -> int:
    # on the driver: a relative path means the driver's working directory
    name = None if log_dir is None else log_dir_identity(log_dir)

    def rows(batches):
        for batch in batches:
            yield from ledger_rows(
                batch, secret=secret, run_id=run_id, purged_at_ms=purged_at_ms, log_dir_name=name
            ).to_batches()

    return _merge(spark, ledger, purged.mapInArrow(rows, spark_schema(RECORDS_SCHEMA)), RECORDS_SCHEMA, ROW_IDENTITY)


def _merge(spark, path: str, frame, schema: pa.Schema, identity, what: str = "the ledger") -> int:
    """Insert into the Delta table at `path` (created with `schema` when there is none) the rows of
    `frame` whose `identity` it does not hold yet (spark/tables.py's MERGE, with schema evolution: a
    table a former version wrote takes the new columns, older rows null); returns how many."""
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_table(path)} ({_columns(schema)}) USING delta")
    except Exception as err:
        if NO_FILESYSTEM in str(err):
            raise _Unreachable() from err
        raise _error(f"cannot write {what} through delta-spark", err, path) from err
    try:
        return merge(spark, frame, path, tuple(identity), update=False, add_columns=True)
    except Exception as err:
        raise _error(f"cannot write {what} through delta-spark", err, path) from err


def write_ledger_run(spark, ledger: str, run) -> None:
    """Append the row of `run` (RUNS_SCHEMA; timestamps as epoch ms) to the run table next to `ledger`,
    through delta-spark where the records went through it."""
    if not _append_through_spark(spark, runs_path(ledger), run_table(run), RUNS_SCHEMA, "the run table"):
        write_run(ledger, run)


def write_ledger_segments(spark, ledger: str, rows: pa.Table) -> int:
    """Add `rows` (SEGMENTS_SCHEMA) to the segments table next to `ledger` but those it holds
    (SEGMENT_IDENTITY, storage/ledger.py `write_segments`), through delta-spark where the session
    has it; returns how many were added."""
    if not rows.num_rows:
        return 0
    if delta_configured(spark):
        frame = spark.createDataFrame(rows, schema=spark_schema(SEGMENTS_SCHEMA))
        try:
            return _merge(spark, segments_path(ledger), frame, SEGMENTS_SCHEMA, SEGMENT_IDENTITY, "the segments table")
        except _Unreachable:
            pass
    return write_segments(ledger, rows)


def _append_through_spark(spark, path: str, rows: pa.Table, schema: pa.Schema, what: str) -> bool:
    """Append `rows` to the Delta table at `path` through delta-spark (a table an older kafkalog wrote
    gains the columns added since); False where the session has no delta-spark or its Hadoop cannot
    reach the path (the caller then writes with deltalake)."""
    if not delta_configured(spark):
        return False
    try:
        frame = spark.createDataFrame(rows, schema=spark_schema(schema))
        write_table(spark, frame, path, "delta", append=True, add_columns=True)
    except Exception as err:
        if NO_FILESYSTEM not in str(err):
            raise _error(f"cannot write {what} through delta-spark", err, path) from err
        return False
    return True


def _columns(schema: pa.Schema) -> str:
    """`schema` as the column list of a CREATE TABLE, in Spark SQL's types."""
    return ", ".join(f"`{f.name}` {t.dataType.simpleString()}" for f, t in zip(schema, spark_schema(schema)))


def _error(what: str, err: Exception, table: str) -> LedgerError:
    """One line, not a Java stack: the first line of Spark's error (of the Java exception's, for a
    Py4J error, whose first line only names the call)."""
    lines = [line.strip().lstrip(": ") for line in str(err).strip().splitlines()]
    lines = [line for line in lines if line and not line.startswith("An error occurred while calling")]
    return LedgerError(f"{what}: {type(err).__name__}: {lines[0] if lines else ''}", file=table)
