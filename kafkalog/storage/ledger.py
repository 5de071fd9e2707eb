"""The audit ledger of purges: a Delta table with one row per purged record, and a run table.

A records row says where a record was and what became of it -- run id, purge time, log directory
(the copy: a purge may rewrite every replica's, and `node_id` names the broker whose meta.properties
says so), topic, partition, offset, the record's timestamp, the action (removed, tombstoned, redacted), what matched
it (its key, or the `where` expression) and the reason -- and names the record's key only by its
fingerprint: HMAC-SHA256 of the key bytes under the operator's secret, in hex. Whoever holds the
secret can ask `find(ledger, key, secret)` "was this key purged, and where"; without it the ledger
says nothing about keys. (A plain hash would not do: keys such as e-mail addresses can be guessed
and hashed.)

The run table, at `<ledger>_runs`, has one row per purge run with its totals.

This module writes both with the `deltalake` package: no JVM, any machine; anything that reads Delta
reads them. A SparkSession with delta-spark configured writes them through `format("delta")` instead
(kafkalog/spark/ledger.py), with the schemas, the row builders (`ledger_rows`, `run_table`) and the
merge identity defined here: each writer reads what the other wrote. Records rows are merged on
(log directory, topic, partition, offset, action): a row that is already there is not written
again, so a rerun, or a run that completes an interrupted one, adds no duplicates, while the same
partition purged in another directory (a replica on another broker, an archive) is a record of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from ..errors import KafkaLogError
from .fs import LogFileSystem
from .tables import TableError, read_table, write_table

SECRET_ENV = "KAFKALOG_PURGE_SECRET"
MIN_SECRET_BYTES = 16  # half of HMAC-SHA256's output, the least RFC 2104 recommends

TIMESTAMP = pa.timestamp("us", tz="UTC")
RECORDS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("purged_at", TIMESTAMP),
        ("log_dir", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("action", pa.string()),
        ("matched_by", pa.string()),
        ("reason", pa.string()),
        ("key_fingerprint", pa.string()),
        ("node_id", pa.int32()),  # the broker of the copy (its meta.properties' node.id), null when unknown
    ]
)
MISSING_REPLICA_FIELDS = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("broker", pa.int32()),
    ("directory", pa.string()),
]
RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
        ("purged_at", TIMESTAMP),
        ("log_dir", pa.string()),  # the first of `log_dirs`
        ("topics", pa.list_(pa.string())),
        ("keys", pa.int64()),
        ("where", pa.bool_()),
        ("tombstone", pa.bool_()),
        ("partitions", pa.int32()),
        ("segments", pa.int32()),
        ("records_removed", pa.int64()),
        ("records_tombstoned", pa.int64()),
        ("records_redacted", pa.int64()),
        ("ledger_rows", pa.int64()),
        ("remaining", pa.int64()),
        # replicas the KRaft metadata names that the run was not given, so not purged (null: no
        # metadata log said which replicas exist)
        ("missing_replicas", pa.list_(pa.struct(MISSING_REPLICA_FIELDS))),
        ("kafkalog_version", pa.string()),
        ("log_dirs", pa.list_(pa.string())),  # every copy the run purged
    ]
)
# what makes a records row unique: a record's offset is unique in its partition of one log directory
ROW_IDENTITY = ("log_dir", "topic", "partition", "offset", "action")


class LedgerError(KafkaLogError):
    """A secret or ledger table that cannot be used."""


def load_secret(secret_file: str | None = None, environ: Mapping[str, str] = os.environ) -> bytes:
    """The fingerprint secret: the bytes of `secret_file` (one trailing line break dropped), else
    the environment variable KAFKALOG_PURGE_SECRET. Never a command-line value, which shells and
    process listings record."""
    if secret_file is not None:
        fs, path = LogFileSystem.for_path(secret_file)
        if not fs.exists(path):
            raise LedgerError("no such secret file", file=path)
        secret, where = fs.read_bytes(path), path
        secret = secret[:-2] if secret.endswith(b"\r\n") else secret[:-1] if secret.endswith(b"\n") else secret
    elif environ.get(SECRET_ENV):
        secret, where = environ[SECRET_ENV].encode("utf-8"), None
    else:
        raise LedgerError(f"a purge needs the ledger's fingerprint secret: --secret-file FILE or {SECRET_ENV}")
    if len(secret) < MIN_SECRET_BYTES:
        raise LedgerError(
            f"the fingerprint secret has {len(secret)} bytes; use at least {MIN_SECRET_BYTES}", file=where
        )
    return secret


def fingerprint(secret: bytes, key: bytes) -> str:
    """HMAC-SHA256(secret, key), hex."""
    return hmac.new(secret, key, hashlib.sha256).hexdigest()


def runs_path(ledger: str) -> str:
    return ledger.rstrip("/") + "_runs"


def records_table(
    purged: pa.Table, *, secret: bytes, run_id: str, purged_at_ms: int, log_dir: str | None = None
) -> pa.Table:
    """Ledger rows (RECORDS_SCHEMA) for records purged from `log_dir`, given as topic, partition,
        offset, timestamp (epoch ms), key, action, matched_by and reason: the key is replaced by its
        fingerprint. A local `log_dir` is named by its absolute path, so that a rerun from another
        working directory is the same directory. Without `log_dir`, each row's own `log_dir` and `node_id`
    (`ledger_rows`)."""
    name = None if log_dir is None else log_dir_identity(log_dir)
    return ledger_rows(purged, secret=secret, run_id=run_id, purged_at_ms=purged_at_ms, log_dir_name=name)


def ledger_rows(purged, *, secret: bytes, run_id: str, purged_at_ms: int, log_dir_name: str | None = None) -> pa.Table:
    """`records_table` with the log directory already named (`log_dir_identity`): what both
    writers build rows with, this module on the driver and Spark's on executors, one batch at a time.
    Without `log_dir_name`, each row's own `log_dir` (named already) and `node_id` columns say which
    copy it was purged from (a purge of several log dirs); `node_id` is null where not given."""
    memo: dict = {}

    def fp(key):
        if key is None:
            return None
        if key not in memo:
            memo[key] = fingerprint(secret, key)
        return memo[key]

    n = purged.num_rows
    columns = {
        "run_id": pa.array([run_id] * n, pa.string()),
        "purged_at": pa.array([purged_at_ms * 1000] * n, pa.int64()).cast(TIMESTAMP),
        "log_dir": purged.column("log_dir").cast(pa.string())
        if log_dir_name is None
        else pa.array([log_dir_name] * n, pa.string()),
        "topic": purged.column("topic").cast(pa.string()),
        "partition": purged.column("partition").cast(pa.int32()),
        "offset": purged.column("offset").cast(pa.int64()),
        "timestamp": pa.array(
            [None if t is None else t * 1000 for t in purged.column("timestamp").to_pylist()], pa.int64()
        ).cast(TIMESTAMP),
        "action": purged.column("action").cast(pa.string()),
        "matched_by": purged.column("matched_by").cast(pa.string()),
        "reason": purged.column("reason").cast(pa.string()),
        "key_fingerprint": pa.array([fp(k) for k in purged.column("key").to_pylist()], pa.string()),
        "node_id": purged.column("node_id").cast(pa.int32())
        if "node_id" in purged.schema.names
        else pa.nulls(n, pa.int32()),
    }
    return pa.table([columns[f.name] for f in RECORDS_SCHEMA], schema=RECORDS_SCHEMA)


def log_dir_identity(log_dir: str) -> str:
    """How the ledger names `log_dir`: a local directory by its absolute path, a URI as given."""
    fs, path = LogFileSystem.for_path(log_dir)
    return os.path.abspath(path) if fs.is_local else log_dir


def run_table(run: Mapping) -> pa.Table:
    """The run table's row (RUNS_SCHEMA) of `run`, whose timestamps are epoch ms."""
    row = {f.name: [run.get(f.name)] for f in RUNS_SCHEMA}
    for name in ("started_at", "finished_at", "purged_at"):
        row[name] = pa.array([run[name] * 1000], pa.int64()).cast(TIMESTAMP)
    return pa.table(row, schema=RUNS_SCHEMA)


def write_records(ledger: str, rows: pa.Table) -> int:
    """Add the rows not in the ledger yet (by topic, partition, offset and action); creates the
    table when there is none. Returns how many rows were added."""
    DeltaTable, write_deltalake = _deltalake(ledger)
    try:
        if not DeltaTable.is_deltatable(ledger):
            write_deltalake(ledger, rows, mode="append")
            return rows.num_rows
        if rows.num_rows == 0:
            return 0
        predicate = " AND ".join(f't."{c}" = s."{c}"' for c in ROW_IDENTITY)
        merged = (
            DeltaTable(ledger)
            .merge(source=rows, predicate=predicate, source_alias="s", target_alias="t", merge_schema=True)
            .when_not_matched_insert_all()
            .execute()
        )
    except Exception as err:  # deltalake's own errors (schema mismatch, storage): name the table
        raise LedgerError(f"cannot write the ledger: {type(err).__name__}: {err}", file=ledger) from err
    return int(merged["num_target_rows_inserted"])


def write_run(ledger: str, run: Mapping) -> None:
    """Append one row (RUNS_SCHEMA; timestamps as epoch ms) to the run table next to the ledger."""
    try:
        write_table(runs_path(ledger), run_table(run), "delta", append=True, what="the run table", add_columns=True)
    except TableError as err:
        raise LedgerError(err.message, file=err.file) from err


def find(ledger: str, key: bytes, secret: bytes) -> list[dict]:
    """The ledger rows of `key`: where its records were, and what became of them."""
    import pyarrow.compute as pc

    table = read_table(ledger, "delta")
    return table.filter(pc.equal(table.column("key_fingerprint"), fingerprint(secret, key))).to_pylist()


def _deltalake(ledger: str):
    try:
        from deltalake import DeltaTable, write_deltalake
    except ImportError:
        raise LedgerError(
            "the purge ledger needs the deltalake package (pip install 'kafkalog[spark]')", file=ledger
        ) from None
    return DeltaTable, write_deltalake


# -- evidence of rewritten segments ---------------------------------------------------------------------
#
# The segments table, at `<ledger>_segments`, has one row per segment a purge rewrote in one copy of a
# partition: the copy (its log directory, and the broker id and directory id of that directory's
# meta.properties), the segment's `.log` before and after (SHA-256, records, bytes), and the secret
# check. A table of its own rather than columns of the records table: a segment is not a record (its
# hashes would repeat on every purged record's row), and a new table leaves the records and run tables
# of older ledgers as they were, for every reader and writer of them.

SECRET_CHECK_LABEL = b"kafkalog purge ledger secret check"
SEGMENTS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("purged_at", TIMESTAMP),
        ("log_dir", pa.string()),
        ("broker_id", pa.int32()),
        ("directory_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("records_before", pa.int64()),
        ("records_after", pa.int64()),
        ("bytes_before", pa.int64()),
        ("bytes_after", pa.int64()),
        ("sha256_before", pa.string()),
        ("sha256_after", pa.string()),
        ("secret_check", pa.string()),
    ]
)


def segments_path(ledger: str) -> str:
    return ledger.rstrip("/") + "_segments"


def secret_check(secret: bytes) -> str:
    """The fingerprint of a fixed label: it tells whether a secret is the ledger's (a wrong secret
    fingerprints every key differently, and a verification with it would find nothing) and, like
    any fingerprint, tells nothing of the secret."""
    return fingerprint(secret, SECRET_CHECK_LABEL)


def file_sha256(fs: LogFileSystem, path: str, chunk: int = 1 << 20) -> str:
    """SHA-256 of the file at `path`, hex, read in chunks."""
    digest = hashlib.sha256()
    with fs.open_input(path) as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def copy_identity(meta: Mapping[str, str]) -> tuple[int | None, str | None]:
    """(broker id, directory id) of a log directory from its meta.properties keys (`node.id`, or a
    ZooKeeper-era `broker.id`); None where absent or not a number: evidence names what is there and
    judges nothing (validate does)."""
    raw = meta.get("node.id", meta.get("broker.id", "")).strip()
    broker = int(raw) if raw.lstrip("-").isdigit() else None
    return broker, meta.get("directory.id") or None


def segments_table(segments: Sequence[Mapping], *, run_id: str, purged_at_ms: int, secret: bytes) -> pa.Table:
    """The segments table's rows (SEGMENTS_SCHEMA) of `segments`, each a mapping of the columns from
    `log_dir` to `sha256_after`."""
    check = secret_check(secret)
    rows = [{**s, "run_id": run_id, "purged_at": purged_at_ms * 1000, "secret_check": check} for s in segments]
    columns = {f.name: [r[f.name] for r in rows] for f in SEGMENTS_SCHEMA}
    purged_at = pa.array(columns.pop("purged_at"), pa.int64()).cast(TIMESTAMP)
    return pa.table(
        [purged_at if f.name == "purged_at" else pa.array(columns[f.name], f.type) for f in SEGMENTS_SCHEMA],
        schema=SEGMENTS_SCHEMA,
    )


def write_segments(ledger: str, rows: pa.Table) -> None:
    """Append `rows` (SEGMENTS_SCHEMA) to the segments table next to the ledger. Appended, not merged:
    a rerun after an interrupted run stages its segments again, and each row says what one run staged."""
    try:
        write_table(segments_path(ledger), rows, "delta", append=True, what="the segments table")
    except TableError as err:
        raise LedgerError(err.message, file=err.file) from err


def read_ledger_table(path: str, columns: list[str] | None = None) -> pa.Table | None:
    """The Delta table at `path` (only `columns`, those of them it has), None when there is none: a
    ledger written before a table existed has no such table."""
    DeltaTable, _ = _deltalake(path)
    try:
        if not DeltaTable.is_deltatable(path):
            return None
        table = DeltaTable(path)
        have = {f.name for f in table.schema().fields}
        return table.to_pyarrow_table(columns=None if columns is None else [c for c in columns if c in have])
    except Exception as err:
        raise LedgerError(f"cannot read the ledger: {type(err).__name__}: {err}", file=path) from err


# -- the tables a purge erased from (`purge --table`, storage/table_erase.py) --------------------------

_FILE = pa.struct([("path", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64())])
TABLES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("purged_at", TIMESTAMP),
        ("table_path", pa.string()),
        ("format", pa.string()),
        ("topic", pa.string()),  # the export's note's; null for a table named by --key-column alone
        ("rows_removed", pa.int64()),
        ("files_written", pa.list_(_FILE)),  # paths relative to the table
        ("files_deleted", pa.list_(_FILE)),  # hashed before they were deleted
        ("secret_check", pa.string()),
    ]
)


def tables_path(ledger: str) -> str:
    return ledger.rstrip("/") + "_tables"


def write_tables(ledger: str, erased: Sequence[Mapping], *, run_id: str, purged_at_ms: int, secret: bytes) -> None:
    """Append a row (TABLES_SCHEMA) for each table of `erased` (mappings of `table_path`, `format`, `topic`,
    `rows_removed`, `files_written`, `files_deleted`). Appended, as the segments table: a rerun's row
    says what the rerun did."""
    check = secret_check(secret)
    rows = [{**e, "run_id": run_id, "purged_at": purged_at_ms * 1000, "secret_check": check} for e in erased]
    columns = {f.name: [r[f.name] for r in rows] for f in TABLES_SCHEMA}
    purged_at = pa.array(columns.pop("purged_at"), pa.int64()).cast(TIMESTAMP)
    table = pa.table(
        [purged_at if f.name == "purged_at" else pa.array(columns[f.name], f.type) for f in TABLES_SCHEMA],
        schema=TABLES_SCHEMA,
    )
    try:
        write_table(tables_path(ledger), table, "delta", append=True, what="the tables table")
    except TableError as err:
        raise LedgerError(err.message, file=err.file) from err
