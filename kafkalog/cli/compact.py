"""`kafkalog plan` and `kafkalog compact`."""

from __future__ import annotations

import sys
from collections import Counter

from .options import (
    add_config_options,
    add_log_dir_options,
    add_quiet,
    check_before_spark,
    config_resolver,
    now_of,
    spark_session,
)
from .output import EXIT_OK, EXIT_PROBLEMS, save_report, text_table


def _add_compact(commands, name: str, help_text: str) -> None:
    p = commands.add_parser(name, help=help_text)
    add_log_dir_options(p, now_help="the clock of every time rule", rewrites=name == "compact", spark=True)
    p.add_argument(
        "--force", action="store_true", help="clean every partition with a cleanable segment, whatever its dirty ratio"
    )
    if name == "plan":
        p.add_argument("--report", metavar="FILE", help="also write the plan and the per-reason report as JSON")
    p.add_argument(
        "--legacy-as-v2",
        action="store_true",
        help="write the legacy (v0/v1) batches of the cleaned segments as v2, as Kafka 4.x's cleaner does "
        "(default: keep their format, as Kafka 3.x's cleaner did)",
    )
    add_config_options(p)
    add_quiet(p)
    p.set_defaults(run=_run_compact)


def _run_compact(args) -> int:
    from .. import tuning
    from ..operations.clock import stamp
    from ..operations.compact import plan_compact, run_compact

    dry_run = args.command == "plan" or args.dry_run
    resolver = config_resolver(args)
    checked = check_before_spark(args, resolver)  # a mistake costs no Spark start; checked once
    plan = plan_compact(
        checked,
        resolver,
        now_of(args),
        force=args.force,
        topics=args.topics,
        dry_run=dry_run,
        output=getattr(args, "output", None),
        legacy_as_v2=args.legacy_as_v2,
        follow_symlinks=getattr(args, "follow_symlinks", False),
    )
    now = plan.now
    # the copy for --output is made while Spark starts; a pass without a compacted topic plans
    # nothing and needs no Spark (compact says why)
    # its work is in Python tasks (the one-task and range paths): the JVM compiles with C1 alone
    spark = (
        spark_session(args, background=True, jvm_options=tuning.PYTHON_TASKS_JVM_OPTIONS) if plan.compacted else None
    )
    result = run_compact(spark, plan)
    partitions = result.plan.partitions()
    chosen = [p for p in partitions if p["chosen"]]
    print(f"{len(chosen)} of {len(partitions)} compacted partitions chosen at now={stamp(now)}")
    if chosen:
        print(
            text_table(
                chosen,
                [
                    "topic",
                    "partition",
                    "dirty_ratio",
                    "first_dirty_offset",
                    "first_uncleanable_offset",
                    "max_compaction_delay_secs",
                    "compaction_strategy",
                    "reason",
                ],
            )
        )
    skipped = Counter(p["reason"] for p in partitions if not p["chosen"])
    for reason, count in skipped.most_common():
        print(f"not chosen ×{count}: {reason}")
    for rows in (result.report, result.segments):
        if rows:
            print()
            print(text_table(rows, list(rows[0])))
    if result.dry_run and result.report:
        print("bytes_removed is an estimate: a dry run writes nothing (a pass reports what the .log files lose)")
    save_report(args.report, result.to_dict())
    for (topic, partition), err in sorted(result.plan.uncleanable.items()):
        print(
            f"kafkalog {args.command}: {topic}-{partition} is uncleanable and was left as it is: {err}", file=sys.stderr
        )
    return EXIT_PROBLEMS if result.plan.uncleanable else EXIT_OK
