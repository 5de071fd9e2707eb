"""A SparkSession for scripts, notebooks and tests: local mode by default, the given one on a cluster."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import threading
import warnings
from concurrent.futures import Future

from ..errors import ConfigError
from ..extras import require
from .class_data import archive_path, keep_at_exit
from .class_data import jvm_options as class_data_options
from .context import jvm_running, launch_jvm, running_session, spark_context
from .jars import (
    PACKAGES,
    JarKey,
    JarsUnavailable,
    copy_jars,
    jar_key,
    jars_root,
    remember,
    resolve,
    resolved_jars,
    spark_build,
    with_cached_jars,
)
from .java import check_java, find_java

log = logging.getLogger("kafkalog")

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

# delta-spark from Maven Central, for the purge ledger's Spark path (kafkalog/spark/ledger.py). Delta's
# classes use Spark's internals, so each jar runs only on the Spark line it was built for: Delta 4.4.0
# publishes one artifact per line (built against Spark 4.0.1, 4.1.0, 4.2.0); none is built for 4.3 yet.
DELTA_VERSION = "4.4.0"
DELTA_ARTIFACTS = {"4.0": "delta-spark_4.0_2.13", "4.1": "delta-spark_4.1_2.13", "4.2": "delta-spark_4.2_2.13"}
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# In local mode, with delta: Delta rebuilds a table's state from its log in 50 partitions by default,
# 50 tasks per ledger write for tables of a few files; 2 halve a warm ledger write on local[2].
DELTA_LOCAL_DEFAULTS = {"spark.databricks.delta.snapshotPartitions": "2"}
_DELTA_UNAVAILABLE = "spark.kafkalog.delta.unavailable"  # why local_session(delta=True) started without Delta
_LISTS = ("spark.jars.packages", "spark.sql.extensions")  # comma-separated settings that delta_conf extends


class DeltaUnavailable(ConfigError):
    """delta-spark cannot be added to this session (no release for its Spark, or jars not fetched)."""


def delta_conf(spark_version: str | None = None) -> dict:
    """The settings that give a new session delta-spark: the Maven coordinates of the release built
    for `spark_version` (default: the installed pyspark's; Spark fetches them through Ivy into
    ~/.ivy2.5.2 when the session starts, and a later start downloads nothing; a session kafkalog starts
    names them by path after the first: kafkalog/spark/jars.py), Delta's session extension and catalog.
    Raises DeltaUnavailable when no release is built for that Spark line."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    line = ".".join(spark_version.split(".")[:2])
    if line not in DELTA_ARTIFACTS:
        raise DeltaUnavailable(
            f"no delta-spark release is built for Spark {spark_version} (delta-spark "
            f"{DELTA_VERSION} is for Spark {', '.join(sorted(DELTA_ARTIFACTS))})"
        )
    return {
        "spark.jars.packages": f"io.delta:{DELTA_ARTIFACTS[line]}:{DELTA_VERSION}",
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


def delta_configured(spark) -> bool:
    """Whether `spark` writes Delta tables through delta-spark: Delta's session extension and catalog."""
    extensions = [e.strip() for e in (spark.conf.get("spark.sql.extensions", "") or "").split(",")]
    return DELTA_EXTENSION in extensions and spark.conf.get("spark.sql.catalog.spark_catalog", "") == DELTA_CATALOG


def delta_unavailable(spark) -> str | None:
    """Why `local_session(delta=True)` started `spark` without delta-spark, if it did."""
    return spark.conf.get(_DELTA_UNAVAILABLE, None) or None


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


def check_startable(conf: dict | None = None) -> None:
    """What a new session needs that can be checked before it starts, as one-line errors: pyspark,
    and a Java Spark runs on where kafkalog starts the JVM (a Spark Connect client: its gRPC transport)."""
    require("pyspark", "Spark")
    remote = os.environ.get("SPARK_REMOTE") or (conf or {}).get("spark.remote")
    if remote:
        require("grpc", f"Spark Connect ({remote})")
    elif not jvm_running():
        check_java()


def start_session(**options) -> Future:
    """`local_session(**options)` in a thread of its own: the JVM starts while the driver goes on
    with what needs no Spark (a command's plan, its copy of the log dir for `--output`); `started`
    waits for it where Spark is first needed. A daemon thread: a command that fails before it needs
    Spark ends at once, and its JVM with it (pyspark's gateway exits when its parent does), rather
    than waiting for a session it will not use."""
    future: Future = Future()

    def start() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(local_session(**options))
        except BaseException as err:  # handed to the thread that waits in `started`
            future.set_exception(err)

    threading.Thread(target=start, name="kafkalog-spark-start", daemon=True).start()
    return future


def started(spark):
    """The session `spark` is, or the one a `start_session` Future gives once Spark has started."""
    return spark.result() if isinstance(spark, Future) else spark


def local_session(
    app_name: str = "kafkalog",
    master: str = "local[2]",
    conf: dict | None = None,
    *,
    verbose: bool = False,
    delta: bool = False,
    jvm_options: str = "",
    write_class_data: bool = False,
    data_source: bool = True,
):
    """The active SparkSession if there is one (a cluster job, a notebook), else a new one.

    A new session runs on `master` (local mode, 2 cores) unless spark-submit or the environment
    names a master, in which case that one is used. Local sessions get small shuffle partitions,
    no UI and quiet logs (Spark's errors in a file; on stderr with `verbose`); every session gets Arrow and
    Python filter pushdown enabled and the `kafkalog` data source registered. `conf` entries are applied last.

    `jvm_options`: more options for the JVM of a new local session (`tuning.PYTHON_TASKS_JVM_OPTIONS`
    for a command whose work is all in Python tasks); a running JVM keeps its own. A new local JVM maps the
    class-data archive of Spark's classes where there is one (kafkalog/spark/class_data.py); with
    `write_class_data` (the command line's sessions), one where there is none writes it as it exits.

    `data_source=False` (the command line's sessions, whose plans do not read through the format) leaves
    the `kafkalog` format unregistered in a new session: registering it has Spark look for Python data
    sources in a Python process of its own, on the way of every start.

    `delta`: a new session also gets delta-spark (`delta_conf`), so that purge writes its ledger
    through Spark. When that cannot be (no release for this Spark, or Spark does not start with the
    jars, as when Maven Central cannot be reached), the session starts without it, with a warning,
    and `delta_unavailable(session)` says why; purge then writes the ledger with `deltalake`. Ivy resolves
    the jars at the first start only: later ones name the jars it resolved by path (kafkalog/spark/jars.py).

    Spark Connect (`SPARK_REMOTE` or `spark.remote` names a server): the session is the server's,
    and so are its jars: delta-spark is there only if the server was started with it, and
    `delta_unavailable` says when it was not.

    A new session that cannot start (no pyspark, no Java or one too old: `check_startable`) is a
    one-line KafkaLogError before anything starts.
    """
    require("pyspark", "Spark")
    from pyspark.sql import SparkSession

    from .datasource import register

    active = SparkSession.getActiveSession() or running_session()
    if active is not None:
        for key, value in (conf or {}).items():
            try:
                active.conf.set(key, value)
            except Exception as err:  # a static setting of a running session cannot change
                warnings.warn(f"kafkalog: {key} is not changed in the running SparkSession: {err}", stacklevel=1)
        if delta and not delta_configured(active) and not delta_unavailable(active):
            _without_delta(active, "the SparkSession running in this process was started without delta-spark")
        register(active)
        return active
    check_startable(conf)
    settings = {"spark.app.name": app_name, **ALWAYS}
    remote = os.environ.get("SPARK_REMOTE") or (conf or {}).get("spark.remote")  # a Spark Connect server
    local = not (remote or _master_from_environment())
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        settings["spark.master"] = master
        settings.update(LOCAL_DEFAULTS)
        archive, writing = _class_data(write_class_data and not jvm_running())
        settings["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, (_quiet_log4j_options(verbose), jvm_options, archive))
        )
    else:
        writing = None
    settings.update(conf or {})
    without_delta, unavailable, resolving = dict(settings), None, None
    if delta and not remote:  # a running Spark Connect server's jars and extensions are set where it starts
        try:
            for key, value in delta_conf().items():
                settings[key] = ",".join(filter(None, (settings.get(key), value))) if key in _LISTS else value
            if local:
                for key, value in DELTA_LOCAL_DEFAULTS.items():
                    settings.setdefault(key, value)
        except DeltaUnavailable as err:
            unavailable = str(err)
    if settings.get(PACKAGES) and not remote and not jvm_running():  # resolved before: named by path, no Ivy
        try:
            settings, resolving = with_cached_jars(settings, spark_build())
        except JarsUnavailable as err:
            if settings == without_delta:
                raise
            settings, unavailable = without_delta, str(err)
    try:
        spark = _build(settings, jvm=not remote)
    except Exception as err:
        if settings == without_delta:
            raise
        unavailable = (
            f"Spark did not start with delta-spark ({_jars_of(settings)}): its jars could not be fetched "
            f"from Maven Central through Ivy, or do not load ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}; Ivy's and Spark's messages are on stderr)"
        )
        spark, resolving = _build(without_delta, jvm=not remote), None
    if resolving is not None:
        _keep_resolution(spark, resolving, settings.get("spark.jars", ""))
    if writing is not None and writing[0] in settings.get("spark.driver.extraJavaOptions", ""):  # not the user's
        keep_at_exit(*writing)
    if delta and remote and not delta_configured(spark):
        unavailable = f"the Spark Connect server {remote} was not started with delta-spark ({DELTA_EXTENSION})"
    if unavailable is not None:
        _without_delta(spark, unavailable)
    context = spark_context(spark)
    if context is not None:  # a Spark Connect server keeps its own log settings
        context.setLogLevel("ERROR")
    if data_source:
        register(spark)
    return spark


def _class_data(write: bool) -> tuple[str, tuple[str, str] | None]:
    """The JVM options of the class-data archive for a JVM kafkalog starts, and (the name it writes, the
    archive's path) where it writes one. Only a speed-up: whatever goes wrong, no options."""
    try:
        java = find_java(os.environ)[0]
        path = archive_path(java) if java else None
        options, part = class_data_options(path, write=write)
    except Exception as err:  # e.g. pyspark's jars unreadable: Spark's own start says what is wrong
        log.debug("no class-data archive: %s", err)
        return "", None
    return options, (part, path) if part and path else None


def _without_delta(spark, unavailable: str) -> None:
    """Say, once and where `delta_unavailable` reads it, why `spark` has no delta-spark."""
    warnings.warn(f"kafkalog: {unavailable}; the purge ledger is written with the deltalake package", stacklevel=2)
    spark.conf.set(_DELTA_UNAVAILABLE, unavailable)


def _jars_of(settings: dict) -> str:
    """The jars a session was to start with: its packages, or the local jars named for them."""
    return settings.get(PACKAGES) or f"spark.jars={settings.get('spark.jars', '')}"


def _keep_resolution(spark, key: JarKey, given_jars: str) -> None:
    """Remember where Ivy put the jars of `key` for this session, so that the next start names them by path.
    Only a speed-up: where it cannot be written, the next start resolves them again, and a warning says so."""
    context = spark_context(spark)
    jars = resolved_jars(context.getConf().get("spark.jars", ""), given_jars) if context is not None else None
    if jars is None:
        return
    try:
        remember(key, jars, jars_root())
    except OSError as err:
        warnings.warn(f"kafkalog: the jars of {key} are not kept ({err}); the next start resolves them", stacklevel=1)


def fetch_jars(to: str | None = None) -> tuple[JarKey, list[str], str]:
    """Resolve delta-spark's jars for the installed Spark through Ivy now (downloading what Ivy's cache
    lacks), in a JVM started for that alone, and write their manifest where `local_session` looks for it
    (`jars_root`); with `to`, copy the jars and the manifest into that directory instead (for a machine that
    cannot reach Maven Central: `KAFKALOG_JARS_DIR` names it there). The key, the jars and the manifest."""
    check_startable()
    key = jar_key(delta_conf()[PACKAGES], spark_build())
    if key is None:
        raise JarsUnavailable("the Spark build the JVM would run cannot be told: no single spark-core jar in its jars")
    jars = resolve(key.packages, {"spark.master": "local[1]", "spark.driver.extraJavaOptions": _quiet_log4j_options()})
    return key, jars, copy_jars(key, jars, to) if to else remember(key, jars, jars_root())


def _build(settings: dict, *, jvm: bool):
    """A session with `settings`; `jvm`: a classic one, whose JVM kafkalog starts where none runs yet."""
    from pyspark.sql import SparkSession

    if jvm:
        launch_jvm(settings)
    builder = SparkSession.builder  # a new Builder each time
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
