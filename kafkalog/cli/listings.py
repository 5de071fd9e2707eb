"""`kafkalog log-dirs`, `get-offsets` and `configs`."""

from __future__ import annotations

import json

from ..errors import ConfigError
from .options import add_config_options, config_resolver
from .output import EXIT_OK


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
    add_config_options(p)
    p.set_defaults(run=_run_get_offsets)

    p = commands.add_parser("configs", help="each topic's configuration as kafkalog resolves it, and its source")
    p.add_argument("log_dir", metavar="LOG_DIR", help="a Kafka log.dirs directory (path or URI)")
    p.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic (repeatable)")
    p.add_argument("--json", action="store_true", help="as JSON: {topic: [{name, value, source}]}")
    add_config_options(p)
    p.set_defaults(run=_run_configs)


def _run_log_dirs(args) -> int:
    from ..operations.listings import log_dirs

    print(json.dumps(log_dirs(args.log_dirs, args.topics)))
    return EXIT_OK


def _run_get_offsets(args) -> int:
    from ..operations.listings import get_offsets, parse_time

    try:
        partitions = None if args.partitions is None else [int(p) for p in args.partitions.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"--partitions {args.partitions!r}: expected partition numbers, comma-separated") from None
    found = get_offsets(
        args.log_dir,
        parse_time(args.time),
        topic_pattern=args.topic,
        partitions=partitions,
        config=config_resolver(args),
    )
    for offset in found:
        print(offset.line())
    return EXIT_OK


def _run_configs(args) -> int:
    from ..operations.listings import describe_configs

    described = describe_configs(args.log_dir, config_resolver(args), args.topics)
    if args.json:
        print(json.dumps(described, indent=2))
        return EXIT_OK
    for topic, settings in described.items():
        print(f"All configs for topic {topic} are:")
        for s in settings:
            print(f"  {s['name']}={s['value']} source={s['source']}")
    return EXIT_OK
