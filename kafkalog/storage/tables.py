"""Tables, read and written without Spark: Parquet and CSV with pyarrow, Delta with the `deltalake`
package, Iceberg with `pyiceberg` (storage/iceberg_table.py), JSON Lines. The commands that read or
write a table go through here: the offsets tables `retain` reads, `validate`'s findings, `export`
(where no delta-spark session writes it: spark/tables.py) and the purge ledger's runs.

A commit may carry a note (a JSON object's text): a Delta commit's `userMetadata`, an Iceberg
snapshot's summary entry `NOTE_KEY`; a Parquet directory, which has no commits, a file `NOTE_FILE`
beside its part files (readers skip names starting with `_`). `export_note` finds the latest one.
"""

from __future__ import annotations

import json

import pyarrow as pa

from ..errors import KafkaLogError
from ..extras import require
from .fs import LogFileSystem

FORMATS = ("delta", "iceberg", "parquet", "csv", "json")
NOTE_KEY = "kafkalogExport"  # in Delta's userMetadata object and in Iceberg's snapshot summary
NOTE_FILE = "_kafkalog_export.json"  # a Parquet table's note
# A merge's change rows say with this column whether they delete their row (a tombstone): not a null
# value, which a decoded value can be (the JSON text `null`) while its record is no tombstone.
DELETED = "_kafkalogDeleted"
_SUFFIXES = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


class TableError(KafkaLogError):
    """A table that cannot be read or written."""


def detect_format(path_or_uri: str) -> str:
    """A table's format from what is at `path_or_uri`: a directory with `_delta_log` is Delta, one with
    `metadata/version-hint.text` Iceberg, another directory Parquet files; a file by its suffix."""
    fs, path = LogFileSystem.for_path(path_or_uri)
    if fs.is_dir(path):
        if fs.exists(fs.join(path, "_delta_log")):
            return "delta"
        if fs.exists(fs.join(fs.join(path, "metadata"), "version-hint.text")):
            return "iceberg"
        return "parquet"
    lower = path.lower()
    for suffix, fmt in _SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    raise TableError(f"cannot tell the table's format: expected one of {', '.join(FORMATS)}", file=path)


def read_table(path_or_uri: str, fmt: str | None = None) -> pa.Table:
    """The table at `path_or_uri` (`fmt`: else `detect_format`'s). CSV columns are read as text, as
    written (a header row names them)."""
    fmt = fmt or detect_format(path_or_uri)
    fs, path = LogFileSystem.for_path(path_or_uri)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, filesystem=fs.fs)
    if fmt == "csv":
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(fs.read_bytes(path).decode("utf-8-sig"))))
        return pa.Table.from_pylist(rows)
    if fmt == "json":
        lines = fs.read_bytes(path).decode("utf-8").splitlines()
        return pa.Table.from_pylist([json.loads(line) for line in lines if line.strip()])
    if fmt == "delta":
        require("deltalake", "reading a Delta table", path_or_uri)
        from deltalake import DeltaTable

        table = DeltaTable(path_or_uri)
        if "deletionVectors" in (table.protocol().reader_features or []):
            # export's tables (spark/tables.py): to_pyarrow_table() refuses deletion vectors, scan() applies them
            return pa.table(table.scan())
        return table.to_pyarrow_table()
    if fmt == "iceberg":
        require("pyiceberg", "reading an Iceberg table", path_or_uri)
        from .iceberg_table import catalog

        return catalog(path_or_uri).load_table().scan().to_arrow()
    raise TableError(f"table format {fmt!r}: expected one of {', '.join(FORMATS)}", file=path)


def write_table(
    path_or_uri: str,
    table: pa.Table,
    fmt: str,
    *,
    append: bool = False,
    note: str | None = None,
    what: str = "the table",
    add_columns: bool = False,
) -> None:
    """`table` as the whole table at `path_or_uri` (Delta and Iceberg: a new version of it; Parquet, CSV
    and JSON Lines: a file replacing the one there), or appended to it (Delta and Iceberg), in one
    commit carrying `note`. Errors of the writers name the table, and say they could not write `what`.
    `add_columns`: an append to a Delta table adds the columns it lacks (its older rows null there)."""
    if append and fmt not in ("delta", "iceberg"):
        raise TableError(f"a {fmt} file cannot be appended to: write a Delta or Iceberg table", file=path_or_uri)
    if note is not None and fmt not in ("delta", "iceberg"):
        raise TableError(f"a {fmt} file has no commits to note anything in", file=path_or_uri)
    try:
        if fmt == "delta":
            require("deltalake", "a Delta table", path_or_uri)
            from deltalake import CommitProperties, write_deltalake

            commit = CommitProperties(custom_metadata={"userMetadata": note}) if note is not None else None
            if append:
                if add_columns:  # the columns the table lacks are added, its older rows null there
                    write_deltalake(path_or_uri, table, mode="append", schema_mode="merge", commit_properties=commit)
                else:
                    write_deltalake(path_or_uri, table, mode="append", commit_properties=commit)
            else:
                write_deltalake(path_or_uri, table, mode="overwrite", schema_mode="overwrite", commit_properties=commit)
        elif fmt == "iceberg":
            require("pyiceberg", "an Iceberg table", path_or_uri)
            from .iceberg_table import write

            write(path_or_uri, table, {NOTE_KEY: note} if note is not None else {}, append=append)
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, path_or_uri)
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, path_or_uri)
        elif fmt == "json":
            fs, path = LogFileSystem.for_path(path_or_uri)
            text = "".join(json.dumps(row, default=str) + "\n" for row in table.to_pylist())
            fs.write_bytes(path, text.encode())
        else:
            raise TableError(f"table format {fmt!r}: expected one of {', '.join(FORMATS)}", file=path_or_uri)
    except KafkaLogError:
        raise
    except Exception as err:  # pyarrow's, deltalake's and pyiceberg's own errors (storage, schema): name the table
        raise TableError(f"cannot write {what}: {type(err).__name__}: {err}", file=path_or_uri) from err


def merge_table(path_or_uri: str, changes: pa.Table, on: tuple[str, ...], fmt: str, *, note: str | None = None) -> None:
    """Apply `changes` (one row per `on` identity; `DELETED` true deletes the row, false replaces or
    inserts it, without that column) to the Delta or Iceberg table at `path_or_uri` in one commit
    carrying `note`. Errors of the writers name the table."""
    try:
        if fmt == "iceberg":
            from .iceberg_table import merge

            merge(path_or_uri, changes, on, DELETED, {NOTE_KEY: note} if note is not None else {})
            return
        require("deltalake", "a Delta table", path_or_uri)
        from deltalake import CommitProperties, DeltaTable

        commit = CommitProperties(custom_metadata={"userMetadata": note}) if note is not None else None
        match = " AND ".join(f't."{c}" = s."{c}"' for c in on)
        values = {c: f's."{c}"' for c in changes.schema.names if c != DELETED}
        (
            DeltaTable(path_or_uri)
            .merge(changes, match, source_alias="s", target_alias="t", commit_properties=commit)
            .when_matched_delete(f's."{DELETED}"')
            .when_matched_update(values)
            .when_not_matched_insert(values, f'NOT s."{DELETED}"')
            .execute()
        )
    except KafkaLogError:
        raise
    except Exception as err:  # as write_table's
        raise TableError(f"cannot merge into the table: {type(err).__name__}: {err}", file=path_or_uri) from err


def delta_data_bytes(path_or_uri: str) -> int:
    """The bytes of the data files of the Delta table's current version (its log's add actions)."""
    require("deltalake", "a Delta table", path_or_uri)
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    added = pa.table(DeltaTable(path_or_uri).get_add_actions(flatten=True))
    return int(pc.sum(added["size_bytes"]).as_py() or 0)


def notes(path_or_uri: str, fmt: str) -> list[str] | None:
    """The notes of the table's commits, newest first; None where there is no table."""
    if fmt == "parquet":
        fs, path = LogFileSystem.for_path(path_or_uri)
        if not fs.is_dir(path):
            return None
        note = fs.join(path, NOTE_FILE)
        return [fs.read_bytes(note).decode("utf-8")] if fs.exists(note) else []
    if fmt == "iceberg":
        from .iceberg_table import notes as iceberg_notes

        return iceberg_notes(path_or_uri, NOTE_KEY)
    require("deltalake", "a Delta table", path_or_uri)
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path_or_uri):
        return None
    return [c["userMetadata"] for c in DeltaTable(path_or_uri).history() if isinstance(c.get("userMetadata"), str)]


def note_text(note: dict, fmt: str) -> str:
    """A note as its commit holds it: Delta's userMetadata is an object naming it, Iceberg's summary
    entry and Parquet's file are named already."""
    return json.dumps({NOTE_KEY: note} if fmt == "delta" else note)


def parse_note(text: str, fmt: str) -> dict | None:
    """The note in a commit's `text` (`note_text`'s), None where the text holds none."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if fmt == "delta":
        value = value.get(NOTE_KEY) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else None


def export_note(path_or_uri: str, fmt: str) -> tuple[dict, str] | None:
    """(the note, its text) of the latest commit of the table that carries an export's note; None
    where there is no table or no such commit."""
    for text in notes(path_or_uri, fmt) or ():
        note = parse_note(text, fmt)
        if note is not None:
            return note, text
    return None


def write_note_file(path_or_uri: str, note: dict) -> None:
    """A Parquet table's note (`NOTE_FILE`), written whole or not at all."""
    fs, path = LogFileSystem.for_path(path_or_uri)
    fs.write_atomic(fs.join(path, NOTE_FILE), note_text(note, "parquet").encode())


def delta_schema(path_or_uri: str) -> dict:
    """A Delta table's schema as its log stores it: Spark's schema JSON."""
    require("deltalake", "a Delta table", path_or_uri)
    from deltalake import DeltaTable

    return json.loads(DeltaTable(path_or_uri).schema().to_json())


def iceberg_schema(path_or_uri: str) -> pa.Schema:
    """An Iceberg table's schema, in Arrow's types."""
    from .iceberg_table import catalog

    return catalog(path_or_uri).load_table().schema().as_arrow()
