"""`kafkalog export`: a topic as a table."""

from __future__ import annotations

import json

from ..errors import ConfigError
from .options import add_config_options, add_input, add_quiet, config_resolver, running_session, spark_session
from .output import EXIT_OK, save_report


def _add_export(commands) -> None:
    from ..operations.decoding import DEAD_LETTER_SUFFIX, SCHEMAS_TOPIC, VALUE_FORMATS
    from ..operations.export import MODES
    from ..spark.decode import ENVELOPES, ON_ERROR
    from ..spark.tables import FORMATS

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
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--incremental",
        action="store_true",
        help="apply only the records past the offsets the table holds (a MERGE, or an append in changelog mode)",
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the table an earlier export wrote with a new version of it (default: a table there is refused)",
    )
    p.add_argument(
        "--latest-by",
        metavar="offset|timestamp|header:NAME",
        help="in latest mode, each key's row: its last record by offset, or its highest timestamp or 8-byte "
        "version header (KIP-280; ties: the later offset) (default: the topic's compaction.strategy, offset "
        "unless configured)",
    )
    add_config_options(p)
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
    add_input(
        p,
        "--schema-dir",
        kind="dir",
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
    add_quiet(p)
    p.set_defaults(run=_run_export)


def _latest_by(args):
    """`export --latest-by`, or the topic's compaction.strategy (KIP-280) from the configuration given."""
    from ..rules.compaction_strategy import CompactionStrategy, parse_latest_by

    if args.latest_by is None:
        config = config_resolver(args).for_topic(args.topic)
        return CompactionStrategy.of(config.compaction_strategy, config.compaction_strategy_header)
    if args.mode != "latest":
        raise ConfigError(f"--latest-by picks each key's row of a latest table: --mode {args.mode} has none")
    try:
        return parse_latest_by(args.latest_by)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _run_export(args) -> int:
    from ..operations.decoding import Decoding
    from ..operations.export import plan_export, run_export
    from ..spark.session import check_startable
    from ..storage.logdir import LogDir

    log = LogDir.open(args.log_dir)  # listed once: the plan holds the segments the scan reads
    log.check_topics([args.topic])  # a typo costs no JVM start
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
    if running_session() is None:
        check_startable()  # no Java, or no pyspark: said before the plan reads the partitions
    as_of_offset = args.as_of_offset
    if as_of_offset is not None and as_of_offset.lstrip("-").isdigit():
        as_of_offset = int(as_of_offset)
    # every check, and missing schemas, before the JVM starts
    plan = plan_export(
        log,
        args.topic,
        args.output,
        uri=args.log_dir,
        format=args.format,
        mode=args.mode,
        as_of_offset=as_of_offset,
        as_of_time=args.as_of_time,
        incremental=args.incremental,
        overwrite=args.overwrite,
        decoding=decoding,
        latest_by=latest_by,
    )
    # a session already running, a job's, is used as it is; none starts for a table already up to date
    spark = None if plan.up_to_date else spark_session(args, background=True, delta=args.format == "delta")
    result = run_export(spark, plan)
    report = result.to_dict()
    print(json.dumps(report))
    save_report(args.report, report)
    return EXIT_OK
