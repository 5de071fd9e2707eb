"""What the commands share: the options naming log dirs, configuration and inputs, and what is checked
before anything runs (inputs there, extras installed, Java and Spark startable)."""

from __future__ import annotations

import sys

from ..errors import ConfigError


def add_input(p, *names: str, kind: str = "file", **kwargs) -> None:
    """An argument naming something the command reads: a "file", a "dir", or a "table" (a file or a
    directory), which `preflight` finds before the command does anything."""
    action = p.add_argument(*names, **kwargs)
    label = action.option_strings[0] if action.option_strings else action.metavar
    p.set_defaults(inputs=(*(p.get_default("inputs") or ()), (action.dest, label, kind)))


# An option's value that needs an optional package (kafkalog/extras.py): (dest, value or None for any, module)
NEEDS_EXTRA = (
    ("format", "iceberg", "pyiceberg"),
    ("findings_format", "delta", "deltalake"),
    ("keys_format", "delta", "deltalake"),
    ("ledger", None, "deltalake"),
    ("signing_key", None, "cryptography"),
    ("public_key", None, "cryptography"),
)


def preflight(args) -> None:
    """Refuse, in one line, a command whose input files are not there or whose options need a package
    that is not installed: before it reads anything or starts Spark (which `spark_session` checks it can).
    Then a command with a `plan` (validate, dump) builds it, once, as `args.planned`: the check of
    what it was given, on the driver without Spark, that its `run` takes."""
    from ..extras import require

    for dest, label, kind in getattr(args, "inputs", ()):
        value = getattr(args, dest, None)
        for path in [value] if isinstance(value, str) else value or ():
            _check_input(path, label, kind)
    for dest, value, module in NEEDS_EXTRA:
        given = getattr(args, dest, None)
        if given is not None and value in (None, given):
            require(module, f"{_option(dest)} {given}" if value else _option(dest))
    if getattr(args, "plan", None) is not None and getattr(args, "planned", None) is None:
        args.planned = args.plan(args)


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


_KINDS = {"file": "file", "dir": "directory", "table": "file or directory"}


def _check_input(path_or_uri: str, label: str, kind: str) -> None:
    from ..storage.fs import LogFileSystem

    fs, path = LogFileSystem.for_path(path_or_uri)
    entry = fs.info(path)
    if entry is None:
        raise ConfigError(f"no such {_KINDS[kind]} ({label})", file=path)
    if kind == "file" and entry.is_dir:
        raise ConfigError(f"a directory, where a file was expected ({label})", file=path)
    if kind == "dir" and not entry.is_dir:
        raise ConfigError(f"not a directory ({label})", file=path)


def add_log_dir_options(p, *, now_help: str, rewrites: bool, spark: bool, several: bool = False) -> None:
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


def add_config_options(p) -> None:
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
    add_input(
        p,
        "--config-file",
        metavar="FILE",
        help="a broker's server.properties (broker names; topic names apply to every topic; "
        "topic.<TOPIC>.<name> overrides one topic), or the output of kafka-configs.sh --describe "
        "[--all] for topics and brokers: a topic's section fixes that topic's settings to the "
        "values listed, broker sections and broker-level synonyms are broker settings. Any "
        "name Kafka 4.x defines is accepted; an unknown name is a warning and ignored, as in Kafka "
        "(with --config or --topic-config, an error)",
    )
    add_input(
        p,
        "--topic-config-dir",
        kind="dir",
        metavar="DIR",
        help="one <TOPIC>.properties per topic, holding that topic's overrides under topic config names "
        "(over --config-file, under --topic-config)",
    )


def add_quiet(p) -> None:
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (bars on a terminal, log lines elsewhere); warnings and errors still print",
    )


def config_resolver(args):
    from ..operations.files import load_config

    return load_config(args.config_file, args.topic_config_dir, args.config, args.topic_config)


def spark_session(args, background: bool = False, **options):
    """The SparkSession of a Spark command: `--master`, else local_session's (or spark-submit's) choice.
    Its callers run `check_before_spark` first, so that a typo costs no JVM start; a new session's
    needs (pyspark, Java) are checked here, before anything starts in the background.
    `background`: a Future of a new one, started in a thread while the command goes on (`start_session`);
    a session already running (a job's) is used as it is. `options`: local_session's."""
    from ..spark.session import check_startable, local_session, start_session

    running = running_session()
    if running is None:
        check_startable()
    start = start_session if background and running is None else local_session
    return start(
        master=args.master or "local[2]", verbose=args.verbose, write_class_data=True, data_source=False, **options
    )


def running_session():
    """The SparkSession already running in this process (a job's: jobs/validate.py), else None: the
    command line does not start Spark for a command that needs none."""
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def check_before_spark(args, resolver):
    """What can be checked before the JVM starts, so that a mistake costs no Spark start: what the
    rewrite checks before it starts (storage/destination.py's preflight), and that the topics
    `--topic` and `--topic-config` name are there (a configuration file's: a warning). The opened
    log directory, checked (storage/destination.Checked: a plan and the run take it, and do not
    check it again)."""
    from ..operations.files import check_topic_settings
    from ..storage.destination import checked

    target = checked(
        args.log_dir,
        getattr(args, "output", None),
        dry_run=args.command == "plan" or getattr(args, "dry_run", False),
        follow_symlinks=getattr(args, "follow_symlinks", False),
    )
    target.opened.check_topics(args.topics)
    check_topic_settings(resolver, target.opened)
    return target


def now_of(args) -> int:
    """`--now`, else the wall clock, which the run's rules then read: said on stderr as a date, before
    anything is decided, since a wrong clock decides wrongly (retention deletes by it)."""
    from ..operations.clock import now_ms, stamp

    now = now_ms(args.now)
    if args.now is None:
        print(
            f"kafkalog {args.command}: now={stamp(now)}, the wall clock (--now EPOCH_MS sets another)",
            file=sys.stderr,
        )
    return now


def read_file(path_or_uri: str) -> bytes:
    """An input file `preflight` found."""
    from ..storage.fs import LogFileSystem

    fs, path = LogFileSystem.for_path(path_or_uri)
    return fs.read_bytes(path)
