"""Classic or Spark Connect: the one place kafkalog tells the two kinds of SparkSession apart.

A Spark Connect session (Databricks serverless and shared clusters, `SparkSession.builder.remote(...)`,
`spark.api.mode=connect`) has no SparkContext: no RDDs, accumulators, status tracker nor JVM gateway.
kafkalog's plans are DataFrames either way; what only a classic session offers is asked for here.
"""

from __future__ import annotations


def spark_context(spark):
    """The SparkContext of a classic session; None for a Spark Connect session, which has none."""
    if type(spark).__module__.startswith("pyspark.sql.connect."):
        return None
    return spark.sparkContext


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
