"""The spark-submit jobs: each runs one `kafkalog` command in a Spark application.

    spark-submit "$(python -m kafkalog.jobs --path compact)" LOG_DIR [the options of `kafkalog compact`]
    python -m kafkalog.jobs compact LOG_DIR [...]     the same job in this Python (local Spark, or SPARK_REMOTE's)
    python -m kafkalog.jobs --conf-dir               the configuration templates' directory, to copy

The job files are this package's `compact.py`, `retain.py`, `validate.py`, `purge.py`, `export.py` and
`repartition.py` (the repository's `jobs/*.py` link to them); spark-submit needs a file, which `--path` names
wherever the wheel was installed.

A job takes exactly the command line's arguments. When they name no `--config-file` (or no
`--topic-config-dir`) and $KAFKALOG_CONF_DIR is set, the job uses `$KAFKALOG_CONF_DIR/kafkalog.properties`
(and `$KAFKALOG_CONF_DIR/topics/`) where they exist. It starts the SparkSession before the command,
or takes the one spark-submit set up: a cluster manager expects an application to create its
SparkContext (YARN's cluster mode fails one that never does), even for commands that decide on the
driver alone. It logs where it runs and how it ended, and exits with the command's exit code:
0 done, 1 problems found (validate, txn-report, refused deleteRecords), 2 could not run.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence

from .. import cli
from ..errors import KafkaLogError

JOBS = ("compact", "retain", "validate", "purge", "export", "repartition")
CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")  # kafkalog/conf
CONF_DIR_ENV = "KAFKALOG_CONF_DIR"
CONF_DEFAULTS = (
    ("--config-file", "config_file", "kafkalog.properties"),
    ("--topic-config-dir", "topic_config_dir", "topics"),
)
OUTCOMES = {cli.EXIT_OK: "done", cli.EXIT_PROBLEMS: "problems found", cli.EXIT_FAILED: "could not run"}

log = logging.getLogger("kafkalog.job")


def main(command: str, argv: Sequence[str] | None = None) -> int:
    """Run `kafkalog COMMAND` with `argv` (default: this process's arguments) as a Spark application."""
    settings = _under_spark_submit()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its connection chatter is not the job's news
    log.setLevel(logging.INFO)  # where and how the job ran, also with --quiet (which quiets the command's progress)
    argv = job_arguments(command, sys.argv[1:] if argv is None else argv, os.environ)
    from ..spark.session import local_session

    started = time.monotonic()
    spark = None
    try:
        args = cli.build_parser().parse_args([command, *argv])
        cli.preflight(args)  # input files and extras, and the command's plan where it has one: before Spark
        spark = local_session(app_name=f"kafkalog-{command}", conf=settings)
        log.info("kafkalog %s %s", command, " ".join(argv))
        log.info(
            "Spark %s, master %s, application %s",
            spark.version,
            spark.conf.get("spark.master", "?"),
            spark.conf.get("spark.app.id", "?"),
        )
        code = cli.main(args=args)  # the plan made above, handed on
    except KafkaLogError as err:  # bad input, or no Java: one line, as the command line says it
        log.error("kafkalog %s: %s", command, err)
        code = cli.EXIT_FAILED
    except Exception:  # a bug or a Spark that cannot start, not bad input: the traceback is what a report needs
        log.exception("kafkalog %s failed", command)
        code = cli.EXIT_FAILED
    finally:
        if spark is not None:
            spark.stop()
    log.info(
        "kafkalog %s: exit code %d (%s) after %.1f s",
        command,
        code,
        OUTCOMES.get(code, "?"),
        time.monotonic() - started,
    )
    return code


# The log4j2 profile Spark falls back on when spark-submit was given none: INFO, every step of a start
SPARK_DEFAULT_LOG4J = "org/apache/spark/log4j2-defaults.properties"


def _under_spark_submit() -> dict:
    """Where spark-submit started this Python (after its JVM, whose gateway PYSPARK_GATEWAY_PORT names),
    the job's stderr becomes the JVM's: Spark's PythonRunner merges a Python driver's stderr into its
    stdout, which would mix progress and logs with the command's results. Returns the settings of the
    job's session: Spark's log level ERROR (spark.log.level, from the SparkContext's start on) where Spark
    logs by its default profile and no level was given; a log4j2 configuration given to spark-submit
    (conf/log4j2.properties, jobs/README.md) is left as it is."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the gateway only: the SparkContext starts with the session
    jvm = SparkContext._jvm
    assert jvm is not None
    sys.stderr = JvmStderr(jvm.System.err, sys.stderr)
    try:
        source = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration().getConfigurationSource()
        default_profile = (source.getLocation() or "").endswith(SPARK_DEFAULT_LOG4J)
    except Py4JError:  # another logging backend than log4j2: its configuration is the cluster's
        return {}
    return {"spark.log.level": "ERROR"} if default_profile and not SparkConf().contains("spark.log.level") else {}


class JvmStderr(io.TextIOBase):
    """A text stream onto the JVM's System.err (through py4j); `fallback` where the JVM cannot be reached."""

    def __init__(self, err, fallback):
        self.err, self.fallback = err, fallback

    def write(self, text: str) -> int:
        try:
            self.err.print(text)
        except Exception:  # the gateway is gone (the JVM ends): the text still goes somewhere
            self.fallback.write(text)
        return len(text)

    def flush(self) -> None:
        try:
            self.err.flush()
        except Exception:
            self.fallback.flush()

    def isatty(self) -> bool:
        return False


def job_arguments(command: str, argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """`argv` with the conf directory's files for the configuration options it leaves out."""
    given = cli.build_parser().parse_args([command, *argv])  # bad arguments fail here, before Spark starts
    conf_dir = environ.get(CONF_DIR_ENV, "")
    defaults = []
    for option, dest, name in CONF_DEFAULTS if conf_dir else ():
        path = os.path.join(conf_dir, name)
        if hasattr(given, dest) and getattr(given, dest) is None and os.path.exists(path):
            defaults += [option, path]
    return defaults + list(argv)


def job_path(command: str) -> str:
    """The file spark-submit runs for `command`: this package's `<command>.py`, wherever it is installed."""
    if command not in JOBS:
        raise ValueError(f"no job {command!r}: the jobs are {', '.join(JOBS)}")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{command}.py")
