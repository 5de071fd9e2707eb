"""`kafkalog purge` and `kafkalog verify-purge`."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from .options import (
    add_config_options,
    add_input,
    add_log_dir_options,
    add_quiet,
    config_resolver,
    now_of,
    spark_session,
)
from .output import EXIT_OK, EXIT_PROBLEMS, save_report, text_table


def _add_purge(commands) -> None:
    from ..operations.purge import DEFAULT_REASON, KEY_FORMATS

    p = commands.add_parser(
        "purge",
        help="remove every record of given keys from every topic, offsets preserved, "
        "with an audit ledger that stores no key",
    )
    add_log_dir_options(p, now_help="the clock", rewrites=True, spark=True, several=True)
    add_input(
        p,
        "--keys",
        kind="table",
        required=True,
        metavar="FILE",
        help="the keys: a text file, one key per line (UTF-8, or "
        "hex:..., base64:...), or a Parquet, CSV or Delta table with a `key` column",
    )
    p.add_argument("--keys-format", choices=KEY_FORMATS, help="how to read --keys (default: from the path)")
    p.add_argument(
        "--where",
        metavar="SQL",
        help="also purge the records this Spark SQL expression over the records "
        "view selects (key, value, headers, topic, partition, offset, ...)",
    )
    p.add_argument(
        "--tombstone",
        action="store_true",
        help="in compacted topics, keep the latest record of each key "
        "as a tombstone, which compaction removes after delete.retention.ms",
    )
    p.add_argument(
        "--ledger",
        metavar="PATH",
        help="the Delta table of purged records (required unless --dry-run); the run table is PATH_runs",
    )
    add_input(
        p,
        "--secret-file",
        metavar="FILE",
        help="the secret of the key fingerprints (default: the environment variable KAFKALOG_PURGE_SECRET)",
    )
    p.add_argument("--reason", default=DEFAULT_REASON, help="the ledger's reason for keys without their own")
    add_input(
        p,
        "--metadata",
        kind="dir",
        metavar="DIR",
        help="a KRaft metadata log (a controller's log dir, or its __cluster_metadata-0; default: the one in "
        "LOG_DIR): refuse to purge when a replica it names of a purged partition is not given",
    )
    p.add_argument(
        "--allow-missing-replicas",
        action="store_true",
        help="purge the replicas given and record the missing ones in the run table as not purged",
    )
    add_input(
        p,
        "--remote-storage-dir",
        kind="dir",
        metavar="DIR",
        help="tiered storage: the LocalTieredStorage directory (path or URI) whose remote segments of the "
        "purged partitions are purged too, in place",
    )
    p.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=[],
        metavar="PATH",
        help="a Delta, Iceberg or Parquet table `kafkalog export` wrote (repeatable): the rows of the purged "
        "records and keys are erased from it too, with every file that held them. WARNING: this deletes the "
        "table's older versions (Delta commits and checkpoints before the purge, Iceberg snapshots): time travel "
        "to before the purge is gone. Try --dry-run first",
    )
    p.add_argument(
        "--key-column",
        metavar="NAME",
        help="the key column of a --table no export wrote (binary, or string: the key's UTF-8 text); without it "
        "such a table is refused",
    )
    add_config_options(p)
    add_quiet(p)
    p.set_defaults(run=_run_purge)


def _run_purge(args) -> int:
    from ..operations.purge import load_secret, log_dirs_of, plan_purge, run_purge
    from ..storage.logdir import LogDir

    secret = None if args.dry_run else load_secret(args.secret_file)  # before Spark starts: fail fast
    resolver = config_resolver(args)
    log_dirs = log_dirs_of(args.log_dir, args.output)
    # the plan is the check before Spark starts: a mistake costs no JVM start, and nothing below lists again
    plan = plan_purge(
        [LogDir.open(d) for d in log_dirs],
        args.keys,
        keys_format=args.keys_format,
        topics=args.topics,
        where=args.where,
        tombstone=args.tombstone,
        ledger=args.ledger,
        secret=secret,
        config=resolver,
        now=args.now,
        reason=args.reason,
        output=args.output,
        dry_run=args.dry_run,
        follow_symlinks=args.follow_symlinks,
        metadata=args.metadata,
        allow_missing_replicas=args.allow_missing_replicas,
        remote_storage=args.remote_storage_dir,
        tables=args.tables,
        key_column=args.key_column,
    )
    plan = replace(plan, now=now_of(args))  # said on stderr once the checks pass, as before Spark starts
    result = run_purge(spark_session(args), plan)
    print(result.summary())
    if result.partitions:
        print()
        print(text_table(result.partitions, list(result.partitions[0])))
    if result.tables:
        print()
        print(text_table(result.tables, ["table", "format", "topic", "rowsRemoved"]))
    save_report(args.report, result.to_dict())
    return EXIT_OK


def _add_verify_purge(commands) -> None:
    p = commands.add_parser(
        "verify-purge",
        help="check that no key a purge ledger lists is in any copy as the files are now, by the keys' "
        "fingerprints (no key list); exit 1 naming the copy, partition and offset of each one found",
    )
    p.add_argument(
        "log_dirs", nargs="+", metavar="LOG_DIR", help="every copy: the log dirs of every broker, JBOD dirs included"
    )
    _add_ledger_options(p)
    p.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=[],
        metavar="PATH",
        help="also check every file under this table (data, Delta log, Iceberg metadata; repeatable) for the "
        "purged keys' fingerprints",
    )
    p.add_argument("--json", action="store_true", help="print the full check as JSON")
    p.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    p.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    add_quiet(p)
    p.set_defaults(run=_run_verify_purge)


def _add_ledger_options(
    p, required: bool = True, run_help: str = "only this run's keys (default: every run's)"
) -> None:
    add_input(p, "--ledger", kind="dir", required=required, metavar="PATH", help="the purge ledger (Delta table)")
    add_input(
        p,
        "--secret-file",
        metavar="FILE",
        help="the secret of the key fingerprints (default: the environment variable KAFKALOG_PURGE_SECRET)",
    )
    p.add_argument("--run", dest="run_id", metavar="RUN_ID", help=run_help)


def _run_verify_purge(args) -> int:
    check = _verify(args, args.log_dirs)
    if args.json:
        print(json.dumps(check.to_dict(), indent=2))
        return EXIT_OK if check.clean else EXIT_PROBLEMS
    print(check.summary())
    if check.partitions:
        print()
        print(text_table(check.partitions, list(check.partitions[0])))
    for f in check.found:
        print(
            f"found: {f['log_dir']} (broker {f['broker_id']}) {f['topic']}-{f['partition']} offset {f['offset']}: "
            f"a record of purged key {f['fingerprint'][:16]}...",
            file=sys.stderr,
        )
    for t in check.tables:
        for file in t["files_found"]:
            print(f"found: {t['table']}: {file} holds a purged key", file=sys.stderr)
    return EXIT_OK if check.clean else EXIT_PROBLEMS


def _verify(args, log_dirs):
    """verify_purge over `log_dirs`: its plan (the secret read, the directories opened, the ledger
    read) made before Spark starts, so that a typo costs no JVM start."""
    from ..operations.purge import load_secret
    from ..operations.purge_verify import plan_verify_purge, run_verify_purge

    secret = load_secret(args.secret_file)
    tables = getattr(args, "tables", [])
    plan = plan_verify_purge(log_dirs, args.ledger, secret, run_id=args.run_id, tables=tables)
    return run_verify_purge(spark_session(args), plan)
