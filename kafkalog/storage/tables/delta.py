"""Delta tables with the `deltalake` package (delta-rs: no JVM, on the driver): the one place kafkalog
reads, writes, merges into and deletes from a Delta table without Spark. Through Spark, delta-spark
does the same (kafkalog/spark/tables.py).

The tables delta-spark's MERGE writes have deletion vectors (rows marked deleted in the files that
hold them). `to_pyarrow_table()` refuses such a table; `scan()` applies the vectors, so `read` takes
it for them (and `to_pyarrow_table()`, whose row order readers see, for the others).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from ...extras import imported
from .formats import DELETED


def _deltalake(path: str, what: str = "a Delta table"):
    return imported("deltalake", what, path)


def exists(path: str, what: str = "a Delta table") -> bool:
    return bool(_deltalake(path, what).DeltaTable.is_deltatable(path))


def open_table(path: str, what: str = "a Delta table"):
    """deltalake's DeltaTable at `path` (the package named in the error where it is missing)."""
    return _deltalake(path, what).DeltaTable(path)


def commit(path: str, note: str | None):
    """The commit properties of a commit carrying `note` (its userMetadata); None without one."""
    if note is None:
        return None
    return _deltalake(path).CommitProperties(custom_metadata={"userMetadata": note})


def has_deletion_vectors(table) -> bool:
    """Whether a data file of the table's version has a deletion vector (rows marked deleted in it)."""
    if "deletionVectors" not in (table.protocol().reader_features or []):
        return False
    return any(batch.num_rows for batch in table.deletion_vectors())


def read(path: str, columns: Sequence[str] | None = None, what: str = "a Delta table") -> pa.Table:
    """The rows of the table's current version (only `columns`, those of them it has), deletion
    vectors applied; Arrow's view types, which a scan gives, as their plain kinds."""
    table = open_table(path, what)
    if columns is not None:
        have = {f.name for f in table.schema().fields}
        columns = [c for c in columns if c in have]
    if "deletionVectors" in (table.protocol().reader_features or []):
        rows = pa.table(table.scan(columns=columns))
    else:
        rows = table.to_pyarrow_table(columns=columns)
    return rows.cast(pa.schema([f.with_type(without_views(f.type)) for f in rows.schema]))


def without_views(dtype: pa.DataType) -> pa.DataType:
    """`dtype` with Arrow's view types (a Delta scan's) as their plain kinds, which compute functions take."""
    if pa.types.is_string_view(dtype):
        return pa.string()
    if pa.types.is_binary_view(dtype):
        return pa.binary()
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_list_view(dtype):
        return pa.list_(dtype.value_field.with_type(without_views(dtype.value_type)))
    if pa.types.is_struct(dtype):
        return pa.struct(
            [dtype.field(i).with_type(without_views(dtype.field(i).type)) for i in range(dtype.num_fields)]
        )
    if pa.types.is_map(dtype):
        return pa.map_(without_views(dtype.key_type), without_views(dtype.item_type))
    return dtype


def write(path: str, rows: pa.Table, *, append: bool = False, note: str | None = None, add_columns: bool = False):
    """`rows` as a new version of the whole table (its schema replaced), or appended to it (with
    `add_columns`, the columns the table lacks added, its older rows null there), in one commit."""
    write_deltalake = _deltalake(path).write_deltalake
    properties = commit(path, note)
    if not append:
        write_deltalake(path, rows, mode="overwrite", schema_mode="overwrite", commit_properties=properties)
    elif add_columns:
        write_deltalake(path, rows, mode="append", schema_mode="merge", commit_properties=properties)
    else:
        write_deltalake(path, rows, mode="append", commit_properties=properties)


def merge(
    path: str, rows, on: Sequence[str], *, update: bool = True, note: str | None = None, add_columns=False
) -> int:
    """deltalake's one MERGE: `rows` (Arrow data: a table or a stream of batches) into the table at
    `path` on the identity `on`, in one commit carrying `note`. A row whose identity the table holds
    replaces its match (`update`) or is left out; the others are inserted. With a `DELETED` column, a
    row true there deletes its match and is not inserted. `add_columns`: the columns the table lacks
    are added (its older rows null there). Returns how many rows were inserted."""
    deletes = DELETED in rows.schema.names
    except_cols = [DELETED] if deletes else None
    merger = open_table(path).merge(
        rows,
        " AND ".join(f't."{c}" = s."{c}"' for c in on),
        source_alias="s",
        target_alias="t",
        merge_schema=add_columns,
        commit_properties=commit(path, note),
    )
    if deletes:
        merger = merger.when_matched_delete(f's."{DELETED}"')
    if update:
        merger = merger.when_matched_update_all(except_cols=except_cols)
    merged = merger.when_not_matched_insert_all(f'NOT s."{DELETED}"' if deletes else None, except_cols=except_cols)
    return int(merged.execute()["num_target_rows_inserted"])


def delete(path: str, predicate: str, kept: pa.Table, note: str | None = None) -> None:
    """The rows `predicate` selects deleted in one commit carrying `note` (`kept`: the rows that stay):
    the files that held them rewritten. A table with deletion vectors, which deltalake's rewrite would
    not honour, is written anew as `kept`."""
    table = open_table(path)
    if has_deletion_vectors(table):
        write(path, kept, note=note)
    else:
        table.delete(predicate, commit_properties=commit(path, note))


def data_files(table) -> set[str]:
    """The data files the table's version uses, relative to the table."""
    return set(pa.table(table.get_add_actions(flatten=True))["path"].to_pylist())


def data_bytes(path: str) -> int:
    """The bytes of the data files of the table's current version (its log's add actions)."""
    import pyarrow.compute as pc

    added = pa.table(open_table(path).get_add_actions(flatten=True))
    return int(pc.sum(added["size_bytes"]).as_py() or 0)


def schema(path: str, what: str = "a Delta table") -> pa.Schema:
    return pa.schema(open_table(path, what).schema())


def schema_json(path: str) -> dict:
    """The table's schema as its log stores it: Spark's schema JSON."""
    return json.loads(open_table(path).schema().to_json())


def notes(path: str) -> list[str] | None:
    """The userMetadata of the table's commits, newest first; None where there is no table."""
    if not exists(path):
        return None
    return [c["userMetadata"] for c in open_table(path).history() if isinstance(c.get("userMetadata"), str)]
