"""`kafkalog repartition`."""

from __future__ import annotations

from .options import add_config_options, add_quiet, config_resolver, spark_session
from .output import EXIT_OK, save_report


def _add_repartition(commands) -> None:
    p = commands.add_parser(
        "repartition",
        help="move a topic's committed records into N partitions as Kafka's partitioner places their keys, "
        "written as a log dir a broker loads, with an offset map and the groups' new offsets",
    )
    p.add_argument("log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory holding every partition of --topic")
    p.add_argument("--topic", required=True, help="the topic to repartition")
    p.add_argument("--partitions", required=True, type=int, metavar="N", help="the new number of partitions")
    p.add_argument(
        "--output",
        required=True,
        metavar="OUT_LOG_DIR",
        help="the log dir to write the new partitions into: a new directory, or a stopped broker's log dir "
        "(then the target topic's partitions there must be empty, as kafka-topics --create leaves them); it "
        "may be LOG_DIR itself when --to-topic names another topic",
    )
    p.add_argument("--to-topic", metavar="NAME", help="the new partitions' topic (default: --topic)")
    ids = p.add_mutually_exclusive_group()
    ids.add_argument("--topic-id", metavar="ID", help="the target topic's id, as kafka-topics --describe shows it")
    ids.add_argument(
        "--metadata",
        metavar="DIR",
        help="look the target topic's id up by name in this KRaft metadata log (a log dir holding "
        "__cluster_metadata-0, or that directory); default: the partition.metadata of the target's "
        "partitions in --output",
    )
    p.add_argument(
        "--offset-map",
        metavar="PATH",
        help="write (sourcePartition, sourceOffset) -> (partition, offset) of every record there, as Parquet",
    )
    p.add_argument(
        "--consumer-offsets",
        metavar="FILE",
        help="the groups' committed offsets from a CSV, JSON, Parquet or Delta table of group,topic,partition,"
        "offset (default: LOG_DIR's own __consumer_offsets)",
    )
    p.add_argument(
        "--group-offsets",
        metavar="DIR",
        help="write each group's new offsets there, one <group>.csv as kafka-consumer-groups.sh "
        "--reset-offsets --from-file takes it",
    )
    p.add_argument(
        "--stop-at-last-stable",
        action="store_true",
        help="leave out, with a warning, the records past a partition's last stable offset (an open "
        "transaction) instead of refusing to run",
    )
    p.add_argument(
        "--compact",
        action="store_true",
        help="compact in the same pass as Kafka's cleaner would the new partitions: each key's record of highest "
        "precedence under the target's compaction.strategy, keyless records dropped, tombstones kept until their "
        "delete horizon (delete.retention.ms)",
    )
    p.add_argument(
        "--now",
        type=int,
        metavar="EPOCH_MS",
        help="with --compact: the time tombstones' delete horizons are read against (default: the wall clock)",
    )
    p.add_argument("--dry-run", action="store_true", help="check and plan only; write nothing")
    p.add_argument("--report", metavar="FILE", help="also write what the run did as JSON")
    add_config_options(p)
    p.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    p.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    add_quiet(p)
    p.set_defaults(run=_run_repartition)


def _run_repartition(args) -> int:
    from .. import tuning
    from ..errors import ConfigError

    if args.now is not None and not args.compact:
        raise ConfigError("--now is read by --compact only: give --compact, or leave --now out")
    # Spark starts while the command imports what it needs and plans: a plan that fails (every check
    # of the source and the target) ends the command at once, without waiting for Spark; a dry run
    # starts none
    spark = None if args.dry_run else spark_session(args, background=True, jvm_options=tuning.PYTHON_TASKS_JVM_OPTIONS)
    from ..operations.repartition import plan_repartition, run_repartition

    plan = plan_repartition(
        args.log_dir,
        args.topic,
        args.partitions,
        args.output,
        to_topic=args.to_topic,
        topic_id=args.topic_id,
        metadata=args.metadata,
        offset_map=args.offset_map,
        consumer_offsets=args.consumer_offsets,
        group_offsets=args.group_offsets,
        stop_at_last_stable=args.stop_at_last_stable,
        config=config_resolver(args),
        dry_run=args.dry_run,
        compact=args.compact,
        now=args.now,
    )
    if args.dry_run:
        print(plan.summary() + "\n  dry run: nothing written")
        return EXIT_OK
    result = run_repartition(spark, plan)
    print(result.summary())
    save_report(args.report, result.to_dict())
    return EXIT_OK
