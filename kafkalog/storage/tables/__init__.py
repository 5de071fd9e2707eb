"""The table module: every table kafkalog reads or writes without Spark -- Parquet and CSV with
pyarrow, Delta with the `deltalake` package (tables/delta.py), Iceberg with `pyiceberg`
(tables/iceberg.py), JSON Lines -- read, written whole, appended to, merged into and erased from
(tables/erase.py). The offsets tables `retain` reads, `validate`'s findings, `export` (where no
delta-spark session writes it: spark/tables.py, which holds the Spark side of the same verbs; where
it writes: tables/output.py), the purge ledger's tables and purge's key tables go through here.

A commit may carry a note (a JSON object's text): a Delta commit's `userMetadata`, an Iceberg
snapshot's summary entry `NOTE_KEY`; a Parquet directory, which has no commits, a file `NOTE_FILE`
beside its part files (readers skip names starting with `_`). `export_note` finds the latest one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from ...errors import KafkaLogError
from ...extras import require
from ..fs import LogFileSystem
from . import delta
from .formats import DELETED, FILE_FORMATS, FORMATS, NOTE_FILE, NOTE_KEY, TableError, detect_format


def read_table(path_or_uri: str, fmt: str | None = None, *, columns: Sequence[str] | None = None) -> pa.Table:
    """The table at `path_or_uri` (`fmt`: else `detect_format`'s; a Delta table's deletion vectors
    applied; `columns`: only those, of a Delta table those of them it has). CSV columns are read as
    text, as written (a header row names them)."""
    fmt = fmt or detect_format(path_or_uri)
    fs, path = LogFileSystem.for_path(path_or_uri)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, filesystem=fs.fs, columns=columns)
    if fmt == "csv":
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(fs.read_bytes(path).decode("utf-8-sig"))))
        return _columns(pa.Table.from_pylist(rows), columns)
    if fmt == "json":
        lines = fs.read_bytes(path).decode("utf-8").splitlines()
        return _columns(pa.Table.from_pylist([json.loads(line) for line in lines if line.strip()]), columns)
    if fmt == "delta":
        require("deltalake", "reading a Delta table", path_or_uri)
        return delta.read(path_or_uri, columns)
    if fmt == "iceberg":
        require("pyiceberg", "reading an Iceberg table", path_or_uri)
        from .iceberg import catalog

        return _columns(catalog(path_or_uri).load_table().scan().to_arrow(), columns)
    raise TableError(f"table format {fmt!r}: expected one of {', '.join(FORMATS)}", file=path)


def _columns(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    return table if columns is None else table.select(list(columns))


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
            delta.write(path_or_uri, table, append=append, note=note, add_columns=add_columns)
        elif fmt == "iceberg":
            require("pyiceberg", "an Iceberg table", path_or_uri)
            from .iceberg import write

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
    carrying `note` (Delta: tables/delta.py's merge, Iceberg: the table rewritten). Errors of the
    writers name the table."""
    try:
        if fmt == "iceberg":
            from .iceberg import merge

            merge(path_or_uri, changes, on, DELETED, {NOTE_KEY: note} if note is not None else {})
            return
        require("deltalake", "a Delta table", path_or_uri)
        delta.merge(path_or_uri, changes, on, note=note)
    except KafkaLogError:
        raise
    except Exception as err:  # as write_table's
        raise TableError(f"cannot merge into the table: {type(err).__name__}: {err}", file=path_or_uri) from err


def table_schema(path: str, fmt: str) -> pa.Schema:
    """The schema of the Delta, Iceberg or Parquet table at `path`, in Arrow's types."""
    if fmt == "delta":
        return delta.schema(path)
    if fmt == "iceberg":
        from .iceberg import catalog

        return catalog(path).load_table().schema().as_arrow()
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").schema


def notes(path_or_uri: str, fmt: str) -> list[str] | None:
    """The notes of the table's commits, newest first; None where there is no table."""
    if fmt == "parquet":
        fs, path = LogFileSystem.for_path(path_or_uri)
        if not fs.is_dir(path):
            return None
        note = fs.join(path, NOTE_FILE)
        return [fs.read_bytes(note).decode("utf-8")] if fs.exists(note) else []
    if fmt == "iceberg":
        from .iceberg import notes as iceberg_notes

        return iceberg_notes(path_or_uri, NOTE_KEY)
    require("deltalake", "a Delta table", path_or_uri)
    return delta.notes(path_or_uri)


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


__all__ = [
    "DELETED",
    "FILE_FORMATS",
    "FORMATS",
    "NOTE_FILE",
    "NOTE_KEY",
    "TableError",
    "delta",
    "detect_format",
    "export_note",
    "merge_table",
    "note_text",
    "notes",
    "parse_note",
    "read_table",
    "table_schema",
    "write_note_file",
    "write_table",
]
