"""`kafkalog validate`."""

from __future__ import annotations

from .options import add_config_options, add_quiet, config_resolver, running_session


def _add_validate(commands) -> None:
    p = commands.add_parser("validate", help="check CRCs, structure, offsets, indexes, snapshots and checkpoints")
    p.add_argument("paths", nargs="+", metavar="PATH", help="log dir, partition dir, or segment/index/snapshot file")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--shallow", action="store_true", help="headers and CRCs only: do not decode records")
    p.add_argument(
        "--fail-on",
        choices=["error", "warning"],
        default="warning",
        help="the least severe finding that makes the exit code 1 (default: warning)",
    )
    p.add_argument(
        "--findings",
        metavar="PATH",
        help="also write the findings as a table, one row per finding, replacing what is there (a path or URI)",
    )
    p.add_argument(
        "--findings-format",
        choices=["parquet", "delta"],
        default="parquet",
        help="--findings as a Parquet file or a Delta table (default: parquet)",
    )
    add_config_options(p)
    add_quiet(p)
    p.set_defaults(plan=_plan_validate, run=_run_validate)


def _plan_validate(args):
    from ..operations.validate import plan_validate

    return plan_validate(
        args.paths,
        index_interval_bytes=config_resolver(args).values_of("index.interval.bytes"),
        deep=not args.shallow,
        fail_on=args.fail_on,
    )


def _run_validate(args) -> int:
    from ..operations.validate import run_validate, write_findings

    report = run_validate(running_session(), args.planned)
    print(report.to_json() if args.json else report.summary())
    if args.findings:
        write_findings(report, args.findings, args.findings_format)
    return report.exit_code
