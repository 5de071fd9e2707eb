"""`spark.read.format("kafkalog")`: the same DataFrames as the scan functions, options and pushed filters."""

from __future__ import annotations

import json

import pytest
from chispa import assert_df_equality

from kafkalog.spark import read_batches, read_records
from kafkalog.spark.datasource import pushdown_is_scan_scoped

pytestmark = pytest.mark.spark
ORDER = ("topic", "partition", "offset")
QUERY = "topic = 'orders' AND partition = 1 AND offset >= 100 AND offset < 200"


def test_format_kafkalog_equals_read_records_with_options_and_pushdown(spark, small_log):
    root = str(small_log.path)
    source = spark.read.format("kafkalog").load(root)
    everything = read_records(spark, root).orderBy(*ORDER)
    assert_df_equality(source.orderBy(*ORDER), everything)

    expected = read_records(spark, root, topics=["orders"], partitions=[1], start_offset=100, end_offset=200).orderBy(
        *ORDER
    )
    by_options = (
        spark.read.format("kafkalog")
        .option("topics", "orders")
        .option("partitions", "1")
        .option("startingOffset", 100)
        .option("endingOffset", 200)
        .load(root)
    )
    filtered = source.filter(QUERY)  # pushed only where Spark scopes pushdown to the scan
    for df in (by_options, filtered):
        assert_df_equality(df.orderBy(*ORDER), expected)
    assert expected.count() == 100
    # options prune the plan: a task per needed segment of orders-1
    assert by_options.rdd.getNumPartitions() < source.rdd.getNumPartitions()

    batches = spark.read.format("kafkalog").option("view", "batches").option("topics", "payments,clicks").load(root)
    assert_df_equality(
        batches.orderBy("topic", "partition", "baseOffset"),
        read_batches(spark, root, topics=["payments", "clicks"]).orderBy("topic", "partition", "baseOffset"),
    )
    assert batches.filter("isControl").count() > 0


def test_pushdown_never_changes_an_answer(spark, small_log):
    """count, a filtered count, count again on one DataFrame: on a Spark that shares pushed state
    between the queries of a load() (4.1 to 4.3), the third count read only partition 1 with
    pushdown=true. There pushdown=true is refused at load(); where Spark scopes it to the scan, it
    is on and the counts are right."""
    root = str(small_log.path)
    everything = read_records(spark, root).count()
    in_partition_1 = read_records(spark, root, partitions=[1]).count()
    assert 0 < in_partition_1 < everything
    scoped = pushdown_is_scan_scoped(spark)
    if scoped:
        df = spark.read.format("kafkalog").option("pushdown", "true").load(root)
        pushed = df.filter("partition = 1")
        assert "EqualTo(partition,1)" in pushed._jdf.queryExecution().executedPlan().toString()
        assert pushed.rdd.getNumPartitions() < df.rdd.getNumPartitions()
    else:
        with pytest.raises(Exception, match="option pushdown=true is refused"):
            spark.read.format("kafkalog").option("pushdown", "true").load(root)
        df = spark.read.format("kafkalog").load(root)
    assert (df.count(), df.filter("partition = 1").count(), df.count()) == (everything, in_partition_1, everything)


def test_an_unknown_option_fails_load_with_the_closest_name(spark, small_log):
    reader = spark.read.format("kafkalog").option("startingOfset", 5)
    with pytest.raises(Exception, match=r"unknown option 'startingofset'.*did you mean 'startingOffset'"):
        reader.load(str(small_log.path))
    # names are case-insensitive, as Spark's are
    df = spark.read.format("kafkalog").option("TOPICS", "orders").option("PARTITIONS", "1").load(str(small_log.path))
    assert df.select("topic", "partition").distinct().collect() == [("orders", 1)]


def test_spark_kafka_source_options(spark, small_log):
    """Spark's Kafka source options through format("kafkalog"): the layers agree (the options
    themselves are tested below Spark, tests/spark/test_source_options.py)."""
    root = str(small_log.path)
    df = (
        spark.read.format("kafkalog")
        .option("subscribe", "orders")
        .option("startingOffsets", '{"orders": {"0": 10, "1": -2}}')
        .option("endingOffsets", '{"orders": {"0": 20, "1": 5}}')
        .option("includeHeaders", "false")
        .load(root)
    )
    assert df.columns[:7] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert "headers" not in df.columns
    assert sorted(df.select("partition", "offset").collect()) == [(0, o) for o in range(10, 20)] + [
        (1, o) for o in range(5)
    ]
    with pytest.raises(Exception, match=r"option topics names topic 'nosuch', which the log dir does not hold"):
        spark.read.format("kafkalog").option("topics", "nosuch").load(root).count()
    with pytest.raises(Exception, match=r"options topics and subscribe both give the topics to read"):
        spark.read.format("kafkalog").option("topics", "orders").option("subscribe", "orders").load(root)


def test_read_stream_reads_between_kafka_offsets(spark, small_log, tmp_path):
    """readStream through Spark (the micro-batches of a growing log dir are tested below Spark)."""
    root = str(small_log.path)
    stream = spark.readStream.format("kafkalog").option("subscribe", "orders").load(root)
    query = (
        stream.writeStream.format("memory")
        .queryName("kafkalog_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        batch = spark.read.format("kafkalog").option("subscribe", "orders").load(root)
        assert_df_equality(spark.table("kafkalog_stream").orderBy(*ORDER), batch.orderBy(*ORDER))
        ends = json.loads(query.lastProgress["sources"][0]["endOffset"])
        assert ends == {"orders": {str(p): n for p, n in batch.groupBy("partition").count().collect()}}
    finally:
        query.stop()
