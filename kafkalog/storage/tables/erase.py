"""Rows erased from a table kafkalog exported, and made unreachable on disk: the table operations a
purge with `--table` runs (kafkalog/operations/purge_tables.py), without Spark.

Which rows: those of the purge's decision -- the table's rows whose (partition, offset) is a record
the purge removes from the log of the table's topic -- and, where the key column holds the key as
the log does (exported as bytes, or as UTF-8 text), every row of a purged key, also one whose
record the log no longer holds. The export's note (tables/__init__.py, `export_note`) says which
topic the table holds and how its keys were decoded; a table without one is refused unless the
caller names its key column (`key_column`).

Then nothing of those rows stays on disk under the table:

* Delta: the rows deleted in one commit (the files that held them rewritten; with deletion vectors,
  which a rewrite by `deltalake` would not honour, the table rewritten whole), carrying the export's
  note; every data file the new version does not use deleted, as VACUUM with zero retention does
  (deletion vectors' files, which hold row numbers only, are kept);
  a checkpoint written at that version and the older commits, checkpoints and checksums deleted, as
  Delta's log cleanup does for expired versions. Their statistics (`minValues`/`maxValues` of string
  columns) held the keys. Time travel to an older version then fails: those versions are gone.
* Iceberg: the table rewritten without the rows in one snapshot carrying the note, every older
  snapshot expired, and every file the current metadata does not reach deleted (older metadata
  versions, manifest lists, manifests -- whose column bounds held the keys -- and data files).
* Parquet (a directory of Spark's part files): each file that held a row rewritten beside it under a
  hidden name and renamed over it (and its Hadoop `.crc` checksum deleted, which no longer matches).

Each step is safe to interrupt: a commit is atomic, the clean-up only deletes files the committed
version does not use, a Parquet file is replaced by one rename; run again, `erase` finishes the work
(no rows left to delete, the clean-up redone). `fault(step, table)` is the crash tests' hook.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ConfigError
from ..fs import LogFileSystem
from ..ledger import file_sha256
from ..swap import FaultHook, no_fault
from . import delta, export_note, read_table, table_schema
from .formats import NOTE_KEY, TableError, detect_format

ERASABLE = ("delta", "iceberg", "parquet")
_TEMPORARY = ".kafkalog-erase-"  # a Parquet file's rewrite, before its rename (hidden: readers skip it)


@dataclass(frozen=True)
class TableTarget:
    """One table a purge erases from, checked before anything is written."""

    path: str  # local, absolute
    format: str
    topic: str | None  # the export note's; None: a table named by its key column alone
    key_column: str
    key_kind: str | None  # "binary", "string" (the key's UTF-8 text), None: matched by offsets alone
    note_text: str | None  # carried into the purge's commit, so that `export --incremental` goes on

    @property
    def by_offset(self) -> bool:
        return self.topic is not None


@dataclass
class TableErasure:
    """What `erase` did to one table (the ledger's tables row, storage/ledger.py)."""

    path: str
    format: str
    topic: str | None
    rows_removed: int = 0
    written: list = field(default_factory=list)  # {path, sha256, bytes}, relative to the table
    deleted: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "table": self.path,
            "format": self.format,
            "topic": self.topic,
            "rowsRemoved": self.rows_removed,
            "filesWritten": self.written,
            "filesDeleted": self.deleted,
        }


def check_table(path_or_uri: str, key_column: str | None = None) -> TableTarget:
    """The table at `path_or_uri` as an erase target, refused (TableError) when kafkalog cannot erase
    from it: not there, not Delta, Iceberg or Parquet, not on a local path, no export note and no
    `key_column`, or a key column it does not have or holds in a type keys cannot be compared with."""
    path = table_dir(path_or_uri)
    fmt = detect_format(path)
    if fmt not in ERASABLE:
        raise TableError(f"a purge erases from {', '.join(ERASABLE)} tables, not {fmt}", file=path)
    noted = export_note(path, fmt)
    if noted is None and key_column is None:
        raise TableError(
            "no kafkalog export wrote this table (it has no export note): give --key-column NAME to purge it anyway",
            file=path,
        )
    note, text = noted if noted is not None else ({}, None)
    column = key_column or "key"
    schema = table_schema(path, fmt)
    if column not in schema.names:
        raise TableError(f"the table has no key column {column!r} (its columns: {', '.join(schema.names)})", file=path)
    kind = _key_kind(schema.field(column).type, note.get("keyFormat"), named=key_column is not None)
    if kind is None and noted is None:
        raise TableError(
            f"key column {column!r} is {schema.field(column).type}: give a binary or string one", file=path
        )
    if noted is not None and not {"partition", "offset"} <= set(schema.names):
        raise TableError("the table has no partition and offset columns to match the purged records by", file=path)
    return TableTarget(path, fmt, note.get("topic") if noted else None, column, kind, text)


def table_dir(path_or_uri: str) -> str:
    """The table's directory, local and absolute; TableError where there is none."""
    if "://" in path_or_uri and not path_or_uri.startswith("file://"):
        raise TableError("a purge erases from tables on local paths only", file=path_or_uri)
    path = os.path.abspath(path_or_uri.removeprefix("file://"))
    if not os.path.isdir(path):
        raise TableError("no table there (a purge erases from a Delta, Iceberg or Parquet table directory)", file=path)
    return path


def _key_kind(dtype: pa.DataType, key_format: str | None, *, named: bool) -> str | None:
    """How the key column compares with the purged keys' bytes: as bytes, as their UTF-8 text (a
    string column the export decoded as `string`, or one the caller named), or not at all (a key the
    export decoded from JSON or a schema: the rows are matched by offset alone)."""
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "binary"
    if (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)) and (named or key_format == "string"):
        return "string"
    return None


# -- which rows ------------------------------------------------------------------------------------


def erase_mask(rows: pa.Table, target: TableTarget, offsets: Mapping[int, list[int]], keys: list[bytes]) -> pa.Array:
    """True for the rows of `rows` to erase: a purged record's (`offsets`: {partition: offsets} of the
    target's topic) or, where the key column compares with keys, a purged key's."""
    mask = pa.array([False] * rows.num_rows, pa.bool_())
    if target.by_offset and offsets:
        topic = rows["topic"] if "topic" in rows.column_names else None
        for partition, listed in offsets.items():
            hit = pc.and_(
                pc.equal(rows["partition"], partition), pc.is_in(rows["offset"], pa.array(listed, pa.int64()))
            )
            if topic is not None:
                hit = pc.and_(hit, pc.equal(topic.cast(pa.string()), target.topic))  # a scan gives string_view
            mask = pc.or_(mask, pc.fill_null(hit, False))
    if target.key_kind is not None and keys:
        column = rows[target.key_column]
        wanted = pa.array(keys, pa.binary())
        if target.key_kind == "string":
            wanted = pa.array([k.decode("utf-8", "replace") for k in keys], pa.string())
        mask = pc.or_(mask, pc.fill_null(pc.is_in(column.cast(wanted.type), wanted), False))
    return mask


def count_rows(target: TableTarget, offsets: Mapping[int, list[int]], keys: list[bytes]) -> int:
    """How many rows `erase` would remove (a dry run's answer)."""
    rows = read_table(target.path, target.format)
    return pc.sum(erase_mask(rows, target, offsets, keys).cast(pa.int64())).as_py() or 0


# -- erase -----------------------------------------------------------------------------------------


def erase(
    target: TableTarget, offsets: Mapping[int, list[int]], keys: list[bytes], fault: FaultHook = no_fault
) -> TableErasure:
    """Remove the rows (`erase_mask`) from the table and every file that held them (the module's docstring)."""
    done = TableErasure(target.path, target.format, target.topic)
    try:
        {"delta": _erase_delta, "iceberg": _erase_iceberg, "parquet": _erase_parquet}[target.format](
            target, offsets, keys, done, fault
        )
    except (TableError, ConfigError):
        raise
    except Exception as err:  # deltalake's, pyiceberg's and pyarrow's own errors: name the table
        raise TableError(f"cannot erase the purged rows: {type(err).__name__}: {err}", file=target.path) from err
    return done


def _file(root: str, path: str) -> dict:
    fs = LogFileSystem.for_path(path)[0]
    return {"path": os.path.relpath(path, root), "sha256": file_sha256(fs, path), "bytes": os.path.getsize(path)}


def _delete(root: str, paths, done: TableErasure) -> None:
    """Delete `paths` under the table, each hashed first for the evidence."""
    for path in sorted(paths):
        if os.path.exists(path):
            done.deleted.append(_file(root, path))
            os.unlink(path)


def _every_file(root: str, skip: Callable[[str], bool] = lambda rel: False) -> Iterator[str]:
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if not skip(os.path.relpath(path, root)):
                yield path


# Delta


def _is_deletion_vector(rel: str) -> bool:
    return os.path.basename(rel).startswith("deletion_vector_") and rel.endswith(".bin")


def _erase_delta(target: TableTarget, offsets, keys, done: TableErasure, fault: FaultHook) -> None:
    before = delta.data_files(delta.open_table(target.path))
    rows = read_table(target.path, "delta")  # with the deletion vectors applied
    mask = erase_mask(rows, target, offsets, keys)
    done.rows_removed = pc.sum(mask.cast(pa.int64())).as_py() or 0
    if done.rows_removed:
        kept = rows.filter(pc.invert(mask))
        delta.delete(target.path, _delta_predicate(rows, mask, target), kept, note=target.note_text)
        fault("table-committed", target.path)
    table = delta.open_table(target.path)
    after = delta.data_files(table)
    done.written = [_file(target.path, os.path.join(target.path, p)) for p in sorted(after - before)]
    # VACUUM with zero retention: every data file the current version does not use. Deletion vectors'
    # files stay: they hold row numbers, no row, and one the version uses must not go
    unused = _every_file(
        target.path, lambda rel: rel.split(os.sep)[0] == "_delta_log" or rel in after or _is_deletion_vector(rel)
    )
    _delete(target.path, [p for p in unused if not _hidden_checksum_of(p, after, target.path)], done)
    fault("table-vacuumed", target.path)
    _clean_delta_log(table, target.path, done)


def _hidden_checksum_of(path: str, used: set[str], root: str) -> bool:
    """A Hadoop `.<name>.crc` of a file the version uses (kept with it)."""
    name = os.path.basename(path)
    if not (name.startswith(".") and name.endswith(".crc")):
        return False
    return os.path.relpath(os.path.join(os.path.dirname(path), name[1:-4]), root) in used


def _delta_predicate(rows: pa.Table, mask: pa.Array, target: TableTarget) -> str:
    """The delete's predicate naming exactly the rows of `mask`: by partition and offset in an export's
    table (a row's key says nothing more: a record a `--where` matched is one row, not its key's every
    row), by key in a table named by its key column (which only keys match)."""
    chosen = rows.filter(mask)
    if target.by_offset:
        by_partition: dict = {}
        for p, o in zip(chosen["partition"].to_pylist(), chosen["offset"].to_pylist()):
            by_partition.setdefault(p, set()).add(o)
        return " OR ".join(
            f'("partition" = {p} AND "offset" IN ({", ".join(map(str, sorted(listed)))}))'
            for p, listed in sorted(by_partition.items())
        )
    values = sorted({v for v in chosen[target.key_column].to_pylist() if v is not None})
    if target.key_kind == "binary":
        literals = [f"X'{v.hex()}'" for v in values]
    else:
        literals = ["'" + v.replace("'", "''") + "'" for v in values]
    return f'"{target.key_column}" IN ({", ".join(literals)})'


def _clean_delta_log(table, root: str, done: TableErasure) -> None:
    """A checkpoint at the current version, then every older commit, checkpoint and checksum deleted
    (staged commits in `_delta_log/_staged_commits` too, and Hadoop's `.crc` of each): the log starts
    at the checkpoint, as after Delta's cleanup of expired log files."""
    version = table.version()
    log = os.path.join(root, "_delta_log")
    if not os.path.exists(os.path.join(log, f"{version:020d}.checkpoint.parquet")):
        table.create_checkpoint()
    older = []
    for path in _every_file(log):
        head = os.path.basename(path).removeprefix(".").split(".", 1)[0]  # the version a file is named by
        if head.isdigit() and int(head) < version:
            older.append(path)
    _delete(root, older, done)


# Iceberg


def _erase_iceberg(target: TableTarget, offsets, keys, done: TableErasure, fault: FaultHook) -> None:
    from .iceberg import catalog

    table = catalog(target.path).load_table()
    rows = table.scan().to_arrow()
    mask = erase_mask(rows, target, offsets, keys)
    done.rows_removed = pc.sum(mask.cast(pa.int64())).as_py() or 0
    before = _iceberg_files(table)
    if done.rows_removed:
        summary = {NOTE_KEY: target.note_text} if target.note_text else {}
        table.overwrite(rows.filter(pc.invert(mask)), snapshot_properties=summary)
        fault("table-committed", target.path)
        table = catalog(target.path).load_table()
    current = table.current_snapshot()
    older = [s.snapshot_id for s in table.snapshots() if current is None or s.snapshot_id != current.snapshot_id]
    if older:
        table.maintenance.expire_snapshots().by_ids(older).commit()
        table = catalog(target.path).load_table()
    fault("table-expired", target.path)
    used = _iceberg_files(table)
    done.written = [_file(target.path, p) for p in sorted(used - before) if not p.endswith(".metadata.json")]
    orphans = _every_file(target.path, lambda rel: os.path.join(target.path, rel) in used)
    _delete(target.path, [p for p in orphans if not p.endswith("version-hint.text")], done)


def _iceberg_files(table) -> set[str]:
    """Every file the table's current metadata reaches: itself, its snapshots' manifest lists, their
    manifests and the data and delete files those list."""
    used = {table.metadata_location.removeprefix("file://")}
    for snapshot in table.snapshots():
        used.add(snapshot.manifest_list.removeprefix("file://"))
        for manifest in snapshot.manifests(table.io):
            used.add(manifest.manifest_path.removeprefix("file://"))
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                used.add(entry.data_file.file_path.removeprefix("file://"))
    return used


# Parquet


def _erase_parquet(target: TableTarget, offsets, keys, done: TableErasure, fault: FaultHook) -> None:
    import pyarrow.parquet as pq

    for path in _every_file(target.path):
        name = os.path.basename(path)
        if name.startswith(_TEMPORARY):  # an interrupted rewrite's: its file was not replaced
            os.unlink(path)
    for path in sorted(_every_file(target.path)):
        name = os.path.basename(path)
        if name.startswith((".", "_")) or not name.endswith(".parquet"):
            continue
        rows = pq.read_table(path)
        mask = erase_mask(rows, target, offsets, keys)
        removed = pc.sum(mask.cast(pa.int64())).as_py() or 0
        if not removed:
            continue
        temporary = os.path.join(os.path.dirname(path), _TEMPORARY + name)
        pq.write_table(rows.filter(pc.invert(mask)), temporary)
        fault("file-staged", path)
        old = _file(target.path, path)
        os.replace(temporary, path)
        done.deleted.append(old)
        done.written.append(_file(target.path, path))
        done.rows_removed += removed
        fault("file-replaced", path)
        _delete(target.path, [os.path.join(os.path.dirname(path), f".{name}.crc")], done)


# -- what is on disk -------------------------------------------------------------------------------


def stored_values(path: str) -> Iterator[tuple[str, bytes]]:
    """(file, value) for every value a file under the table at `path` holds, decoded where the file is
    compressed or encoded: Parquet columns (data files, Delta checkpoints), JSON (Delta commits and
    statistics, Iceberg metadata), Avro (Iceberg manifest lists and manifests, with their column
    bounds), any other file's bytes whole. Strings are given as UTF-8."""
    root = os.path.abspath(path.removeprefix("file://"))
    for file in sorted(_every_file(root)):
        rel = os.path.relpath(file, root)
        for value in _file_values(file):
            yield rel, value


def _file_values(file: str) -> Iterator[bytes]:
    name = os.path.basename(file)
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        yield from _values(pq.read_table(file).to_pylist())
    elif name.endswith(".avro"):
        from pyiceberg.avro.file import AvroFile
        from pyiceberg.io.pyarrow import PyArrowFileIO

        with AvroFile(PyArrowFileIO().new_input(file)) as reader:  # type: ignore[var-annotated]
            for record in reader:
                yield from _values(_plain(record))
    elif name.endswith((".json", ".crc")) or name == "_last_checkpoint":
        text = open(file, "rb").read()
        try:
            parsed = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            yield text
            return
        yield from _values(parsed)
    else:
        yield open(file, "rb").read()


def _plain(record):
    """An Avro record of pyiceberg's reader as plain lists, dicts and values."""
    if hasattr(record, "_data"):
        return [_plain(v) for v in record._data]
    if isinstance(record, dict):
        return {_plain_key(k): _plain(v) for k, v in record.items()}
    if isinstance(record, list | tuple):
        return [_plain(v) for v in record]
    return record


def _plain_key(k):
    return k if isinstance(k, str | int | bytes) else str(k)


def _values(value) -> Iterator[bytes]:
    """Every string and bytes value in `value`, a JSON object's text parsed further (Delta's statistics)."""
    if isinstance(value, bytes):
        yield value
    elif isinstance(value, str):
        yield value.encode("utf-8")
        if value.startswith("{"):
            try:
                yield from _values(json.loads(value))
            except ValueError:
                pass
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _values(k)
            yield from _values(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _values(v)
