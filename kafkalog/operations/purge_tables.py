"""A purge reaches the tables kafkalog exported (`kafkalog purge --table PATH`): the rows of the purged
records, and of the purged keys, leave each table and every file under it, with the purge's own
decision (operations/purge.py) and evidence in the ledger's tables table (`<ledger>_tables`).

The table operations are storage/tables/erase.py's; here, when they run in a purge:

1. Check (before any lock is taken or file written): each table is one kafkalog can erase from,
   and the topic its export note names is one the purge purges (`check_tables`, `check_topics`).
2. Erase (after the ledger's records rows, before the log's swap): the tables, one after the other.
   Done before the swap, so that a crash anywhere leaves the log's records for the rerun to decide
   again: a rerun erases what a table still holds and finishes the clean-up.
3. Check again: no file under a table holds a purged key (`PurgeVerificationError` otherwise).

A table's time travel to a version before the purge is gone: those versions' files and commits are
deleted (docs/operations.md, "Purging exported tables").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..errors import ConfigError, KafkaLogError
from ..storage.ledger import write_tables
from ..storage.swap import FaultHook, no_fault
from ..storage.tables.erase import TableTarget, check_table, count_rows, erase, stored_values, table_dir


class TableVerificationError(KafkaLogError):
    """A file under a table still holds a purged key after the erase."""


TIME_TRAVEL_WARNING = (
    "time travel to a version of these tables before the purge is gone: their older files and commits are deleted"
)


def check_tables(paths: Sequence[str], key_column: str | None = None, output: str | None = None) -> list[TableTarget]:
    """Every table of `paths` checked (storage/tables/erase.py's `check_table`), none given twice, and
    none with `output` (a purged copy of the log written elsewhere)."""
    if paths and output is not None:
        raise ConfigError(
            "--output purges a copy of the log dir, but the tables would be erased from in place: "
            "purge the log dir in place, or leave the tables out"
        )
    if key_column is not None and not paths:
        raise ConfigError("--key-column names the key column of a --table: give the table too")
    targets: list[TableTarget] = []
    for path in paths:
        target = check_table(path, key_column)
        if any(t.path == target.path for t in targets):
            raise ConfigError(f"table {path} is given twice")
        targets.append(target)
    return targets


def check_topics(targets: Sequence[TableTarget], log_dirs: Sequence[str], topics) -> None:
    """Refuse a table whose export note names a topic the purge does not purge (`topics`, else every
    topic but internal ones of `log_dirs`): its rows would stay."""
    from ..storage.logdir import LogDir

    if not any(t.topic is not None for t in targets):
        return
    if topics is not None:
        purged = {topics} if isinstance(topics, str) else set(topics)
    else:
        purged = {t for d in log_dirs for t, _ in LogDir.open(d).topic_partitions if not t.startswith("__")}
    for t in targets:
        if t.topic is not None and t.topic not in purged:
            raise ConfigError(
                f"table {t.path} holds topic {t.topic!r}, which this purge does not purge: purge that topic too, "
                "or leave the table out"
            )


def purged_offsets(decided, targets: Sequence[TableTarget]) -> dict[str, dict[int, list[int]]]:
    """{topic: {partition: offsets}} of the records the purge decided to change, in the tables' topics
    (every copy's decision is the same: the offsets are taken once)."""
    from pyspark.sql import functions as F

    topics = sorted({t.topic for t in targets if t.topic is not None})
    if not topics:
        return {}
    rows = (
        decided.where(F.col("action").isNotNull() & F.col("topic").isin(topics))
        .select("topic", "partition", "offset")
        .distinct()
        .collect()
    )
    offsets: dict = defaultdict(lambda: defaultdict(list))
    for r in rows:
        offsets[r.topic][r.partition].append(r.offset)
    return {t: dict(p) for t, p in offsets.items()}


def purged_keys(key_df) -> list[bytes]:
    """The purge's keys (also those no record of the log has any more, whose rows a table may hold)."""
    return sorted({bytes(r.key) for r in key_df.select("key").collect() if r.key is not None})


def would_erase(targets: Sequence[TableTarget], offsets: dict, keys: list[bytes]) -> list[dict]:
    """A dry run's rows: how many rows each table would lose."""
    return [
        {
            "table": t.path,
            "format": t.format,
            "topic": t.topic,
            "rowsRemoved": count_rows(t, offsets.get(t.topic, {}), keys),
        }
        for t in targets
    ]


def erase_tables(
    targets: Sequence[TableTarget],
    offsets: dict,
    keys: list[bytes],
    *,
    ledger: str,
    secret: bytes,
    run_id: str,
    purged_at_ms: int,
    fault: FaultHook | None = None,
) -> list[dict]:
    """Erase from every table (storage/tables/erase.py's `erase`), each recorded in the ledger's tables
    table once it is done, then checked: no file under it holds a purged key."""
    done = []
    for t in targets:
        erased = erase(t, offsets.get(t.topic, {}), keys, fault or no_fault)
        write_tables(
            ledger,
            [
                {
                    "table_path": erased.path,
                    "format": erased.format,
                    "topic": erased.topic,
                    "rows_removed": erased.rows_removed,
                    "files_written": erased.written,
                    "files_deleted": erased.deleted,
                }
            ],
            run_id=run_id,
            purged_at_ms=purged_at_ms,
            secret=secret,
        )
        left = files_holding(t.path, keys)
        if left:
            raise TableVerificationError(
                f"after the erase {len(left)} files under the table still hold a purged key, the first {left[0]}",
                file=t.path,
            )
        done.append(erased.to_dict())
    return done


def files_holding(path: str, keys: Sequence[bytes]) -> list[str]:
    """The files under the table at `path` that hold one of `keys` as a value (storage/tables/erase.py's
    `stored_values`: data, statistics, bounds)."""
    wanted = set(keys)
    return sorted({file for file, value in stored_values(path) if value in wanted})


def verify_tables(paths: Sequence[str], scopes: dict, secret: bytes) -> list[dict]:
    """verify-purge's check of tables: per table, the files under it (data, log, metadata) and the
    values they hold, and each file holding a value whose fingerprint under `secret` is a key the
    ledger lists as purged from the table's topic (`scopes`: purge_verify's, fingerprint -> (every
    topic?, the topics named); a table without an export note: from any topic). The same test as the
    log's, value by value."""
    from ..storage.ledger import fingerprint
    from ..storage.tables import detect_format, export_note

    rows = []
    for path in paths:
        root = table_dir(path)
        noted = export_note(root, detect_format(root))
        topic = None if noted is None else noted[0].get("topic")
        wanted = {fp for fp, (every, listed) in scopes.items() if topic is None or every or topic in listed}
        files, values, found = set(), 0, set()
        for file, value in stored_values(root):
            files.add(file)
            values += 1
            if fingerprint(secret, value) in wanted:
                found.add(file)
        rows.append(
            {"table": path, "files": len(files), "values": values, "found": len(found), "files_found": sorted(found)}
        )
    return rows
