"""Committed consumer-group offsets, from the log directory's own `__consumer_offsets` partitions.

The records are read with the scan on executors; which of them count is decided with DataFrame
expressions, as the group coordinator decides when it loads a partition: control records never
count, a transactional record counts only once the next marker of its producer in that partition is
a COMMIT (aborted and still-open transactions do not), and the last offset commit per (group, topic,
partition) in log order wins unless it is a tombstone. Keys and values are decoded on executors with
`kafkalog.storage.consumer_offsets.decode_record`, so a corrupt record fails the job with a
KafkaLogError naming its partition and offset.
"""
from __future__ import annotations

import pyarrow as pa

from ..codec.control import ControlType
from ..errors import KafkaLogError
from ..storage.consumer_offsets import GroupMetadataKey, OffsetCommitKey, decode_record
from .scan import read_records, spark_schema

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

DECODED_SCHEMA = pa.schema([
    ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("kind", pa.string()),
    ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("leader_epoch", pa.int32()), ("metadata", pa.string()), ("commit_timestamp", pa.int64()),
    ("tombstone", pa.bool_()),
])

COMMITTED_COLUMNS = ("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp")


def decode_coordinator_records(batches):
    """mapInArrow body: (partition, offset, key, value) batches to `DECODED_SCHEMA` batches."""
    for batch in batches:
        columns = {name: [] for name in DECODED_SCHEMA.names}
        for partition, offset, key, value in zip(*(batch.column(n).to_pylist()
                                                    for n in ("partition", "offset", "key", "value"))):
            try:
                record = decode_record(key, value)
            except KafkaLogError as err:
                located = err.located(file=f"{CONSUMER_OFFSETS_TOPIC}-{partition}", offset=offset)
                located.offset = offset
                raise located from None
            row = dict.fromkeys(DECODED_SCHEMA.names)
            row.update(log_partition=partition, log_offset=offset, tombstone=record.value is None)
            if isinstance(record.key, OffsetCommitKey):
                row.update(kind="offset_commit", group=record.key.group, topic=record.key.topic,
                           partition=record.key.partition)
                if record.value is not None:
                    row.update(offset=record.value.offset, leader_epoch=record.value.leader_epoch,
                               metadata=record.value.metadata, commit_timestamp=record.value.commit_timestamp)
            elif isinstance(record.key, GroupMetadataKey):
                row.update(kind="group_metadata", group=record.key.group)
            else:
                row.update(kind="other")
            for name in DECODED_SCHEMA.names:
                columns[name].append(row[name])
        yield pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in DECODED_SCHEMA],
                                         schema=DECODED_SCHEMA)


def effective_records(records):
    """The records of `__consumer_offsets` that the coordinator applies: no control records, and
    transactional records only where the next marker of the same producer is a COMMIT."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    control_type = F.when(F.col("is_control") & (F.length("key") >= 4),
                          F.conv(F.hex(F.substring("key", 3, 2)), 16, 10).cast("int"))
    plain = records.filter(~F.col("is_transactional") & ~F.col("is_control"))
    following = (Window.partitionBy("partition", "producer_id").orderBy("offset")
                 .rowsBetween(1, Window.unboundedFollowing))
    fate = F.first(F.when(F.col("is_control"), control_type), ignorenulls=True).over(following)
    committed = (records.filter(F.col("is_transactional"))
                 .withColumn("_fate", fate)
                 .filter(~F.col("is_control") & (F.col("_fate") == int(ControlType.COMMIT)))
                 .drop("_fate"))
    return plain.unionByName(committed)


def committed_offsets_df(spark, log_dir):
    """(group, topic, partition, offset, leader_epoch, metadata, commit_timestamp) of every live
    commit in `log_dir`'s `__consumer_offsets`: the latest commit per (group, topic, partition) in
    log order, none where that latest record is a tombstone. `commit_timestamp` is epoch ms."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    records = read_records(spark, log_dir, topics=[CONSUMER_OFFSETS_TOPIC]).select(
        "partition", "offset", "key", "value", "producer_id", "is_transactional", "is_control")
    decoded = (effective_records(records).select("partition", "offset", "key", "value")
               .mapInArrow(decode_coordinator_records, spark_schema(DECODED_SCHEMA)))
    latest = Window.partitionBy("group", "topic", "partition").orderBy(F.desc("log_partition"), F.desc("log_offset"))
    return (decoded.filter(F.col("kind") == "offset_commit")
            .withColumn("_rank", F.row_number().over(latest))
            .filter((F.col("_rank") == 1) & ~F.col("tombstone"))
            .select(*COMMITTED_COLUMNS))
