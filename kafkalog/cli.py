"""The `kafkalog` command line: parse arguments, call the library, print results. No logic of its own."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter

from . import __version__
from .errors import ConfigError, KafkaLogError
from .topics import CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC

EXIT_OK, EXIT_PROBLEMS, EXIT_FAILED = 0, 1, 2
ABOUT = """Compact, retain, purge and verify Kafka log directories outside a running broker,
with Kafka's own semantics, on Spark (local mode by default)."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # progress of long runs goes to stderr, so that stdout stays the result
    logging.basicConfig(format="%(name)s: %(message)s", stream=sys.stderr)
    quiet = getattr(args, "quiet", False)
    # ours only: py4j's INFO lines are not news; with --quiet, warnings and errors only
    logging.getLogger("kafkalog").setLevel(logging.WARNING if quiet else logging.INFO)
    from .operations import progress

    progress.set_mode("off" if quiet else "auto")
    if not hasattr(args, "run"):
        parser.print_help()
        return EXIT_FAILED
    try:
        return args.run(args)
    except KafkaLogError as err:
        print(f"kafkalog {args.command}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `kafkalog dump ... | head` is normal use
        sys.stderr.close()
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalog", description=ABOUT, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"kafkalog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_generate(commands)
    _add_dump(commands)
    _add_validate(commands)
    _add_compact(commands, "plan", "show which partitions compaction would clean, and what it would remove")
    _add_compact(commands, "compact", "compact with Kafka's semantics: one cleaning pass per chosen partition")
    _add_retain(commands)
    _add_purge(commands)
    _add_verify_purge(commands)
    _add_evidence(commands)
    _add_txn_report(commands)
    _add_export(commands)
    _add_listings(commands)
    for name, sub in commands.choices.items():
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
        sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    return parser


# Each command's --help ends with these: real command lines, on the README's generated sample.
EXAMPLES = {
    "generate": [
        "kafkalog generate sample --preset demo --config-out sample.properties",
        "kafkalog generate small --preset small --seed 7 --manifest small.json",
    ],
    "dump": [
        "kafkalog dump sample/customers-0/00000000000000000000.log --records | head",
        "kafkalog dump sample/__consumer_offsets-0 --offsets-decoder",
        "kafkalog dump sample/payments-0 --txn-index --snapshot",
        "kafkalog dump /var/lib/kafka/data/__cluster_metadata-0 --records --cluster-metadata-decoder",
    ],
    "validate": [
        "kafkalog validate sample --config-file sample.properties",
        "kafkalog validate /var/lib/kafka/data --fail-on error --json > report.json",
    ],
    "plan": [
        "kafkalog plan sample --config-file sample.properties --now 1700100000000",
        "kafkalog plan sample --config cleanup.policy=compact --force --topic customers",
    ],
    "compact": [
        "kafkalog compact sample --config-file sample.properties --output compacted",
        "kafkalog compact /var/lib/kafka/data --config-file server.properties --report compact.json",
    ],
    "retain": [
        "kafkalog retain sample --config-file sample.properties --dry-run",
        "kafkalog retain sample --delete-records offsets.json --truncate-below-start --output retained",
    ],
    "purge": [
        "kafkalog purge sample --keys gdpr-keys.txt --ledger /audit/purges --secret-file secret --dry-run",
        "kafkalog purge sample --keys keys.parquet --ledger /audit/purges --secret-file secret --output purged",
    ],
    "verify-purge": [
        "kafkalog verify-purge /data/broker-1 /data/broker-2 /data/broker-3 --ledger /audit/purges --secret-file s",
        "kafkalog verify-purge purged --ledger /audit/purges --secret-file secret --run RUN_ID --json > check.json",
    ],
    "evidence": [
        "kafkalog evidence build --ledger /audit/purges --verify /data/broker-1 /data/broker-2 --secret-file secret "
        "--signing-key evidence.key --output evidence.json --markdown evidence.md",
        "kafkalog evidence verify evidence.json --public-key evidence.pub",
    ],
    "txn-report": ["kafkalog txn-report sample --now 1700100000000", "kafkalog txn-report /var/lib/kafka/data --json"],
    "log-dirs": [
        "kafkalog log-dirs /var/lib/kafka/data-1 /var/lib/kafka/data-2",
        "kafkalog log-dirs sample --topic orders",
    ],
    "get-offsets": [
        "kafkalog get-offsets sample",
        "kafkalog get-offsets sample --topic 'orders|payments' --time earliest",
        "kafkalog get-offsets sample --topic customers --partitions 0 --time 1700050000000",
    ],
    "configs": ["kafkalog configs sample --config-file sample.properties --topic customers"],
    "export": [
        "kafkalog export sample --topic customers --output customers.delta --value-format json",
        "kafkalog export sample --topic customers --output before-deploy --format parquet --as-of-time 1700050000000",
        "kafkalog export /var/lib/kafka/data --topic orders --output /lake/orders --incremental",
    ],
}


def _add_log_dir_options(p, *, now_help: str, rewrites: bool, spark: bool, several: bool = False) -> None:
    """LOG_DIR (with `several`, one or more), --topic, --now, and for the commands that rewrite
    segments --dry-run, --output and --report; --master for those that run on Spark."""
    if several:
        p.add_argument(
            "log_dir",
            metavar="LOG_DIR",
            nargs="+",
            help="Kafka log.dirs directories (paths or URIs): every broker's, JBOD dirs included, each "
            "copy of a partition purged alike in one run",
        )
    else:
        p.add_argument(
            "log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory (path or URI), not a partition directory"
        )
    p.add_argument(
        "--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic of LOG_DIR (repeatable)"
    )
    p.add_argument("--now", type=int, metavar="EPOCH_MS", help=f"{now_help} (default: the wall clock)")
    if rewrites:
        p.add_argument("--dry-run", action="store_true", help="plan and report only; write nothing")
        p.add_argument(
            "--output",
            metavar="DIR",
            help="write a complete new log directory there; LOG_DIR is "
            "untouched (default: in place, with Kafka's swap protocol)",
        )
        p.add_argument("--report", metavar="FILE", help="also write the report as JSON")
        p.add_argument(
            "--follow-symlinks",
            action="store_true",
            help="in place, rewrite a partition directory that is a symbolic link where it leads, as a "
            "broker would (default: refuse the run; --dry-run and plan name such links)",
        )
    if spark:
        p.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
        p.add_argument(
            "--verbose",
            action="store_true",
            help="show Spark's own error logs on stderr (default: in kafkalog-spark.log of the temp directory)",
        )


def _add_config_options(p) -> None:
    """Kafka's topic configuration names, as `kafka-configs` and server.properties use them."""
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic configuration for every topic, e.g. cleanup.policy=compact",
    )
    p.add_argument(
        "--topic-config",
        action="append",
        default=[],
        metavar="TOPIC:KEY=VALUE",
        help="a topic configuration for one topic",
    )
    p.add_argument(
        "--config-file",
        metavar="FILE",
        help="a broker's server.properties (broker names; topic names apply to every topic; "
        "topic.<TOPIC>.<name> overrides one topic), or the output of kafka-configs.sh --describe "
        "[--all] for topics and brokers: a topic's section fixes that topic's settings to the "
        "values listed, broker sections and broker-level synonyms are broker settings. Any "
        "name Kafka 4.x defines is accepted; an unknown name is a warning and ignored, as in Kafka "
        "(with --config or --topic-config, an error)",
    )
    p.add_argument(
        "--topic-config-dir",
        metavar="DIR",
        help="one <TOPIC>.properties per topic, holding that topic's overrides under topic config names "
        "(over --config-file, under --topic-config)",
    )


def _add_quiet(p) -> None:
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (bars on a terminal, log lines elsewhere); warnings and errors still print",
    )


def _resolver(args):
    from .operations.files import load_config

    return load_config(args.config_file, args.topic_config_dir, args.config, args.topic_config)


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
    _add_config_options(p)
    _add_quiet(p)
    p.set_defaults(run=_run_validate)


def _run_validate(args) -> int:
    from .operations.validate import validate_paths, write_findings

    report = validate_paths(
        args.paths,
        index_interval_bytes=_resolver(args).values_of("index.interval.bytes"),
        deep=not args.shallow,
        fail_on=args.fail_on,
        spark=_running_session(),
    )
    print(report.to_json() if args.json else report.summary())
    if args.findings:
        write_findings(report, args.findings, args.findings_format)
    return report.exit_code


def _add_generate(commands) -> None:
    from .operations.generate import PRESETS

    p = commands.add_parser("generate", help="write a realistic, byte-reproducible Kafka log directory")
    p.add_argument(
        "log_dir",
        metavar="LOG_DIR",
        help="where to write the log directory (must not exist, or be empty); a path or URI",
    )
    p.add_argument("--preset", default="demo", choices=sorted(PRESETS), help="what to generate (default demo)")
    p.add_argument("--spec", metavar="FILE", help="a JSON GeneratorSpec instead of a preset")
    p.add_argument("--seed", type=int, default=None, help="seed: the same seed gives identical output")
    p.add_argument("--records", type=int, help="records per partition, for every topic")
    p.add_argument("--offsets-partitions", type=int, help="partitions of __consumer_offsets")
    p.add_argument(
        "--config-out",
        metavar="FILE",
        help="also write the topics' configurations as a properties file for --config-file",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="also write the whole manifest as JSON (every partition's offsets, every committed offset)",
    )
    p.set_defaults(run=_run_generate)


def _run_generate(args) -> int:
    from .operations.generate import generate_log_dir

    summary = generate_log_dir(
        args.log_dir,
        preset_name=args.preset,
        spec_file=args.spec,
        seed=args.seed,
        records=args.records,
        offsets_partitions=args.offsets_partitions,
        config_out=args.config_out,
    )
    _write_report(args.manifest, summary.to_dict())
    print(summary.summary())
    for path, what in ((args.config_out, "the topics' configurations, for --config-file"), (args.manifest, "manifest")):
        if path:
            print(f"{what}: {path}")
    return EXIT_OK


def _add_dump(commands) -> None:
    p = commands.add_parser("dump", help="print batches (and records) as JSON Lines, like kafka-dump-log")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="log dir, partition dir, or segment/index/snapshot/checkpoint file"
    )
    p.add_argument(
        "--files",
        action="append",
        default=[],
        metavar="PATH[,PATH...]",
        help="more paths, comma-separated, as kafka-dump-log takes them",
    )
    p.add_argument("--records", action="store_true", help="also one object per record")
    for part in ("key", "value"):
        p.add_argument(
            f"--{part}-decoder",
            choices=("base64", "string", "hex", "json"),
            help=f"how a record's {part} is shown (default base64; kafka-dump-log's default is string; "
            "implies --records)",
        )
    for name, topic in (
        ("offsets", CONSUMER_OFFSETS_TOPIC),
        ("transaction-log", TRANSACTION_STATE_TOPIC),
        ("cluster-metadata", "__cluster_metadata (and KRaft snapshots)"),
        ("share-group-state", SHARE_GROUP_STATE_TOPIC),
        ("remote-log-metadata", "__remote_log_metadata (tiered storage)"),
    ):
        p.add_argument(
            f"--{name}-decoder",
            action="append_const",
            const=name,
            dest="decoders",
            default=[],
            help=f"decode {topic} records (implies --records)",
        )
    p.add_argument("--txn-index", action="store_true", help="also dump .txnindex entries")
    p.add_argument("--snapshot", action="store_true", help="also dump producer-state snapshots")
    p.add_argument("--skip-record-metadata", action="store_true", help="records without timestamp, sizes and headers")
    p.add_argument("--max-bytes", type=int, metavar="N", help="only the batches within each file's first N bytes")
    p.set_defaults(run=_run_dump)


def _run_dump(args) -> int:
    from .operations.dump import write_dump

    paths = args.paths + [path for listed in args.files for path in listed.split(",") if path]
    if not paths:
        raise ConfigError("dump needs a PATH or --files PATH[,PATH...]")
    write_dump(
        paths,
        sys.stdout,
        records=args.records,
        decoders=args.decoders,
        txn_index=args.txn_index,
        snapshots=args.snapshot,
        skip_record_metadata=args.skip_record_metadata,
        max_bytes=args.max_bytes,
        key_decoder=args.key_decoder,
        value_decoder=args.value_decoder,
    )
    return EXIT_OK


def _add_compact(commands, name: str, help_text: str) -> None:
    p = commands.add_parser(name, help=help_text)
    _add_log_dir_options(p, now_help="the clock of every time rule", rewrites=name == "compact", spark=True)
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
    _add_config_options(p)
    _add_quiet(p)
    p.set_defaults(run=_run_compact)


def _run_compact(args) -> int:
    from .operations.clock import stamp
    from .operations.compact import compact, compacted_topics

    dry_run = args.command == "plan" or args.dry_run
    resolver = _resolver(args)
    output = None if dry_run else getattr(args, "output", None)
    opened = _check_before_spark(args, resolver)
    now = _now(args)
    # the copy for --output is made while Spark starts; a pass without a compacted topic plans
    # nothing and needs no Spark (compact says why)
    spark = _session(args, background=True) if compacted_topics(opened, resolver, args.topics) else None
    result = compact(
        spark,
        args.log_dir,
        resolver,
        now,
        force=args.force,
        topics=args.topics,
        dry_run=dry_run,
        output=output,
        legacy_as_v2=args.legacy_as_v2,
        follow_symlinks=getattr(args, "follow_symlinks", False),
    )
    partitions = result.plan.partitions()
    chosen = [p for p in partitions if p["chosen"]]
    print(f"{len(chosen)} of {len(partitions)} compacted partitions chosen at now={stamp(now)}")
    if chosen:
        print(
            _table(
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
            print(_table(rows, list(rows[0])))
    _write_report(args.report, result.to_dict())
    for (topic, partition), err in sorted(result.plan.uncleanable.items()):
        print(
            f"kafkalog {args.command}: {topic}-{partition} is uncleanable and was left as it is: {err}", file=sys.stderr
        )
    return EXIT_PROBLEMS if result.plan.uncleanable else EXIT_OK


def _write_report(path_or_uri: str | None, report: dict) -> None:
    """--report FILE: the report as JSON, local or in object storage."""
    if path_or_uri:
        from .operations.files import write_report

        write_report(path_or_uri, report)


def _table(rows: list[dict], columns: list[str]) -> str:
    """A plain text table: what a terminal shows best."""
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def _add_retain(commands) -> None:
    p = commands.add_parser(
        "retain", help="time, size and log-start-offset retention, deleteRecords, consumed retention (KIP-68)"
    )
    _add_log_dir_options(p, now_help="the clock for time retention", rewrites=True, spark=False)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a summary")
    p.add_argument(
        "--delete-records",
        metavar="FILE",
        help="kafka-delete-records.sh's offset JSON file (offset -1: the high watermark)",
    )
    p.add_argument(
        "--truncate-below-start",
        action="store_true",
        help="also remove the records below the log start offset from the segment that holds it (offsets preserved)",
    )
    p.add_argument(
        "--committed-offsets",
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
    p.add_argument(
        "--remote-storage-dir",
        metavar="DIR",
        help="tiered storage: the LocalTieredStorage directory of remote segments (path or URI), which "
        "with the log dir's __remote_log_metadata tells which local segments are uploaded",
    )
    _add_config_options(p)
    _add_quiet(p)
    p.set_defaults(run=_run_retain)


def _run_retain(args) -> int:
    from .operations.retain import retain

    resolver = _resolver(args)
    _check_before_spark(args, resolver)
    report = retain(
        args.log_dir,
        config=resolver,
        now_ms=_now(args),
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
    _write_report(args.report, report.to_dict())
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return EXIT_PROBLEMS if report.delete_records_failed else EXIT_OK


def _session(args, background: bool = False):
    """The SparkSession of a Spark command: `--master`, else local_session's (or spark-submit's) choice.
    Its callers run `_check_before_spark` first, so that a typo costs no JVM start.
    `background`: a Future of a new one, started in a thread while the command goes on (`start_session`);
    a session already running (a job's) is used as it is."""
    from .spark.session import local_session, start_session

    start = start_session if background and _running_session() is None else local_session
    return start(master=args.master or "local[2]", verbose=args.verbose)


def _running_session():
    """The SparkSession already running in this process (a job's: jobs/validate.py), else None: the
    command line does not start Spark for a command that needs none."""
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _check_before_spark(args, resolver):
    """What can be checked before the JVM starts, so that a mistake costs no Spark start: what the
    rewrite checks before it starts (storage/destination.py's preflight), and that the topics
    `--topic` and `--topic-config` name are there (a configuration file's: a warning). The opened
    log directory."""
    from .operations.files import check_topic_settings
    from .storage.destination import preflight

    opened = preflight(
        args.log_dir,
        getattr(args, "output", None),
        dry_run=args.command == "plan" or getattr(args, "dry_run", False),
        follow_symlinks=getattr(args, "follow_symlinks", False),
    )
    opened.check_topics(args.topics)
    check_topic_settings(resolver, opened)
    return opened


def _check_copies_before_spark(args, log_dirs: list[str], resolver) -> None:
    """`_check_before_spark` for a purge of several log dirs: each passes the preflight, and a topic
    `--topic` or `--topic-config` names is in one of them (a JBOD broker spreads a topic's
    partitions over its dirs)."""
    from .operations.files import check_topic_settings
    from .operations.purge import check_topics
    from .storage.destination import preflight
    from .storage.logdir import LogDir

    opened = [preflight(d, None, dry_run=args.dry_run, follow_symlinks=args.follow_symlinks) for d in log_dirs]
    check_topics(opened, args.topics)
    # every copy's partitions as one LogDir's, named after the first: the topics a configuration may name
    held = LogDir(opened[0].fs, opened[0].path, {tp: path for o in opened for tp, path in o.partition_paths.items()})
    check_topic_settings(resolver, held)


def _now(args) -> int:
    """`--now`, else the wall clock, which the run's rules then read: said on stderr as a date, before
    anything is decided, since a wrong clock decides wrongly (retention deletes by it)."""
    from .operations.clock import now_ms, stamp

    now = now_ms(args.now)
    if args.now is None:
        print(
            f"kafkalog {args.command}: now={stamp(now)}, the wall clock (--now EPOCH_MS sets another)",
            file=sys.stderr,
        )
    return now


def _add_purge(commands) -> None:
    from .operations.purge import DEFAULT_REASON, KEY_FORMATS

    p = commands.add_parser(
        "purge",
        help="remove every record of given keys from every topic, offsets preserved, "
        "with an audit ledger that stores no key",
    )
    _add_log_dir_options(p, now_help="the clock", rewrites=True, spark=True, several=True)
    p.add_argument(
        "--keys",
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
    p.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the secret of the key fingerprints (default: the environment variable KAFKALOG_PURGE_SECRET)",
    )
    p.add_argument("--reason", default=DEFAULT_REASON, help="the ledger's reason for keys without their own")
    p.add_argument(
        "--metadata",
        metavar="DIR",
        help="a KRaft metadata log (a controller's log dir, or its __cluster_metadata-0; default: the one in "
        "LOG_DIR): refuse to purge when a replica it names of a purged partition is not given",
    )
    p.add_argument(
        "--allow-missing-replicas",
        action="store_true",
        help="purge the replicas given and record the missing ones in the run table as not purged",
    )
    p.add_argument(
        "--remote-storage-dir",
        metavar="DIR",
        help="tiered storage: the LocalTieredStorage directory (path or URI) whose remote segments of the "
        "purged partitions are purged too, in place",
    )
    _add_config_options(p)
    _add_quiet(p)
    p.set_defaults(run=_run_purge)


def _run_purge(args) -> int:
    from .operations.purge import load_secret, log_dirs_of, purge
    from .operations.replicas import check_replicas

    secret = None if args.dry_run else load_secret(args.secret_file)  # before Spark starts: fail fast
    resolver = _resolver(args)
    log_dirs = log_dirs_of(args.log_dir, args.output)
    if len(log_dirs) == 1:
        args.log_dir = log_dirs[0]
        _check_before_spark(args, resolver)
    else:
        _check_copies_before_spark(args, log_dirs, resolver)
    if not args.allow_missing_replicas:  # purge() checks again; here a missing replica costs no JVM start
        check_replicas(log_dirs, args.topics, args.metadata)
    now = _now(args)
    spark = _session(args)
    result = purge(
        spark,
        args.log_dir,
        args.keys,
        keys_format=args.keys_format,
        topics=args.topics,
        where=args.where,
        tombstone=args.tombstone,
        ledger=args.ledger,
        secret=secret,
        config=resolver,
        now=now,
        reason=args.reason,
        output=args.output,
        dry_run=args.dry_run,
        follow_symlinks=args.follow_symlinks,
        metadata=args.metadata,
        allow_missing_replicas=args.allow_missing_replicas,
        remote_storage=args.remote_storage_dir,
    )
    print(result.summary())
    if result.partitions:
        print()
        print(_table(result.partitions, list(result.partitions[0])))
    _write_report(args.report, result.to_dict())
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
    p.add_argument("--json", action="store_true", help="print the full check as JSON")
    p.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    p.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    _add_quiet(p)
    p.set_defaults(run=_run_verify_purge)


def _add_ledger_options(p, required: bool = True) -> None:
    p.add_argument("--ledger", required=required, metavar="PATH", help="the purge ledger (Delta table)")
    p.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the secret of the key fingerprints (default: the environment variable KAFKALOG_PURGE_SECRET)",
    )
    p.add_argument("--run", dest="run_id", metavar="RUN_ID", help="only this run of the ledger (default: every run)")


def _run_verify_purge(args) -> int:
    check = _verify(args, args.log_dirs)
    if args.json:
        print(json.dumps(check.to_dict(), indent=2))
        return EXIT_OK if check.clean else EXIT_PROBLEMS
    print(check.summary())
    if check.partitions:
        print()
        print(_table(check.partitions, list(check.partitions[0])))
    for f in check.found:
        print(
            f"found: {f['log_dir']} (broker {f['broker_id']}) {f['topic']}-{f['partition']} offset {f['offset']}: "
            f"a record of purged key {f['fingerprint'][:16]}...",
            file=sys.stderr,
        )
    return EXIT_OK if check.clean else EXIT_PROBLEMS


def _verify(args, log_dirs):
    """verify_purge over `log_dirs`, the secret read and the directories opened before Spark starts."""
    from .operations.purge import load_secret
    from .operations.purge_verify import verify_purge
    from .storage.logdir import LogDir

    secret = load_secret(args.secret_file)
    for path in log_dirs:  # a typo costs no JVM start
        LogDir.open(path)
    return verify_purge(_session(args), log_dirs, args.ledger, secret, run_id=args.run_id)


def _add_evidence(commands) -> None:
    p = commands.add_parser(
        "evidence", help="build a signed (Ed25519) evidence report of a purge run from its ledger, or verify one"
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="the report of a run (default: the latest), with the verification of the copies"
    )
    _add_ledger_options(build)
    build.add_argument(
        "--verify",
        nargs="+",
        metavar="LOG_DIR",
        help="verify these copies now (as verify-purge) and put the result in the report; without it the report "
        "says it was not verified",
    )
    build.add_argument("--signing-key", required=True, metavar="PEM", help="the Ed25519 private key (PKCS#8 PEM)")
    build.add_argument("--output", required=True, metavar="FILE", help="the signed report, JSON")
    build.add_argument("--markdown", metavar="FILE", help="also the report as Markdown")
    build.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    build.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    _add_quiet(build)
    build.set_defaults(run=_run_evidence_build)
    check = actions.add_parser("verify", help="check a report's signature with the signer's public key")
    check.add_argument("report", metavar="REPORT", help="the signed report (JSON)")
    check.add_argument("--public-key", required=True, metavar="PEM", help="the Ed25519 public key (PEM)")
    check.add_argument("--markdown", action="store_true", help="print the verified report as Markdown")
    check.set_defaults(run=_run_evidence_verify)


def _run_evidence_build(args) -> int:
    from .operations.evidence import build_report, render_markdown, sign_report, signing_key
    from .storage.fs import LogFileSystem

    key = _read_file(args.signing_key, "signing key")
    signing_key(key)  # the key and the run checked before a JVM starts
    build_report(args.ledger, args.run_id)
    check = _verify(args, args.verify) if args.verify else None
    signed = sign_report(build_report(args.ledger, args.run_id, check=check), key)
    _write_report(args.output, signed)
    if args.markdown:
        fs, path = LogFileSystem.for_path(args.markdown)
        fs.write_bytes(path, render_markdown(signed).encode("utf-8"))
    verdict = "not verified" if check is None else check.summary()
    print(f"evidence of run {signed['report']['run']['runId']} signed into {args.output}; {verdict}")
    return EXIT_OK if check is None or check.clean else EXIT_PROBLEMS


def _run_evidence_verify(args) -> int:
    from .operations.evidence import SignatureMismatch, read_signed, render_markdown, verify_report

    signed = read_signed(_read_file(args.report, "report"), args.report)
    try:
        report = verify_report(signed, _read_file(args.public_key, "public key"))
    except SignatureMismatch as err:  # the check's answer (exit 1), not a failure to check (exit 2)
        print(f"kafkalog evidence verify: {err}", file=sys.stderr)
        return EXIT_PROBLEMS
    if args.markdown:
        print(render_markdown(signed), end="")
    else:
        print(f"the signature holds: run {report['run']['runId']} of ledger {report['ledger']}, signed by this key")
    return EXIT_OK


def _read_file(path_or_uri: str, what: str) -> bytes:
    from .storage.fs import LogFileSystem

    fs, path = LogFileSystem.for_path(path_or_uri)
    if not fs.exists(path):
        raise ConfigError(f"no such {what} file", file=path)
    return fs.read_bytes(path)


def _add_txn_report(commands) -> None:
    from .operations.txn_report import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

    p = commands.add_parser(
        "txn-report",
        help="open, hanging, empty and aborted transactions and the last stable "
        "offset, per partition; exit 1 when a transaction hangs",
    )
    _add_log_dir_options(p, now_help="the clock for transaction ages", rewrites=False, spark=False)
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
    from .operations.txn_report import txn_report

    report = txn_report(
        args.log_dir, now_ms=_now(args), topics=args.topics, transaction_max_timeout_ms=args.transaction_max_timeout_ms
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else _txn_tables(report))
    return EXIT_PROBLEMS if report.hanging else EXIT_OK


def _txn_tables(report) -> str:
    """The partitions with transactions, then their open, aborted and empty transactions."""
    from .operations.clock import stamp

    parts = [p for p in report.partitions if p.has_transactions]
    lines = [
        f"{len(parts)} partitions with transactions ({len(report.partitions) - len(parts)} without), "
        f"{len(report.hanging)} hanging (open, idle > {report.transaction_max_timeout_ms} ms) at "
        f"now={stamp(report.now_ms)}"
    ]
    if parts:
        rows = [p.summary() for p in parts]
        lines += ["", _table(rows, list(rows[0]))]
    for kind in ("open", "aborted", "empty"):
        txns = [{"topic": p.topic, "partition": p.partition, **t.to_dict()} for p in parts for t in getattr(p, kind)]
        if txns:
            lines += ["", f"{kind} transactions:", _table(txns, list(txns[0]))]
    return "\n".join(lines)


# -- export: a topic as a table ------------------------------------------------------------------------


def _add_export(commands) -> None:
    from .operations.decoding import DEAD_LETTER_SUFFIX, SCHEMAS_TOPIC, VALUE_FORMATS
    from .operations.export import MODES
    from .spark.decode import ENVELOPES, ON_ERROR
    from .spark.tables import FORMATS

    p = commands.add_parser(
        "export",
        help="a topic as a table (the latest value per key, or the committed changelog), as of an offset "
        "or a time, into Delta, Iceberg or Parquet; kept up to date with --incremental",
    )
    p.add_argument("log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory (path or URI)")
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--output", required=True, metavar="PATH", help="the table's path")
    p.add_argument("--format", choices=FORMATS, default="delta", help="the table format (default: %(default)s)")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="latest",
        help="latest: the last value per (partition, key), tombstones deleting it; changelog: every committed "
        "record, in offset order per partition (default: %(default)s)",
    )
    as_of = p.add_mutually_exclusive_group()
    as_of.add_argument(
        "--as-of-offset",
        metavar="N|JSON",
        help="stop before this offset (exclusive, as Spark's endingOffsets): one offset for every partition, "
        'or JSON {"0": 120, "1": -1} (-1: the partition\'s end)',
    )
    as_of.add_argument(
        "--as-of-time",
        type=int,
        metavar="EPOCH_MS",
        help="stop at the first offset whose timestamp is at or past this, as offsetsForTimes answers",
    )
    p.add_argument(
        "--incremental",
        action="store_true",
        help="apply only the records past the offsets the table holds (a MERGE, or an append in changelog mode)",
    )
    p.add_argument(
        "--latest-by",
        metavar="offset|timestamp|header:NAME",
        help="in latest mode, each key's row: its last record by offset, or its highest timestamp or 8-byte "
        "version header (KIP-280; ties: the later offset) (default: the topic's compaction.strategy, offset "
        "unless configured)",
    )
    _add_config_options(p)
    for side in ("key", "value"):
        p.add_argument(
            f"--{side}-format",
            choices=list(VALUE_FORMATS),
            default="bytes",
            help=f"how to decode the {side}: avro, protobuf and json-schema in Confluent's wire format "
            "(default: %(default)s, left as they are)",
        )
        p.add_argument(
            f"--{side}-schema",
            metavar="DDL|ID|SUBJECT",
            help=f"json: the {side}'s schema as Spark DDL (default: inferred from the data); avro, protobuf, "
            f"json-schema: the reader schema's id or subject (default: the subject <topic>-{side})",
        )
    p.add_argument(
        "--schemas-topic",
        metavar="NAME",
        help=f"the Schema Registry topic in the log dir to read schemas from (default: {SCHEMAS_TOPIC})",
    )
    p.add_argument(
        "--schema-dir",
        metavar="DIR",
        help="read schemas from a directory of <id>.avsc, <id>.proto and <id>.json files instead",
    )
    p.add_argument(
        "--schema-registry",
        metavar="URL",
        help="or ask a reachable Schema Registry for them (GET /schemas/ids/{id}), each once",
    )
    p.add_argument(
        "--envelope",
        choices=ENVELOPES,
        help="values are Debezium change events: op c/r/u upserts 'after', d and the tombstone delete "
        "(changelog mode keeps the op in _operation)",
    )
    p.add_argument(
        "--on-decode-error",
        choices=ON_ERROR,
        default="fail",
        help="a key or value that does not decode stops the export (fail, naming its offset), or goes to "
        "the dead-letter table (default: %(default)s)",
    )
    p.add_argument(
        "--dead-letter",
        metavar="PATH",
        help=f"the dead-letter table (default: the output's path + {DEAD_LETTER_SUFFIX})",
    )
    p.add_argument("--report", metavar="FILE", help="also write what the run did as JSON")
    p.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    p.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    _add_quiet(p)
    p.set_defaults(run=_run_export)


def _latest_by(args):
    """`export --latest-by`, or the topic's compaction.strategy (KIP-280) from the configuration given."""
    from .rules.compaction_strategy import CompactionStrategy, parse_latest_by

    if args.latest_by is None:
        config = _resolver(args).for_topic(args.topic)
        return CompactionStrategy.of(config.compaction_strategy, config.compaction_strategy_header)
    if args.mode != "latest":
        raise ConfigError(f"--latest-by picks each key's row of a latest table: --mode {args.mode} has none")
    try:
        return parse_latest_by(args.latest_by)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _run_export(args) -> int:
    from .operations.decoding import Decoding, schema_registry
    from .operations.export import export, topic_log_dir
    from .spark.session import local_session

    topic_log_dir(args.log_dir, args.topic)  # a typo costs no JVM start
    latest_by = _latest_by(args)
    decoding = Decoding(
        key_format=args.key_format,
        value_format=args.value_format,
        key_schema=args.key_schema,
        value_schema=args.value_schema,
        schemas_topic=args.schemas_topic,
        schema_dir=args.schema_dir,
        schema_registry_url=args.schema_registry,
        envelope=args.envelope,
        on_decode_error=args.on_decode_error,
        dead_letter=args.dead_letter,
    )
    registry = schema_registry(decoding, args.log_dir)  # and so do missing schemas
    as_of_offset = args.as_of_offset
    if as_of_offset is not None and as_of_offset.lstrip("-").isdigit():
        as_of_offset = int(as_of_offset)
    spark = local_session(master=args.master or "local[2]", verbose=args.verbose, delta=args.format == "delta")
    result = export(
        spark,
        args.log_dir,
        args.topic,
        args.output,
        format=args.format,
        mode=args.mode,
        as_of_offset=as_of_offset,
        as_of_time=args.as_of_time,
        incremental=args.incremental,
        decoding=decoding,
        registry=registry,
        latest_by=latest_by,
    )
    report = result.to_dict()
    print(json.dumps(report))
    _write_report(args.report, report)
    return EXIT_OK


def _add_listings(commands) -> None:
    """kafka-log-dirs --describe, kafka-get-offsets and kafka-configs --describe --all, of log dirs."""
    p = commands.add_parser("log-dirs", help="each log dir's partitions and their sizes, as kafka-log-dirs --describe")
    p.add_argument("log_dirs", nargs="+", metavar="LOG_DIR", help="log.dirs directories (of one or more brokers)")
    p.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic (repeatable)")
    p.set_defaults(run=_run_log_dirs)

    p = commands.add_parser("get-offsets", help="each partition's offset at a time, as kafka-get-offsets")
    p.add_argument("log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory (path or URI)")
    p.add_argument("--topic", metavar="REGEX", help="the topics whose name the regular expression matches whole")
    p.add_argument("--partitions", metavar="P,P...", help="only these partition numbers (comma-separated)")
    p.add_argument(
        "--time",
        default="latest",
        help="latest (-1: the high watermark, default), earliest (-2), max-timestamp (-3), earliest-local (-4), "
        "latest-tiered (-5), or a timestamp in epoch ms (the first offset at or past it)",
    )
    _add_config_options(p)
    p.set_defaults(run=_run_get_offsets)

    p = commands.add_parser("configs", help="each topic's configuration as kafkalog resolves it, and its source")
    p.add_argument("log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory (path or URI)")
    p.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic (repeatable)")
    p.add_argument("--json", action="store_true", help="as JSON: {topic: [{name, value, source}]}")
    _add_config_options(p)
    p.set_defaults(run=_run_configs)


def _run_log_dirs(args) -> int:
    from .operations.listings import log_dirs

    print(json.dumps(log_dirs(args.log_dirs, args.topics)))
    return EXIT_OK


def _run_get_offsets(args) -> int:
    from .operations.listings import get_offsets, parse_time

    try:
        partitions = None if args.partitions is None else [int(p) for p in args.partitions.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"--partitions {args.partitions!r}: expected partition numbers, comma-separated") from None
    found = get_offsets(
        args.log_dir, parse_time(args.time), topic_pattern=args.topic, partitions=partitions, config=_resolver(args)
    )
    for offset in found:
        print(offset.line())
    return EXIT_OK


def _run_configs(args) -> int:
    from .operations.listings import describe_configs

    described = describe_configs(args.log_dir, _resolver(args), args.topics)
    if args.json:
        print(json.dumps(described, indent=2))
        return EXIT_OK
    for topic, settings in described.items():
        print(f"All configs for topic {topic} are:")
        for s in settings:
            print(f"  {s['name']}={s['value']} source={s['source']}")
    return EXIT_OK
