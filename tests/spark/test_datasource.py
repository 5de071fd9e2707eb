"""`spark.read.format("kafkalog")`: the same DataFrames as the scan functions, options and pushed filters."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from kafkalog.spark import read_batches, read_records

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
    pushed = spark.read.format("kafkalog").option("pushdown", "true").load(root).filter(QUERY)
    filtered = source.filter(QUERY)  # pushed only where Spark scopes pushdown to the scan
    for df in (by_options, pushed, filtered):
        assert_df_equality(df.orderBy(*ORDER), expected)
    assert expected.count() == 100
    # filtering a DataFrame never changes what the DataFrame itself reads
    assert source.count() == everything.count()
    # options and pushed filters prune the plan: a task per needed segment of orders-1
    assert pushed.rdd.getNumPartitions() == by_options.rdd.getNumPartitions() < source.rdd.getNumPartitions()

    batches = spark.read.format("kafkalog").option("view", "batches").option("topics", "payments,clicks").load(root)
    assert_df_equality(
        batches.orderBy("topic", "partition", "baseOffset"),
        read_batches(spark, root, topics=["payments", "clicks"]).orderBy("topic", "partition", "baseOffset"),
    )
    assert batches.filter("isControl").count() > 0
