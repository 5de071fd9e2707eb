"""`kafkalog retain`."""

from __future__ import annotations

import json

from .options import (
    add_config_options,
    add_input,
    add_log_dir_options,
    add_quiet,
    check_before_spark,
    config_resolver,
    now_of,
)
from .output import EXIT_OK, EXIT_PROBLEMS, save_report


def _add_retain(commands) -> None:
    p = commands.add_parser(
        "retain", help="time, size and log-start-offset retention, deleteRecords, consumed retention (KIP-68)"
    )
    add_log_dir_options(p, now_help="the clock for time retention", rewrites=True, spark=False)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a summary")
    add_input(
        p,
        "--delete-records",
        metavar="FILE",
        help="kafka-delete-records.sh's offset JSON file (offset -1: the high watermark)",
    )
    p.add_argument(
        "--truncate-below-start",
        action="store_true",
        help="also remove the records below the log start offset from the segment that holds it (offsets preserved)",
    )
    add_input(
        p,
        "--committed-offsets",
        kind="table",
        metavar="FILE",
        help="committed offsets (CSV, JSON, Parquet or Delta: group, topic, partition, offset) for "
        "consumed retention; default: the log dir's own __consumer_offsets",
    )
    p.add_argument(
        "--include-groups",
        action="append",
        default=[],
        metavar="PATTERNS",
        help="only these consumer groups (comma-separated fnmatch patterns)",
    )
    p.add_argument(
        "--exclude-groups",
        action="append",
        default=[],
        metavar="PATTERNS",
        help="ignore these consumer groups (comma-separated fnmatch patterns)",
    )
    p.add_argument(
        "--missing-high-watermark",
        choices=["log-start", "log-end"],
        default="log-start",
        help="without a replication-offset-checkpoint entry: Kafka's rule (nothing is deleted) or "
        "trust the log end offset",
    )
    add_input(
        p,
        "--remote-storage-dir",
        kind="dir",
        metavar="DIR",
        help="tiered storage: the LocalTieredStorage directory of remote segments (path or URI), which "
        "with the log dir's __remote_log_metadata tells which local segments are uploaded",
    )
    add_config_options(p)
    add_quiet(p)
    p.set_defaults(run=_run_retain)


def _run_retain(args) -> int:
    from ..operations.retain import plan_retain, run_retain

    resolver = config_resolver(args)
    plan = plan_retain(
        check_before_spark(args, resolver).opened,  # the log dir opened once, and checked
        uri=args.log_dir,
        config=resolver,
        now_ms=now_of(args),
        topics=args.topics,
        delete_records=args.delete_records,
        truncate_below_start=args.truncate_below_start,
        committed_offsets=args.committed_offsets,
        include_groups=args.include_groups,
        exclude_groups=args.exclude_groups,
        output=args.output,
        dry_run=args.dry_run,
        missing_high_watermark=args.missing_high_watermark,
        remote_storage=args.remote_storage_dir,
        follow_symlinks=args.follow_symlinks,
    )
    report = run_retain(plan)
    save_report(args.report, report.to_dict())
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return EXIT_PROBLEMS if report.delete_records_failed else EXIT_OK
