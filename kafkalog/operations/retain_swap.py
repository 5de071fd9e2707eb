"""Retention carried out in a partition directory: a partition's plan (retain_partition.py) applied
in place, and the recovery a next run does first.

Order of the in-place steps (`apply_in_place`), and what a crash leaves (after `recover`, which the
next run does first): (1) new segments are staged as `.cleaned` (the rolled empty segment, the
truncated segment) and a producer snapshot at the log end offset is written when a roll needs one;
(2) producer snapshots below the new log start offset go (Kafka drops them on load anyway) -- a
crash up to here leaves the old log; (3) `log-start-offset-checkpoint` (and the cleaner, recovery
point and high watermark checkpoints where they fell below the new start), then
`leader-epoch-checkpoint` -- from here the log as Kafka reads it (from the log start offset) is the
new one; (4) `swap.replace_segments`. A crash after (3) leaves segments wholly below the log start
offset, which Kafka's next retention pass deletes and so does the next run: every intermediate
directory validates clean once recovered (`recover`: Kafka's swap recovery, and index files left
without their `.log` deleted, as Kafka's loader does), and a rerun ends in the same bytes as an
uninterrupted run.
"""

from __future__ import annotations

from ..storage.checkpoint import format_leader_epoch_checkpoint
from ..storage.fs import LogFileSystem
from ..storage.log_writer import SegmentWriter
from ..storage.logdir import LogDir
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    segment_file_name,
)
from ..storage.partition import Partition
from ..storage.producer_state import replay_partition
from ..storage.rewrite import CLEANED, rewrite_segments
from ..storage.swap import FaultHook, no_fault, recover_partition, replace_segments
from .retain_partition import PartitionPlan

_CHECKPOINT_ORDER = (
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)


def _index_interval(plan: PartitionPlan) -> int:
    return plan.config.index_interval_bytes


def _stage_new_segments(part: Partition, plan: PartitionPlan, now_ms: int) -> list[int]:
    """Write the truncated segment and the rolled empty segment beside the old ones, as `.cleaned`."""
    fs, dir_path, suffix = part.fs, part.path, CLEANED
    bases = []
    if plan.truncation is not None:
        source = next(s for s in part.segments if s.base_offset == plan.truncation.base_offset)
        rewrite_segments(
            fs,
            dir_path,
            [source],
            plan.truncation.plans,
            delete_horizon_ms=now_ms + plan.config.delete_retention_ms,
            index_interval_bytes=_index_interval(plan),
            aborted_txns=source.aborted_txns(),
            suffix=suffix,
        )
        bases.append(source.base_offset)
    if plan.outcome.rolled_at is not None:
        writer = SegmentWriter(
            fs, dir_path, plan.outcome.rolled_at, index_interval_bytes=_index_interval(plan), suffix=suffix
        )
        writer.close(mtime_ms=now_ms)
        bases.append(plan.outcome.rolled_at)
    return bases


def _snapshot_at_log_end(part: Partition, log_end: int) -> bytes:
    """Producer state at the log end offset, for the snapshot Kafka takes when it rolls."""
    manager, _ = replay_partition(part)
    manager.map_end_offset = log_end
    return manager.snapshot().to_bytes()


def ensure_changeable(part: Partition, plan: PartitionPlan, log_dir: LogDir) -> None:
    """Refuse (FileAccessError, naming it) a file or directory that `apply_in_place` would replace,
    rename or delete and cannot: checked for every partition before any is changed, so that a
    read-only or immutable file stops the run before it changes anything."""
    if not plan.changed:
        return
    fs = part.fs
    old = {d.segment.base_offset for d in plan.deleted} | ({plan.truncation.base_offset} if plan.truncation else set())
    paths = [log_dir.path, part.path]  # checkpoints are replaced in the first; segments staged, renamed in the second
    paths += [e.path for s in part.segments if s.base_offset in old for e in s.files.values()]
    paths += [part.snapshots[offset].path for offset in plan.snapshots_to_delete]
    paths += [fs.join(log_dir.path, name) for name in plan.checkpoint_updates]
    if plan.epochs_changed:
        paths.append(fs.join(part.path, LEADER_EPOCH_CHECKPOINT))
    for path in paths:
        fs.ensure_writable(path)


def apply_in_place(
    part: Partition, plan: PartitionPlan, log_dir: LogDir, *, now_ms: int, fault: FaultHook = no_fault
) -> None:
    """Carry out `plan` in the partition directory (module docstring: the order and what a crash
    leaves). `fault(step, name)` is called after each step (a test hook that may raise). A failure
    before the commit point (the first checkpoint written) removes what was staged: the old log
    stays whole, its snapshots below the new log start offset excepted."""
    if not plan.changed:
        return
    fs, path = part.fs, part.path
    committed = False
    try:
        new_bases = _stage_new_segments(part, plan, now_ms)
        if plan.snapshot_at_log_end:
            assert plan.outcome.rolled_at is not None  # the snapshot of a rolled segment
            name = segment_file_name(plan.outcome.rolled_at, ".snapshot")
            fs.write_atomic(fs.join(path, name), _snapshot_at_log_end(part, plan.log_end_offset))
            fs.set_mtime(fs.join(path, name), now_ms)
        fault("staged", "")
        for offset in plan.snapshots_to_delete:
            entry = part.snapshots[offset]
            fs.delete(entry.path)
            fault("snapshot-deleted", entry.name)
        for name in _CHECKPOINT_ORDER:  # the log start offset first: it is the commit point
            if name in plan.checkpoint_updates:
                log_dir.update_checkpoint(name, {plan.tp: plan.checkpoint_updates[name]})
                committed = True
                fault("checkpoint-written", name)
    except BaseException:
        if not committed:
            _unstage(part, plan)
        raise
    if plan.epochs_changed and plan.epochs_after is not None:  # epochs_changed implies the latter
        epoch_path = fs.join(path, LEADER_EPOCH_CHECKPOINT)
        fs.write_atomic(epoch_path, format_leader_epoch_checkpoint(plan.epochs_after).encode("utf-8"))
        fault("checkpoint-written", LEADER_EPOCH_CHECKPOINT)
    old_bases = [d.segment.base_offset for d in plan.deleted]
    if plan.truncation is not None:
        old_bases.append(plan.truncation.base_offset)
    if new_bases or old_bases:
        replace_segments(fs, path, new_bases, old_bases, fault=fault)
    fs.sync_dir(path)


def _unstage(part: Partition, plan: PartitionPlan) -> None:
    """Remove what `apply_in_place` wrote before its commit point: the `.cleaned` segments and a
    producer snapshot at the log end offset it wrote (not one that was there before)."""
    fs = part.fs
    for entry in fs.list_dir(part.path):
        if entry.name.endswith(CLEANED):
            fs.delete(entry.path)
    if plan.snapshot_at_log_end and plan.outcome.rolled_at is not None:
        written = fs.join(part.path, segment_file_name(plan.outcome.rolled_at, ".snapshot"))
        if fs.exists(written):
            fs.delete(written)


def recover(fs: LogFileSystem, partition_dir: str) -> list[str]:
    """What Kafka's loader does before a partition is used, as far as files go: finish or roll back
    an interrupted swap (`swap.recover_partition`), then delete index files without a `.log` (a
    deletion interrupted between a segment's files leaves them). Returns what it did."""
    actions = recover_partition(fs, partition_dir)
    for entry in Partition.open(fs, partition_dir).orphan_indexes:
        fs.delete(entry.path)
        actions.append(f"deleted orphan {entry.name}")
    return actions
