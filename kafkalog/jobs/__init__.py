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

import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence

from .. import cli

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
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its connection chatter is not the job's news
    log.setLevel(logging.INFO)  # where and how the job ran, also with --quiet (which quiets the command's progress)
    argv = job_arguments(command, sys.argv[1:] if argv is None else argv, os.environ)
    from ..spark.session import local_session

    started = time.monotonic()
    spark = None
    try:
        spark = local_session(app_name=f"kafkalog-{command}")
        log.info("kafkalog %s %s", command, " ".join(argv))
        log.info(
            "Spark %s, master %s, application %s",
            spark.version,
            spark.conf.get("spark.master", "?"),
            spark.conf.get("spark.app.id", "?"),
        )
        code = cli.main([command, *argv])
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
