"""Committed consumer-group offsets, from the log directory's own `__consumer_offsets` partitions.

Each partition is replayed on an executor with `kafkalog.codec.consumer_offsets.replay_committed_offsets`,
the rules the group coordinator applies when it loads a partition (control records never count,
transactional commits only once committed, the last commit per key in log order wins, tombstones
remove). A commit key lives in exactly one partition, so the partitions' results simply add up.
"""

from __future__ import annotations

from ..topics import CONSUMER_OFFSETS_TOPIC
from .tasks import task_frame

COMMITTED_COLUMNS = ("group", "topic", "partition", "offset", "leaderEpoch", "metadata", "commitTimestamp")
COMMITTED_SCHEMA = (
    "`group` string, topic string, partition int, offset long, leaderEpoch int, metadata string, commitTimestamp long"
)
_ARROW_TYPES = ("string", "string", "int32", "int64", "int32", "string", "int64")  # COMMITTED_SCHEMA's


def _replay(log_dir: str, number: int) -> list[tuple]:
    from ..codec.consumer_offsets import replay_committed_offsets
    from ..storage.logdir import LogDir

    commits = replay_committed_offsets(LogDir.open(log_dir).partition(CONSUMER_OFFSETS_TOPIC, number).batches())
    return [
        (group, topic, partition, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
        for (group, topic, partition), v in sorted(commits.items())
    ]


def committed_offsets_df(spark, log_dir):
    """(group, topic, partition, offset, leaderEpoch, metadata, commitTimestamp) of every live
    commit in `log_dir`'s `__consumer_offsets`; `commitTimestamp` is epoch ms. One Spark task per
    partition, with `mapInArrow` (no RDD: Spark Connect sessions run it too)."""
    from ..storage.logdir import LogDir

    numbers = [p for t, p in LogDir.open(log_dir).topic_partitions if t == CONSUMER_OFFSETS_TOPIC]

    def replay(i: int):
        import pyarrow as pa

        schema = pa.schema(list(zip(COMMITTED_COLUMNS, _ARROW_TYPES)))
        rows = _replay(log_dir, numbers[i])
        if rows:
            columns = [pa.array(column, t) for column, t in zip(zip(*rows), schema.types)]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    return task_frame(spark, len(numbers), replay, COMMITTED_SCHEMA)
