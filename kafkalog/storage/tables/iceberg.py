"""Iceberg tables on a path, written with the `pyiceberg` package, laid out as Iceberg's Hadoop
catalog lays them out (`metadata/v<N>.metadata.json` and `metadata/version-hint.text`), so that
Spark's Iceberg runtime with a Hadoop catalog, pyiceberg's `StaticTable`, DuckDB or Trino read them.

Iceberg's Spark runtime is not used: its newest release (1.12.0) has no build for Spark 4.2, and the
4.1 build fails on Spark 4.2.1 as soon as its catalog loads (IncompatibleClassChangeError on
`SparkView`, checked 2026-11-27). pyiceberg has no Hadoop catalog, so `PathCatalog` is one for a
single table: a commit writes the next `v<N>.metadata.json`, refusing one that exists (another
writer got there first), and then the hint, which readers take as a starting point only.

A table written under its staging directory (`<path>.kafkalog-incomplete`, storage/tables/output.py)
is written with its final location: its metadata names its files by absolute path, so they must
name where the table will be once renamed into place. `StagedFileIO` puts them in the staging
directory meanwhile.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from ...errors import ConfigError
from ...extras import require
from ..destination import STAGING_SUFFIX

IDENTIFIER = ("kafkalog", "table")
_VERSION = re.compile(r"v(\d+)\.metadata\.json$")


def _catalog_class():
    require("pyiceberg", "an Iceberg table")
    from pyiceberg.catalog import MetastoreCatalog
    from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.serializers import FromInputFile, ToOutputFile
    from pyiceberg.table import CommitTableResponse, Table

    def unsupported(*_args, **_kwargs):
        raise NotImplementedError("a table on a path has no catalog of namespaces, views or other tables")

    class StagedFileIO(PyArrowFileIO):
        """The files of the table at `location`, written and read under `physical` instead."""

        def __init__(self, properties, location: str, physical: str):
            super().__init__(properties)
            self.location, self.physical = location, physical

        def parse_location(self, location: str, properties=None) -> tuple[str, str, str]:  # type: ignore[override]
            scheme, netloc, path = PyArrowFileIO.parse_location(location, properties or {})
            return scheme, netloc, _moved(path, self.location, self.physical)

    class PathCatalog(MetastoreCatalog):
        """Iceberg's Hadoop catalog layout for the one table at `location`, its files under
        `physical` (default: `location`)."""

        def __init__(self, location: str, physical: str | None = None):
            super().__init__("kafkalog")
            self.location = location.rstrip("/")
            self.physical = (physical or location).rstrip("/")

        def _load_file_io(self, properties=None, location=None):
            if self.physical == self.location:
                return super()._load_file_io(properties or {}, location)
            return StagedFileIO({**self.properties, **(properties or {})}, self.location, self.physical)

        def _metadata(self, version: int) -> str:
            return f"{self.location}/metadata/v{version}.metadata.json"

        def current_version(self) -> int | None:
            """The newest version: the hint's, then any later one a writer left without its hint."""
            io = self._load_file_io(location=self.location)
            hint = io.new_input(f"{self.location}/metadata/version-hint.text")
            if not hint.exists():
                return None
            with hint.open() as f:
                version = int(f.read().decode().strip())
            while io.new_input(self._metadata(version + 1)).exists():
                version += 1
            return version

        def load_table(self, identifier=IDENTIFIER) -> Table:
            version = self.current_version()
            if version is None:
                raise NoSuchTableError(f"no Iceberg table at {self.location}")
            location = self._metadata(version)
            io = self._load_file_io(location=location)
            return Table(IDENTIFIER, FromInputFile.table_metadata(io.new_input(location)), location, io, self)

        def table_exists(self, identifier=IDENTIFIER) -> bool:
            return self.current_version() is not None

        def create_table(
            self, identifier, schema, location=None, partition_spec=None, sort_order=None, properties=None
        ):
            from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
            from pyiceberg.table.metadata import new_table_metadata
            from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

            metadata = new_table_metadata(
                self._convert_schema_if_needed(schema),
                UNPARTITIONED_PARTITION_SPEC,
                UNSORTED_SORT_ORDER,
                self.location,
                properties or {},
            )
            self._publish(metadata, 1)
            return self.load_table()

        def commit_table(self, table, requirements, updates) -> CommitTableResponse:
            current = self.load_table()
            staged = self._update_and_stage_table(current, IDENTIFIER, requirements, updates)
            if staged.metadata == current.metadata:
                return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)  # type: ignore[call-arg]
            match = _VERSION.search(current.metadata_location)
            version = int(match.group(1)) + 1 if match else 1
            self._publish(staged.metadata, version)
            return CommitTableResponse(metadata=staged.metadata, metadata_location=self._metadata(version))  # type: ignore[call-arg]

        def _publish(self, metadata, version: int) -> None:
            """Write `v<version>.metadata.json` (refused if there: a concurrent commit), then the hint.
            The metadata file is written under a temporary name and linked into place, so a reader
            never sees half of it."""
            path = _moved(self._metadata(version), self.location, self.physical)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = f"{path}.{os.getpid()}.tmp"
            io = self._load_file_io(location=temporary)
            ToOutputFile.table_metadata(metadata, io.new_output(temporary), overwrite=True)
            try:
                os.link(temporary, path)
            except FileExistsError:
                raise CommitFailedException(f"another writer committed version {version} of {self.location}") from None
            finally:
                os.unlink(temporary)
            hint = f"{self.physical}/metadata/version-hint.text"
            with open(f"{hint}.tmp", "w") as f:
                f.write(str(version))
            os.replace(f"{hint}.tmp", hint)

        create_namespace = drop_namespace = list_namespaces = load_namespace_properties = unsupported
        update_namespace_properties = drop_table = rename_table = register_table = list_tables = unsupported
        drop_view = list_views = load_view = register_view = view_exists = unsupported

    return PathCatalog


def _local(path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        raise ConfigError(f"Iceberg tables are written on local paths only, not {path}", file=path)
    return os.path.abspath(path.removeprefix("file://"))


def _moved(path: str, location: str, physical: str) -> str:
    """`path` of a file of the table at `location`, under `physical` instead."""
    if path == location or path.startswith(location + "/"):
        return physical + path[len(location) :]
    return path


def catalog(path: str):
    """The catalog of the table at `path`; one at a staging directory is the final table's, staged."""
    local = _local(path)
    if local.endswith(STAGING_SUFFIX):
        return _catalog_class()(local.removesuffix(STAGING_SUFFIX), local)
    return _catalog_class()(local)


def notes(path: str, key: str) -> list[str] | None:
    """The summary entries `key` of the table's snapshots, newest first; None without a table."""
    cat = catalog(path)
    if not cat.table_exists():
        return None
    snapshots = sorted(cat.load_table().metadata.snapshots, key=lambda s: s.sequence_number, reverse=True)
    found = [s.summary.additional_properties.get(key) if s.summary else None for s in snapshots]
    return [text for text in found if text is not None]


def data_files(path: str) -> list[str]:
    """The Parquet files that hold the current snapshot's rows, from pyiceberg's scan plan, for a reader
    without Iceberg (Spark here). Refused where the plan has delete files (another writer's row-level
    deletes), which only an Iceberg reader applies; kafkalog's own commits rewrite files instead."""
    tasks = list(catalog(path).load_table().scan().plan_files())
    if any(task.delete_files for task in tasks):
        raise ConfigError(
            "the table has delete files, which only an Iceberg reader applies: read it with pyiceberg", file=path
        )
    return [task.file.file_path for task in tasks]


def write(path: str, data: pa.Table, summary: dict[str, str], *, append: bool = False) -> None:
    """`data` as the whole table at `path` (created if absent), or appended, in one snapshot whose
    summary carries `summary`."""
    cat = catalog(path)
    if not cat.table_exists():
        cat.create_table(IDENTIFIER, data.schema).append(data, snapshot_properties=summary)
        return
    table = cat.load_table()
    if append:
        table.append(data, snapshot_properties=summary)
    else:
        with table.transaction() as txn:
            if table.schema().as_arrow() != data.schema:
                txn.update_schema().union_by_name(data.schema).commit()
            txn.overwrite(data, snapshot_properties=summary)


def merge(path: str, changes: pa.Table, on: tuple[str, ...], deleted: str, summary: dict[str, str]) -> None:
    """Apply `changes` (one row per `on` identity; true in column `deleted` deletes it) to the table at `path`
    in one commit: the table rewritten with the changed rows replaced (pyiceberg's upsert cannot
    delete, and its delete filters take no binary literals), its summary carrying `summary`."""
    import numpy as np
    import pyarrow.compute as pc

    table = catalog(path).load_table()
    current = table.scan().to_arrow()
    # the rows no change touches, by their numbers (a join cannot carry the headers' nested type)
    numbered = current.select(list(on)).append_column("_row", pa.array(np.arange(current.num_rows)))
    kept = numbered.join(changes.select(list(on)), list(on), join_type="left anti")["_row"]
    untouched = current.take(pa.array(np.sort(kept.to_numpy())))
    live = changes.filter(pc.invert(changes[deleted])).select(current.schema.names).cast(current.schema)
    table.overwrite(pa.concat_tables([untouched.select(current.schema.names), live]), snapshot_properties=summary)
