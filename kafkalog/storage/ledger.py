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
from .destination import check_outside
from .fs import LogFileSystem
from .tables import TableError, delta, read_table, write_table

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
REPLICA_DIFFERENCE_FIELDS = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("log_dir", pa.string()),
    ("log_start_offset", pa.int64()),
    ("log_end_offset", pa.int64()),
    ("segments", pa.list_(pa.int64())),  # the base offsets of its segments
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
        # interrupted runs (ledger rows, no run row) over these log dirs whose purge this run completed
        ("resumes", pa.list_(pa.string())),
        # the copies of partitions whose copies differ (log start, log end, segments), one row per copy
        ("replica_differences", pa.list_(pa.struct(REPLICA_DIFFERENCE_FIELDS))),
    ]
)
# what makes a records row unique: a record's offset is unique in its partition of one log directory
ROW_IDENTITY = ("log_dir", "topic", "partition", "offset", "action")


class LedgerError(KafkaLogError):
    """A secret or ledger table that cannot be used."""


def one_line(err: Exception) -> str:
    """`err` as one line: its type and first line (deltalake's errors carry a Rust backtrace below it
    when RUST_BACKTRACE is set)."""
    return f"{type(err).__name__}: {next(iter(str(err).strip().splitlines()), '')}"


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
    """Add the rows not in the ledger yet (by ROW_IDENTITY); creates the table when there is none.
    Returns how many rows were added."""
    return _merge(ledger, rows, ROW_IDENTITY, "the ledger")


def _merge(path: str, rows: pa.Table, identity: Sequence[str], what: str) -> int:
    """Insert into the Delta table at `path` the rows of `rows` whose `identity` it does not hold yet
    (the table is created when there is none; a former version's gains the columns added since);
    returns how many were inserted."""
    try:
        if not delta.exists(path, "the purge ledger"):
            delta.write(path, rows, append=True)
            return rows.num_rows
        if rows.num_rows == 0:
            return 0
        return delta.merge(path, rows, identity, update=False, add_columns=True)
    except KafkaLogError:  # deltalake missing
        raise
    except Exception as err:  # deltalake's own errors (schema mismatch, storage): name the table
        raise LedgerError(f"cannot write {what}: {one_line(err)}", file=path) from err


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


# one rewrite of one segment of one copy: the same source bytes rewritten into the same bytes
SEGMENT_IDENTITY = ("log_dir", "topic", "partition", "base_offset", "sha256_before", "sha256_after")


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


def write_segments(ledger: str, rows: pa.Table) -> int:
    """Add `rows` (SEGMENTS_SCHEMA) to the segments table next to the ledger, but those it holds
    already (SEGMENT_IDENTITY): a rerun that stages the same rewrite of the same segment again (after
    a run interrupted before its swap) records it once, under the run that first staged it. Returns
    how many rows were added."""
    return _merge(segments_path(ledger), rows, SEGMENT_IDENTITY, "the segments table")


def read_ledger_table(path: str, columns: list[str] | None = None) -> pa.Table | None:
    """The Delta table at `path` (only `columns`, those of them it has), None when there is none: a
    ledger written before a table existed has no such table."""
    try:
        if not delta.exists(path, "the purge ledger"):
            return None
        return delta.read(path, columns, "the purge ledger")
    except KafkaLogError:  # deltalake missing
        raise
    except Exception as err:
        raise LedgerError(f"cannot read the ledger: {one_line(err)}", file=path) from err


# -- before a purge writes ------------------------------------------------------------------------------


def ledger_tables(ledger: str) -> list[tuple[str, str, pa.Schema]]:
    """Every table of a ledger: (path, what it is, the schema kafkalog writes there)."""
    return [
        (ledger, "the ledger", RECORDS_SCHEMA),
        (runs_path(ledger), "the run table", RUNS_SCHEMA),
        (segments_path(ledger), "the segments table", SEGMENTS_SCHEMA),
        (tables_path(ledger), "the tables table", TABLES_SCHEMA),
    ]


def check_ledger(
    ledger: str, log_dirs: Sequence[str], output: str | None = None, remote_storage: str | None = None
) -> None:
    """Refuse, before any copy is touched, a ledger whose tables lie in a directory the purge reads or
    rewrites (the log dirs, the output, the remote storage) or could not all be written
    (`check_ledger_writable`): a purge that cannot record what it did does nothing."""
    for path, what, _ in ledger_tables(ledger):
        for d in [*log_dirs, *filter(None, [output, remote_storage])]:
            check_outside(d, path, what)
    check_ledger_writable(ledger)


def check_ledger_writable(ledger: str) -> None:
    """Refuse (LedgerError, one line naming the table) a ledger one of whose tables a purge could not
    write, before the purge touches any copy: each must be a Delta table kafkalog's (its log readable,
    no column kafkalog does not write; a former version's lacks some), an empty directory, or absent
    with a parent kafkalog can create it in. Not a regular file, nor a directory of other files."""
    for path, what, schema in ledger_tables(ledger):
        fs, local = LogFileSystem.for_path(path)
        entry = fs.info(local)
        if entry is None:
            _check_creatable(fs, local, what)
        elif not entry.is_dir:
            raise LedgerError(
                f"{what} is a Delta table (a directory), but a file stands here; --ledger names another", file=local
            )
        elif fs.list_dir(local):
            _check_table(fs, path, what, schema)


def _check_creatable(fs: LogFileSystem, path: str, what: str) -> None:
    """A local path kafkalog can create `what` at: its nearest existing ancestor is a writable
    directory. (An object store creates any path; it tells only when written to.)"""
    if not fs.is_local:
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise LedgerError(f"cannot create {what} at {path}: a file stands in its path", file=parent)
    fs.ensure_writable(parent)


def _check_table(fs: LogFileSystem, path: str, what: str, schema: pa.Schema) -> None:
    """The non-empty directory at `path` is a Delta table of `schema`'s columns (or fewer), readable and writable."""
    local = LogFileSystem.for_path(path)[1]
    if not fs.is_dir(fs.join(local, "_delta_log")):
        raise LedgerError(
            f"{what} is not a Delta table: a directory of other files stands here; --ledger names another", file=local
        )
    try:
        columns = set(delta.schema(path, "the purge ledger").names)
    except KafkaLogError:  # deltalake missing
        raise
    except Exception as err:  # a damaged or foreign _delta_log
        raise LedgerError(f"cannot read {what}: {one_line(err)}", file=local) from err
    foreign = sorted(columns - set(schema.names))
    if foreign:
        raise LedgerError(
            f"{what} is a Delta table kafkalog did not write (column {foreign[0]}); --ledger names another", file=local
        )
    for d in (local, fs.join(local, "_delta_log")):
        fs.ensure_writable(d)


def unfinished_runs(ledger: str, log_dirs: Sequence[str]) -> list[str]:
    """The runs that wrote ledger rows (records or segments) for any of `log_dirs` (as the ledger names
    them, `log_dir_identity`) but no run row: runs interrupted after their ledger step, whose purge a
    later run over the same log dirs completes (operations/purge.py records it as `resumes`)."""
    import pyarrow.compute as pc

    runs = read_ledger_table(runs_path(ledger), ["run_id"])
    finished = set() if runs is None else set(runs.column("run_id").to_pylist())
    found: set = set()
    for path in (ledger, segments_path(ledger)):
        table = read_ledger_table(path, ["run_id", "log_dir"])
        if table is not None and "log_dir" in table.column_names:
            mine = table.filter(pc.is_in(table.column("log_dir"), pa.array(list(log_dirs), pa.string())))
            found.update(pc.unique(mine.column("run_id")).to_pylist())
    return sorted(found - finished - {None})


# -- the tables a purge erased from (`purge --table`, storage/tables/erase.py) --------------------------

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
    `rows_removed`, `files_written`, `files_deleted`). Appended: a rerun's row says what the rerun did
    (a table a killed run finished erasing is erased again with no row removed)."""
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
