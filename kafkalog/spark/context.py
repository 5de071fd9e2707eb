"""Classic or Spark Connect: the one place kafkalog tells the two kinds of SparkSession apart.

A Spark Connect session (Databricks serverless and shared clusters, `SparkSession.builder.remote(...)`,
`spark.api.mode=connect`) has no SparkContext: no RDDs, accumulators, status tracker nor JVM gateway.
kafkalog's plans are DataFrames either way; what only a classic session offers is asked for here.
"""

from __future__ import annotations

import os
import subprocess
import threading

# The JDK prints this line on stderr when its JVM resolves an incubator module, and Spark's launcher
# gives every driver `--add-modules=jdk.incubator.vector` (org.apache.spark.launcher.JavaModuleOptions):
# no Spark or JVM option turns the line off, so the JVM kafkalog starts passes its stderr through a filter.
INCUBATOR_WARNING = b"WARNING: Using incubator modules: "


def spark_context(spark):
    """The SparkContext of a classic session; None for a Spark Connect session, which has none."""
    if type(spark).__module__.startswith("pyspark.sql.connect."):
        return None
    return spark.sparkContext


def map_numbers(spark, count: int, function) -> list | None:
    """`function(i)` for i in range(count), one Spark task each, as an RDD of the numbers on a
    classic session (the results pickled back, in order); None on a Spark Connect session, which has
    no RDDs (tasks.run_tasks then runs a DataFrame)."""
    context = spark_context(spark)
    if context is None:
        return None
    return context.parallelize(range(count), count).map(function).collect()


def executors_on_this_host(spark) -> bool:
    """Whether every task of `spark` runs on this host, so that a local path the driver makes is one
    they reach: no session (the tasks run in this process), or a classic session in local mode."""
    if spark is None:
        return True
    context = spark_context(spark)
    return context is not None and context.master.startswith("local")


_CONNECT_PARALLELISM: dict[str, int] = {}  # per Spark Connect session id


def default_parallelism(spark) -> int:
    """Spark's default parallelism (the cores of a local session or a cluster's executors). A
    Spark Connect client cannot ask for it: a range of rows without a partition count is cut into
    that many partitions on the server, so one small job per session counts them."""
    context = spark_context(spark)
    if context is not None:
        return int(context.defaultParallelism)
    if spark.session_id not in _CONNECT_PARALLELISM:
        from pyspark.sql import functions as F

        (last,) = spark.range(0, 1 << 20).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()
        _CONNECT_PARALLELISM[spark.session_id] = int(last) + 1
    return _CONNECT_PARALLELISM[spark.session_id]


def launch_jvm(settings: dict) -> None:
    """Start the JVM a new classic session will use, as pyspark would (spark-submit with `settings` as
    `--conf`), but with its stderr copied to this process's without the JDK's incubator-module warning.
    Nothing to do where pyspark has a JVM already, or where spark-submit started this process."""
    from pyspark import SparkContext

    if jvm_running():
        return
    SparkContext._ensure_initialized(gateway=start_gateway(settings))


def start_gateway(settings: dict):
    """A JVM of Spark's started by spark-submit with `settings` (which resolves `spark.jars.packages`), its
    stderr passed through `_pass_stderr` and its stdout copied as it is: pyspark's gateway to it.

    The JVM writes to pipes of this process rather than to its file descriptors, so that it holds
    none of the caller's: a script that reads the command's output (`$(kafkalog ...)`, a
    subprocess with captured output) gets its end when the command exits, not when the JVM has
    also shut down (some 0.5 s later: it stops when its stdin, this process's pipe, closes)."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.PIPE})
    threading.Thread(target=_pass_stdout, args=(gateway.proc.stdout,), name="kafkalog-jvm-stdout", daemon=True).start()
    threading.Thread(target=_pass_stderr, args=(gateway.proc.stderr,), name="kafkalog-jvm-stderr", daemon=True).start()
    return gateway


def running_session():
    """The classic session this process runs that is not active in this thread (a session is active
    in the thread that started it: `start_session`'s), or None. `getOrCreate` would take it and set
    the settings it is given on it: Delta's catalog, on a session whose JVM started without Delta's
    jars, then fails every table read with "DeltaCatalog class not found"."""
    from pyspark.sql import SparkSession

    running = getattr(SparkSession, "_instantiatedSession", None)
    context = getattr(running, "_sc", None)
    return running if context is not None and context._jsc is not None else None


def jvm_running() -> bool:
    """Whether this process has Spark's JVM already: pyspark started one, or spark-submit started this process."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def _pass_stdout(stream) -> None:
    """Copy the JVM's stdout to file descriptor 1, where the JVM would have written it."""
    for chunk in iter(lambda: stream.read1(65536), b""):
        try:
            os.write(1, chunk)
        except OSError:  # stdout closed: keep draining, or the JVM would block on a full pipe
            pass


def _pass_stderr(stream) -> None:
    """Copy the JVM's stderr (Spark's errors, Python workers' tracebacks) to file descriptor 2, where
    the JVM would have written it, but for the incubator warning and Ivy's report (`IvyReport`)."""
    ivy = IvyReport()
    for line in iter(stream.readline, b""):
        shown = b"" if line.startswith(INCUBATOR_WARNING) else ivy.shown(line)
        if shown:
            try:
                os.write(2, shown)
            except OSError:  # stderr closed: keep draining, or the JVM would block on a full pipe
                pass


FETCHING = b"kafkalog: fetching delta-spark's jars from Maven Central into Ivy's cache (once: later runs use them)\n"


class IvyReport:
    """Ivy's report of the jars `spark.jars.packages` names (delta-spark's), which Spark prints on every
    start, some 90 lines even when every jar is in the cache: left out, but for one line when a jar is
    downloaded (the first start fetches some 90 MB, so it says so rather than seem to hang) and for
    anything from Ivy's problems summary on (a jar that cannot be fetched), which passes whole."""

    START = b":: loading settings ::"
    END = b" artifacts copied, "  # the retrieve step's last line
    PROBLEMS = b":: problems summary ::"

    def __init__(self) -> None:
        self.inside = self.downloading = False

    def shown(self, line: bytes) -> bytes:
        """What of `line` reaches stderr."""
        if line.startswith(self.START):
            self.inside = True
        if not self.inside:
            return line
        if line.startswith(self.PROBLEMS):
            self.inside = False
            return line
        if self.END in line:
            self.inside = False
        if line.startswith(b"downloading ") and not self.downloading:
            self.downloading = True
            return FETCHING
        return b""
