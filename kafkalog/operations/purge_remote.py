"""The remote tier of a purge (tiered storage, KIP-405): the remote segments of the purged
partitions, in Kafka's LocalTieredStorage layout on a path or an object store, lose the records of
the purged keys too. kafkalog/operations/purge.py calls `purge_remote_tier` once the local log is
purged; docs/semantics.md says what changes for the broker.

1. Recover: a rewrite an interrupted purge left staged is finished or undone
   (storage/remote_rewrite.py).
2. Decide (executors): every complete fileset of every purged partition that has a remote
   directory, whether or not its local segment is still there, with the local purge's rules
   (spark/remote_purge.RemoteDecider). Filesets without every file (a copy that was cut) are not
   read; the summary names them.
3. Stage (executors): one rewrite per remote segment with a purged record, with its offset, time
   and transaction indexes rebuilt, staged beside it and read back.
4. Ledger: the rows go to the ledger before the swap (as the local purge's), under the remote
   storage's name in the `log_dir` column.
5. Swap (driver): each staged rewrite is committed and moved into place; the broker's cached copies
   of the segment's indexes in the log dir (`remote-log-index-cache/`) are deleted.
6. Verify (executors): the rewritten partitions are decided again and must leave nothing to do.

`__remote_log_metadata` is not rewritten: its `segmentSizeInBytes` of a rewritten segment stays the
old size (reported per segment as `metadataSize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..codec.remote_log_metadata import RemoteLogSegments
from ..config import ConfigResolver
from ..errors import KafkaLogError
from ..spark.ledger import write_ledger_records
from ..spark.purge import Decider, batch_plans, partition_report
from ..spark.remote_purge import RemoteDecider, RemoteTarget, discard_all, stage_remote
from ..storage.logdir import LogDir
from ..storage.remote_log import RemotePartition, RemoteStorage, read_remote_log_metadata, topic_id
from ..storage.remote_rewrite import clear_remote_index_cache, commit_and_swap, recover_remote_partition
from ..storage.swap import FaultHook
from .files import camel_keys


class RemotePurgeVerificationError(KafkaLogError):
    """The rescan of the remote tier after a purge found a record that should be gone."""


@dataclass
class RemotePurgeResult:
    storage: str
    partitions: list[dict]  # per remote partition: what was (or would be) purged, and the verification
    segments: list[dict] = field(default_factory=list)  # per rewritten remote segment
    recovered: list[str] = field(default_factory=list)  # interrupted rewrites finished or undone
    incomplete: list[str] = field(default_factory=list)  # files of filesets that are not complete (not read)
    ledger_rows: int = 0
    index_cache_deleted: list[str] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return sum(p["remaining"] or 0 for p in self.partitions)

    def summary(self, dry_run: bool) -> str:
        removed = sum(p["removed"] for p in self.partitions)
        text = f"remote tier ({self.storage}): {'would remove' if dry_run else 'removed'} {removed} records"
        if not dry_run:
            text += (
                f", {len(self.segments)} remote segments rewritten; ledger: {self.ledger_rows} rows added; "
                f"verified: {self.remaining} records of purged keys remain"
            )
        if self.recovered:
            text += f"; {'; '.join(self.recovered)}"
        if self.incomplete:
            text += (
                f"; WARNING: {len(self.incomplete)} files of incomplete remote filesets (copies the broker did not "
                f"finish, which it deletes) were not read, e.g. {self.incomplete[0]}"
            )
        return text

    def to_dict(self) -> dict:
        return camel_keys(
            {
                "storage": self.storage,
                "partitions": self.partitions,
                "segments": self.segments,
                "recovered": self.recovered,
                "incomplete": self.incomplete,
                "ledger_rows": self.ledger_rows,
                "index_cache_deleted": self.index_cache_deleted,
            }
        )


def purge_remote_tier(
    decider: Decider,
    copies: Sequence[LogDir],
    remote_storage: str,
    scope: list[tuple[str, int]],
    resolver: ConfigResolver,
    *,
    now: int,
    dry_run: bool,
    ledger: str | None,
    secret: bytes | None,
    run_id: str,
    fault: FaultHook | None = None,
) -> RemotePurgeResult:
    """Purge the remote segments of the partitions of `scope` (of the local `copies`, every broker's
    log dirs given, which share the one remote tier) that have a remote
    directory in `remote_storage`, with the rules of the local purge's `decider` (the module docstring)."""
    storage = RemoteStorage.open(remote_storage)
    paths = _remote_paths(copies, storage, scope)
    result = RemotePurgeResult(remote_storage, [])
    if not dry_run:  # a dry run, which writes nothing, is refused by RemotePartition.open instead
        for path in paths.values():
            result.recovered += recover_remote_partition(storage.fs, path)
    parts = {tp: RemotePartition.open(storage.fs, path) for tp, path in paths.items()}
    for part in parts.values():
        result.incomplete += part.incomplete
    if not parts:
        return result
    remote = _decider(decider, storage, remote_storage, parts)
    matched, decided = remote.decide_partitions(sorted(parts))
    try:  # one remote copy: the report's rows need no `copy`
        result.partitions = [{k: v for k, v in p.items() if k != "copy"} for p in partition_report(decided)]
        if dry_run:
            return result
        targets = _targets(decided, parts, resolver, now)
        sizes: dict = {}  # read before anything is staged; each broker holds some metadata partitions
        for opened in copies:
            sizes |= _metadata_sizes(read_remote_log_metadata(opened))
        stats = stage_remote(remote.spark, remote_storage, targets, batch_plans(decided), fault)
        try:
            assert ledger is not None and secret is not None  # operations/purge.py requires both
            result.ledger_rows = write_ledger_records(
                remote.spark,
                ledger,
                decided.where(decided.action.isNotNull()),
                secret=secret,
                run_id=run_id,
                purged_at_ms=now,
                log_dir=remote_storage,
            )
        except BaseException:  # nothing is swapped in: the staged rewrites go
            discard_all(remote_storage, targets)
            raise
    finally:
        matched.unpersist()
    for target, stat in zip(targets, stats):
        path = target.partition_path
        commit_and_swap(storage.fs, path, target.start, target.segment_id)
        for opened in copies:  # every broker caches the remote indexes it read
            result.index_cache_deleted += clear_remote_index_cache(
                opened.fs, opened.path, target.start, target.segment_id
            )
        result.segments.append(
            {
                "topic": target.topic,
                "partition": target.partition,
                "start_offset": target.start,
                "segment_id": target.segment_id,
                "records_in": stat.records_in,
                "records_out": stat.records_out,
                "bytes_in": stat.bytes_in,
                "bytes_out": stat.bytes_out,
                "metadata_size": sizes.get(target.segment_id),
            }
        )
    _verify(decider, storage, remote_storage, paths, result, {(t.topic, t.partition) for t in targets})
    if result.remaining:
        first = next(p for p in result.partitions if p["remaining"])
        raise RemotePurgeVerificationError(
            f"after the rewrite {result.remaining} records of purged keys remain in remote storage, "
            f"{first['remaining']} in {first['topic']}-{first['partition']} (run {run_id})",
            file=remote_storage,
        )
    return result


def _remote_paths(copies: Sequence[LogDir], storage: RemoteStorage, scope: list[tuple[str, int]]) -> dict:
    """(topic, partition) -> the remote directory of each partition of `scope` that has one: that of
    its topic id (`partition.metadata`; without one, the only directory of its name)."""
    out = {}
    for topic, number in scope:
        tid = topic_id(next(o for o in copies if (topic, number) in o.partition_paths).partition(topic, number))
        found = [
            p
            for p in storage.partition_paths.get((topic, number), [])
            if tid is None or storage.fs.name(p).endswith(f"-{tid}")
        ]
        if len(found) > 1:
            raise KafkaLogError(
                f"{len(found)} remote directories of partition {topic}-{number} and no partition.metadata to "
                "tell which is the live topic's",
                file=storage.path,
            )
        if found:
            out[(topic, number)] = found[0]
    return out


def _decider(local: Decider, storage: RemoteStorage, root: str, parts: dict) -> RemoteDecider:
    segments = [s for _, part in sorted(parts.items()) for s in part.segments]
    return RemoteDecider(local, root, segments, storage.fs.is_local)


def _targets(decided, parts: dict, resolver: ConfigResolver, now: int) -> list[RemoteTarget]:
    """One target per remote segment with a purged record."""
    touched = (
        decided.where(decided.action.isNotNull()).select("topic", "partition", "segmentBaseOffset").distinct().collect()
    )
    out = []
    for r in sorted(touched):
        part, config = parts[(r.topic, r.partition)], resolver.for_topic(r.topic)
        out.append(
            RemoteTarget(
                r.topic,
                r.partition,
                r.segmentBaseOffset,
                part.segment_ids[r.segmentBaseOffset],
                part.path,
                now + config.delete_retention_ms,
                config.index_interval_bytes,
            )
        )
    return out


def _metadata_sizes(metadata: RemoteLogSegments | None) -> dict:
    """segment id -> segmentSizeInBytes as `__remote_log_metadata` records it."""
    return {sid: s.size for segments in (metadata or {}).values() for sid, s in segments.items()}


def _verify(local: Decider, storage: RemoteStorage, root: str, paths: dict, result: RemotePurgeResult, touched) -> None:
    """Decide the rewritten partitions again, as they are now: `remaining` counts what is left to do."""
    from pyspark.sql import functions as F

    left = {}
    if touched:
        parts = {tp: RemotePartition.open(storage.fs, paths[tp]) for tp in sorted(touched)}
        matched, decided = _decider(local, storage, root, parts).decide_partitions(sorted(parts))
        rows = decided.where(F.col("action").isNotNull()).groupBy("topic", "partition").count().collect()
        matched.unpersist()
        left = {(r.topic, r.partition): r["count"] for r in rows}
    for p in result.partitions:
        p["remaining"] = left.get((p["topic"], p["partition"]), 0)
