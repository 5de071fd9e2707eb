"""Writing a topic's table: Delta (through delta-spark where the session has it, else the `deltalake`
package, as the purge ledger does), Iceberg (the `pyiceberg` package: storage/iceberg_table.py) and
Parquet, each commit carrying a note of what it holds (`note`: the export's offsets, a JSON object).

The note is committed in the same commit as the data (a Delta commit's `userMetadata`, an Iceberg
snapshot's summary): a table and the offsets it holds can never disagree. A run that stops before its
commit leaves the previous version, and its note, as they were; the next run starts from that note
and redoes the work once. Delta's idempotent-write identifiers (txnAppId/txnVersion) would guard the
same thing with a second record; one note in the data's own commit needs no second record.
"""

from __future__ import annotations

import json
import uuid

from ..errors import ConfigError
from .session import delta_configured

FORMATS = ("delta", "iceberg", "parquet")
NOTE_KEY = "kafkalogExport"  # the note's key in Delta's userMetadata object and Iceberg's snapshot summary
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def read_note(spark, path: str, fmt: str) -> dict | None:
    """The note of the latest commit of the table at `path` that carries one; None when there is no
    table. A table without any note was not written by an export: refused."""
    note: dict | None | bool
    if fmt == "delta":
        note = _delta_note(path)
    elif fmt == "iceberg":
        from ..storage.iceberg_table import read_note as iceberg_note

        note = iceberg_note(path, NOTE_KEY)
    else:
        raise ConfigError(f"--incremental needs a table format with commits (delta or iceberg), not {fmt}")
    if isinstance(note, bool):
        raise ConfigError(f"{path} is a {fmt} table that no kafkalog export wrote: choose another --output", file=path)
    return note


def _delta_note(path: str) -> dict | None | bool:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return None
    for commit in DeltaTable(path).history():  # newest first
        note = _parse(commit.get("userMetadata"))
        if note is not None:
            return note
    return False


def _parse(text) -> dict | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value.get(NOTE_KEY) if isinstance(value, dict) else None


def table_schema(path: str, fmt: str):
    """The Spark schema (StructType) of the table at `path`."""
    from pyspark.sql.types import StructType

    if fmt == "iceberg":
        from pyspark.sql.pandas.types import from_arrow_schema

        from ..storage.iceberg_table import catalog

        return from_arrow_schema(catalog(path).load_table().schema().as_arrow())
    from deltalake import DeltaTable

    return StructType.fromJson(json.loads(DeltaTable(path).schema().to_json()))  # Delta stores Spark's schema JSON


def write_table(spark, df, path: str, fmt: str, note: dict, *, append: bool = False) -> None:
    """`df` as the whole table at `path` (a new version of it), or appended to it, in one commit with
    `note`. Parquet is written once: an existing directory is refused."""
    if fmt == "parquet":
        if append:
            raise ConfigError("parquet holds one-off snapshots: --incremental needs delta or iceberg")
        df.write.format("parquet").mode("errorifexists").save(path)
        return
    if fmt == "iceberg":
        from ..storage.iceberg_table import write as iceberg_write

        iceberg_write(path, df.toArrow(), {NOTE_KEY: json.dumps(note)}, append=append)
        return
    metadata = json.dumps({NOTE_KEY: note})
    mode = "append" if append else "overwrite"
    if delta_configured(spark):
        writer = df.write.format("delta").mode(mode).option("userMetadata", metadata)
        (writer if append else writer.option("overwriteSchema", "true")).save(path)
        return
    from deltalake import CommitProperties, write_deltalake

    commit = CommitProperties(custom_metadata={"userMetadata": metadata})
    if append:
        write_deltalake(path, df.toArrow(), mode="append", commit_properties=commit)
    else:
        write_deltalake(path, df.toArrow(), mode="overwrite", schema_mode="overwrite", commit_properties=commit)


def merge_latest(spark, changes, path: str, fmt: str, note: dict) -> None:
    """One commit applying `changes` (the last record per (partition, key) since the table's note; a
    null value deletes the key) to the table at `path`, with `note`: a MERGE on (partition, key)."""
    if fmt == "iceberg":
        from ..storage.iceberg_table import merge as iceberg_merge

        iceberg_merge(path, changes.toArrow(), ("partition", "key"), {NOTE_KEY: json.dumps(note)})
        return
    metadata = json.dumps({NOTE_KEY: note})
    if not delta_configured(spark):
        from deltalake import CommitProperties, DeltaTable

        (
            DeltaTable(path)
            .merge(
                changes.toArrow(),
                "t.partition = s.partition AND t.key = s.key",
                source_alias="s",
                target_alias="t",
                commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata}),
            )
            .when_matched_delete("s.value IS NULL")
            .when_matched_update_all()
            .when_not_matched_insert_all("s.value IS NOT NULL")
            .execute()
        )
        return
    view = f"kafkalog_export_{uuid.uuid4().hex}"
    changes.createOrReplaceTempView(view)
    table = "delta.`" + path.replace("`", "``") + "`"
    previous = spark.conf.get(USER_METADATA_CONF, None)
    spark.conf.set(USER_METADATA_CONF, metadata)  # the MERGE's commit carries it
    try:
        spark.sql(
            f"MERGE INTO {table} AS t USING {view} AS s ON t.partition = s.partition AND t.key = s.key "
            "WHEN MATCHED AND s.value IS NULL THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * "
            "WHEN NOT MATCHED AND s.value IS NOT NULL THEN INSERT *"
        ).collect()
    finally:
        if previous is None:
            spark.conf.unset(USER_METADATA_CONF)
        else:
            spark.conf.set(USER_METADATA_CONF, previous)
        spark.catalog.dropTempView(view)
