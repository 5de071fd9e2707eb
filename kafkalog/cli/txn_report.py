"""`kafkalog txn-report`."""

from __future__ import annotations

import json

from .options import add_log_dir_options, now_of
from .output import EXIT_OK, EXIT_PROBLEMS, text_table


def _add_txn_report(commands) -> None:
    from ..operations.txn_report import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

    p = commands.add_parser(
        "txn-report",
        help="open, hanging, empty and aborted transactions and the last stable "
        "offset, per partition; exit 1 when a transaction hangs",
    )
    add_log_dir_options(p, now_help="the clock for transaction ages", rewrites=False, spark=False)
    p.add_argument(
        "--transaction-max-timeout-ms",
        type=int,
        default=DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
        metavar="MS",
        help="an open transaction idle longer than this hangs: the broker's "
        "transaction.max.timeout.ms (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(run=_run_txn_report)


def _run_txn_report(args) -> int:
    from ..operations.txn_report import plan_txn_report, run_txn_report
    from ..storage.logdir import LogDir

    now_ms = now_of(args)  # said before the log dir is read
    plan = plan_txn_report(
        LogDir.open(args.log_dir),
        now_ms=now_ms,
        topics=args.topics,
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
    )
    report = run_txn_report(plan)
    print(json.dumps(report.to_dict(), indent=2) if args.json else _txn_tables(report))
    return EXIT_PROBLEMS if report.hanging else EXIT_OK


def _txn_tables(report) -> str:
    """The partitions with transactions, then their open, aborted and empty transactions."""
    from ..operations.clock import stamp

    parts = [p for p in report.partitions if p.has_transactions]
    lines = [
        f"{len(parts)} partitions with transactions ({len(report.partitions) - len(parts)} without), "
        f"{len(report.hanging)} hanging (open, idle > {report.transaction_max_timeout_ms} ms) at "
        f"now={stamp(report.now_ms)}"
    ]
    if parts:
        rows = [p.summary() for p in parts]
        lines += ["", text_table(rows, list(rows[0]))]
    for kind in ("open", "aborted", "empty"):
        txns = [{"topic": p.topic, "partition": p.partition, **t.to_dict()} for p in parts for t in getattr(p, kind)]
        if txns:
            lines += ["", f"{kind} transactions:", text_table(txns, list(txns[0]))]
    return "\n".join(lines)
