"""The remote tier of a purge as a Spark plan (the command is kafkalog/operations/purge_remote.py):
the decide step over remote segments, and their rewrites staged on executors.

The remote segments are decided apart from the local log, by a `Decider` of their own with the
local purge's rules (spark/purge.py): the same key match and `where`, and the same actions, batch
plans and rewrite. Apart because a remote segment may hold the same offsets as a local one (a
segment stays local until local retention deletes it), and both copies are purged; one decide over
both would have to tell the two copies of an offset apart in every step after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import KafkaLogError
from ..scan.scan_plan import ScanFilter, plan_segments
from ..scan.views import filesystem_and_path
from ..storage.remote_log import RemotePartition
from ..storage.remote_rewrite import discard_staged, stage_remote_segment, staging_path
from ..storage.segment import LogSegment
from ..storage.swap import FaultHook
from .errors import collected, worker_error
from .purge import Decider, PurgeScope
from .rewrite import PLAN_COLUMNS, plans_from_table
from .scan import default_min_tasks, scan_dataframe

# The FaultHook step each staging task calls, on its executor, with the staging directory's path.
STAGE_STEP = "stage remote"
_STAGED = "target int, records_in long, records_out long, bytes_in long, bytes_out long, error string"


class RemoteDecider(Decider):
    """A Decider over remote segments (LogSegments of `storage/remote_log.RemotePartition`s on the
    filesystem of `root`, the remote storage's path or URI), with the keys, `where` and reason of the
    local purge's decider. The remote tier is one copy, which every broker's copies share: its log
    end offsets are the largest of theirs. Never a tombstone: Kafka tiers no compacted topic
    (LogConfig refuses remote.storage.enable with cleanup.policy=compact)."""

    def __init__(self, local: Decider, root: str, segments: Sequence[LogSegment], is_local: bool):
        from pyspark.sql import functions as F

        # the local decider's inputs, taken as they are (its own __init__ would build them again)
        self.spark, self.keys, self.broadcast, self.where = local.spark, local.keys, local.broadcast, local.where
        self.resolver, self.reason, self.tombstone = local.resolver, local.reason, False
        self.log_ends = (
            local.log_ends.groupBy("topic", "partition")
            .agg(F.max("log_end").alias("log_end"))
            .withColumn("copy", F.lit(0))
        )
        self.log_dir, self.segments, self.is_local = root, list(segments), is_local
        self.chosen: list[LogSegment] = []

    def decide_partitions(self, parts: Sequence[tuple[str, int]]):
        """(matched, decided) over the remote segments of `parts`, as `Decider.decide` over a plan."""
        wanted = set(parts)
        self.chosen = [s for s in self.segments if (s.topic, s.partition) in wanted]
        remote = PurgeScope(())  # no local copy: `_scan` reads the chosen remote segments
        matched = self._matched(remote).cache()
        return matched, self._with_actions(remote, matched, [])

    def _scan(self, plan, view: str, segment_ends: bool = False):
        """`view` of the chosen remote segments (never with `segment_ends`: the log ends are the local copies')."""
        from pyspark.sql import functions as F

        scan_plan = plan_segments(
            self.log_dir, self.chosen, ScanFilter(), is_local=self.is_local, min_tasks=default_min_tasks(self.spark)
        )
        return scan_dataframe(self.spark, scan_plan, view).withColumn("copy", F.lit(0)).where(~F.col("isControl"))


@dataclass(frozen=True)
class RemoteTarget:
    """A remote segment to rewrite: where it is and how (as OutputSegment for a local one)."""

    topic: str
    partition: int
    start: int
    segment_id: str
    partition_path: str
    delete_horizon_ms: int
    index_interval_bytes: int


@dataclass(frozen=True)
class StagedStats:
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int


def stage_remote(
    spark, root: str, targets: Sequence[RemoteTarget], plans, fault: FaultHook | None = None
) -> list[StagedStats]:
    """Stage every target's rewrite (storage/remote_rewrite.py), one Spark task per segment, its
    batch plans (`PLAN_COLUMNS` rows, spark/purge.batch_plans) grouped to it. Any failure leaves no
    staging directory behind and raises a KafkaLogError naming a file."""
    if not targets:
        return []
    from pyspark.sql import functions as F

    targets = list(targets)
    plans = plans.select(*[c if c in plans.columns else F.lit(None).alias(c) for c in PLAN_COLUMNS])
    chosen = spark.createDataFrame(
        [(t.topic, t.partition, t.start, i) for i, t in enumerate(targets)],
        "topic string, partition int, segmentBaseOffset long, target int",
    )

    def stage(table):
        import pyarrow as pa

        i = table.column("target")[0].as_py()
        target = targets[i]
        fs, _ = filesystem_and_path(root)
        try:
            if fault is not None:
                fault(STAGE_STEP, staging_path(fs, target.partition_path, target.start, target.segment_id))
            segment = next(
                s
                for s in RemotePartition.open(fs, target.partition_path, staging_ok=True).segments
                if s.base_offset == target.start
            )
            s = stage_remote_segment(
                fs,
                target.partition_path,
                segment,
                target.segment_id,
                plans_from_table(table.select(list(PLAN_COLUMNS))),
                delete_horizon_ms=target.delete_horizon_ms,
                index_interval_bytes=target.index_interval_bytes,
            )
            row = {"target": i, "records_in": s.records_in, "records_out": s.records_out}
            row |= {"bytes_in": s.bytes_in, "bytes_out": s.bytes_out, "error": None}
        except Exception as err:  # returned, not raised: the other segments' tasks finish
            known = err if isinstance(err, KafkaLogError) else None
            error = known or KafkaLogError(
                f"staging the rewrite failed: {type(err).__name__}: {' '.join(str(err).split())}",
                file=fs.join(target.partition_path, f"{target.start:020d}-{target.segment_id}.log"),
            )
            row = {"target": i, "error": worker_error(error)}
        return pa.Table.from_pylist([row], schema=_arrow_schema())

    staged = (
        plans.join(chosen, ["topic", "partition", "segmentBaseOffset"]).groupBy("target").applyInArrow(stage, _STAGED)
    )
    rows = collected(staged.collect, "a remote staging task", lambda: discard_all(root, targets))
    by_target = {r.target: r for r in rows}
    return [
        StagedStats(by_target[i].records_in, by_target[i].records_out, by_target[i].bytes_in, by_target[i].bytes_out)
        for i in range(len(targets))
    ]


def discard_all(root: str, targets: Sequence[RemoteTarget]) -> None:
    """Delete every target's staging directory (a step after staging failed); one that cannot be
    deleted stays for the next run's recovery, which deletes an uncommitted one."""
    fs, _ = filesystem_and_path(root)
    for t in targets:
        try:
            discard_staged(fs, staging_path(fs, t.partition_path, t.start, t.segment_id))
        except (OSError, KafkaLogError):
            continue


def _arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [("target", pa.int32())]
        + [(n, pa.int64()) for n in ("records_in", "records_out", "bytes_in", "bytes_out")]
        + [("error", pa.string())]
    )
