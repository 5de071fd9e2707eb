"""The table formats kafkalog reads and writes, and how a table's format is told from what is at its
path: the one place that decides it (export's output, retain's offsets, purge's keys and tables)."""

from __future__ import annotations

from ...errors import KafkaLogError
from ..fs import LogFileSystem

FORMATS = ("delta", "iceberg", "parquet", "csv", "json")
FILE_FORMATS = ("parquet", "csv", "json")  # the formats a single file can hold, told by its suffix
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


def detect_format(path_or_uri: str, *, files: tuple[str, ...] = FILE_FORMATS, default: str | None = None) -> str:
    """A table's format from what is at `path_or_uri`: a directory with `_delta_log` is Delta, one with
    `metadata/version-hint.text` Iceberg, another directory Parquet files; a file by its suffix, among
    the formats `files`, else `default` (TableError without one)."""
    fs, path = LogFileSystem.for_path(path_or_uri)
    if fs.is_dir(path):
        if fs.exists(fs.join(path, "_delta_log")):
            return "delta"
        if fs.exists(fs.join(fs.join(path, "metadata"), "version-hint.text")):
            return "iceberg"
        return "parquet"
    lower = path.lower()
    for suffix, fmt in _SUFFIXES.items():
        if lower.endswith(suffix) and fmt in files:
            return fmt
    if default is not None:
        return default
    raise TableError(f"cannot tell the table's format: expected one of {', '.join(FORMATS)}", file=path)
