"""A SparkSession for scripts, notebooks and tests: local mode by default, the given one on a cluster."""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import warnings

# Applied only when kafkalog starts Spark itself in local mode.
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
}
# Applied to every session kafkalog creates (harmless on a cluster).
ALWAYS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
}

# Spark's errors only. A failed task's Java stack and Python traceback go to kafkalog-spark.log in
# the temp directory, not to the terminal, where kafkalog prints the one-line error they carry;
# `verbose` (and conf/log4j2.properties, for spark-submit) shows them on stderr.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.out.ref = {appender}
logger.apache.name = org.apache
logger.apache.level = error
logger.py4j.name = py4j
logger.py4j.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${{sys:java.io.tmpdir}}/kafkalog-spark.log
appender.file.append = false
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


def _quiet_log4j_options(verbose: bool = False) -> str:
    """JVM options pointing log4j2 at a config that only lets errors through, to a file (or with
    `verbose` to stderr)."""
    text = _LOG4J2.format(appender="console" if verbose else "file")
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"kafkalog-log4j2-{digest}.properties")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=tempfile.gettempdir(), suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    return f"-Dlog4j2.configurationFile=file:{path}"


def _master_from_environment() -> bool:
    """Whether spark-submit, a pyspark shell or Spark Connect already says where to run."""
    return any(os.environ.get(name) for name in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "MASTER"))


def local_session(app_name: str = "kafkalog", master: str = "local[2]", conf: dict | None = None, *,
                  verbose: bool = False):
    """The active SparkSession if there is one (a cluster job, a notebook), else a new one.

    A new session runs on `master` (local mode, 2 cores) unless spark-submit or the environment
    names a master, in which case that one is used. Local sessions get small shuffle partitions,
    no UI and quiet logs (Spark's errors in a file; on stderr with `verbose`); every session gets Arrow and Python filter pushdown enabled and the
    `kafkalog` data source registered. `conf` entries are applied last.
    """
    from pyspark.sql import SparkSession

    from .datasource import register

    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in (conf or {}).items():
            try:
                active.conf.set(key, value)
            except Exception as err:  # a static setting of a running session cannot change
                warnings.warn(f"kafkalog: {key} is not changed in the running SparkSession: {err}")
        register(active)
        return active
    builder = SparkSession.builder.appName(app_name)
    settings = dict(ALWAYS)
    if not _master_from_environment():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = builder.master(master)
        settings.update(LOCAL_DEFAULTS)
        settings["spark.driver.extraJavaOptions"] = _quiet_log4j_options(verbose)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # Spark Connect: no SparkContext
        pass
    register(spark)
    return spark
