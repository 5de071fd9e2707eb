"""`kafkalog repartition LOG_DIR --topic T --partitions N --output OUT`: a topic's committed records
moved to N partitions as Kafka's partitioner places their keys, written as a log dir a broker loads.

Two steps, as every command is becoming (issue 36): `plan_repartition` on the driver without Spark
(also the command line's check before Spark starts) opens the log dir, checks the topic, the target,
the output and the last stable offset rule, and returns a `RepartitionPlan`; `run_repartition(spark,
plan)` executes it (spark/repartition.py) and commits the result:

1. the records are staged per new partition in `<OUT>.kafkalog-incomplete/.placed` (beside OUT, on
   its filesystem), then the new partition directories are written from them under
   `<OUT>.kafkalog-incomplete`, the offset map under `<offset map>.kafkalog-incomplete`;
2. when all are written, each is renamed into OUT (an empty partition directory of the target topic,
   as `kafka-topics --create` leaves it, is replaced), then OUT's `recovery-point-offset-checkpoint` and
   `replication-offset-checkpoint` name each new partition's log end offset and
   `log-start-offset-checkpoint` none (its log starts at 0), as a clean shutdown leaves them; the
   offset map and the groups' CSV files are published last.
A failure before step 2 leaves OUT as it was; one raised during its renames moves back those done.
Before its first rename the commit writes an intent into the staging directory, as kafkalog's swap
does (storage/swap.py): a run killed later (kill -9, power) leaves it, and the next run into OUT
completes the commit from it before anything else (`complete_commit`): OUT holds the whole old or the
whole new topic once a run has started on it. OUT, when it is a log dir, is locked for the run.
`--compact` compacts each new partition in the same pass (`rules.partitioner.Compaction`).

What is not carried: producer ids, epochs and sequences (each new batch holds records of many
producers and source batches, so no producer's sequence could continue in it: the batches are
non-idempotent, producer id -1), transaction markers and aborted records (only committed data moves),
and the source's leader epochs (the new partitions begin at the target's current epoch).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass, field

from ..codec.compression import Codec
from ..config import ConfigResolver
from ..errors import ConfigError, CorruptCheckpointError, LogDirError
from ..rules.compaction_strategy import CompactionStrategy
from ..rules.partition_state import partition_state
from ..rules.partitioner import block_carries
from ..spark.topic_table import PartitionRange
from ..storage.checkpoint import format_partition_metadata, parse_leader_epoch_checkpoint, parse_partition_metadata
from ..storage.destination import STAGING_SUFFIX
from ..storage.fs import LogFileSystem
from ..storage.logdir import LogDir
from ..storage.naming import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    illegal_topic_reason,
)
from ..storage.producer_state import replay_partition
from ..topics import CONSUMER_OFFSETS_TOPIC
from .clock import now_ms, stamp

log = logging.getLogger("kafkalog")

_CODECS = {"none": Codec.NONE, "uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY}
_CODECS.update({"lz4": Codec.LZ4, "zstd": Codec.ZSTD})


@dataclass
class RepartitionPlan:
    log_dir: str
    topic: str
    partitions: int
    output: str
    to_topic: str
    topic_id: str
    ranges: list[PartitionRange]
    leader_epochs: dict[int, int]  # new partition -> the leader epoch its batches carry
    replaced: list[int]  # target partitions whose empty directories in OUT are replaced
    config: dict  # the target's segment.bytes, segment.ms, index sizes, max.message.bytes, codec
    committed: dict[str, dict[int, int]]  # group -> source partition -> committed offset
    committed_source: str
    left_unstable: dict[int, tuple[int, int]]  # source partition -> (last stable offset, high watermark) left
    offset_map: str | None = None
    group_offsets: str | None = None
    dry_run: bool = False
    source: LogDir | None = None  # the source as the plan listed it
    listed: tuple = ()  # its partitions of the topic, as the plan opened them
    compaction: CompactionStrategy | None = None  # --compact: the target's strategy
    now: int = 0  # --compact: the clock tombstones' delete horizons are read against
    completed: list[dict] | None = None  # the partitions of an earlier run of this command, whose commit it completed

    def summary(self) -> str:
        records = sum(r.end - r.start for r in self.ranges)
        lines = [
            f"repartition {self.topic} ({len(self.ranges)} partitions, at most {records:,} offsets) into "
            f"{self.partitions} partitions of {self.to_topic} (topic id {self.topic_id}) in {self.output}"
        ]
        lines += [f"  groups from {self.committed_source}: {', '.join(sorted(self.committed)) or 'none'}"]
        if self.compaction is not None:
            lines.append(
                f"  compacted in the same pass: each key's record of highest precedence ({self.compaction}), "
                f"tombstones whose delete horizon is past {stamp(self.now)} removed"
            )
        for p, (lso, hw) in sorted(self.left_unstable.items()):
            lines.append(f"  partition {p}: stops at its last stable offset {lso}; offsets {lso}..{hw - 1} are left")
        return "\n".join(lines)


@dataclass
class RepartitionResult:
    plan: RepartitionPlan
    written: list[dict] = field(default_factory=list)  # per new partition: records, log end offset, ...
    groups: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)  # group -> q -> (offset, re-read)
    staged: dict = field(default_factory=dict)  # stage 1: records staged, its workers' peak memory
    seconds: dict = field(default_factory=dict)  # wall time of each step: place, write, commit

    def to_dict(self) -> dict:
        return {
            "topic": self.plan.topic,
            "toTopic": self.plan.to_topic,
            "topicId": self.plan.topic_id,
            "output": self.plan.output,
            "dryRun": self.plan.dry_run,
            "staged": self.staged,
            "seconds": self.seconds,
            "partitions": [{k: v for k, v in w.items() if k != "groups"} for w in self.written],
            "groups": {
                g: [{"partition": q, "offset": o, "reread": r} for q, (o, r) in sorted(by.items())]
                for g, by in sorted(self.groups.items())
            },
        }

    def summary(self) -> str:
        if self.plan.dry_run:
            return self.plan.summary() + "\n  dry run: nothing written"
        total = sum(w["records"] for w in self.written)
        lines = [
            f"repartitioned {total:,} records of {self.plan.topic} into {self.plan.to_topic} in {self.plan.output}"
            + (" (an earlier run of this command, whose commit this one completed)" if self.plan.completed else "")
        ]
        lines += [
            f"  partition {w['partition']}: {w['records']:,} records, {w['segments']} segments, {w['bytes']:,} bytes"
            + (f"; compaction removed {w['removed']['records']:,}" if "removed" in w else "")
            for w in self.written
        ]
        for group, by in sorted(self.groups.items()):
            reread = sum(r for _, r in by.values())
            lines.append(
                f"  group {group}: resumes at {dict(sorted((q, o) for q, (o, _) in by.items()))}, re-reads {reread}"
            )
        return "\n".join(lines)


def plan_repartition(
    log_dir: str,
    topic: str,
    partitions: int,
    output: str,
    *,
    to_topic: str | None = None,
    topic_id: str | None = None,
    metadata: str | None = None,
    offset_map: str | None = None,
    consumer_offsets: str | None = None,
    group_offsets: str | None = None,
    stop_at_last_stable: bool = False,
    config: ConfigResolver | None = None,
    dry_run: bool = False,
    compact: bool = False,
    now: int | None = None,
) -> RepartitionPlan:
    """Everything checked and decided before Spark starts (see the module's docstring)."""
    if partitions < 1:
        raise ConfigError(f"--partitions {partitions}: a topic has at least one partition")
    to_topic = to_topic or topic
    reason = illegal_topic_reason(to_topic)
    if reason:
        raise ConfigError(f"--to-topic {to_topic!r}: {reason}")
    done = complete_commit(output, dry_run)  # before anything else: OUT may hold part of a commit
    if done is not None and done["command"] == _command(
        log_dir, topic, partitions, to_topic, offset_map, group_offsets, compact
    ):
        return _completed(done, log_dir, output)
    opened = LogDir.open(log_dir)
    opened.check_topics([topic])  # names the closest topic it holds
    parts = list(opened.partitions({topic}))
    numbers = [p.partition for p in parts]
    if numbers != list(range(len(numbers))):
        missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
        raise ConfigError(
            f"partitions {missing} of topic {topic} are not in this log dir: repartition needs every partition "
            "of the topic (copy them from the brokers that hold them)",
            file=opened.path,
        )
    out_fs, out = _check_output(opened, log_dir, output, topic, to_topic, dry_run)
    ranges, unstable = _ranges(opened, parts, stop_at_last_stable)
    existing = _target_dirs(out_fs, out, to_topic, partitions)
    topic_id = _topic_id(topic_id, metadata, to_topic, existing)
    resolver = config if config is not None else ConfigResolver()
    target = resolver.for_topic(to_topic)
    if compact and not target.compact:
        log.warning(
            "--compact: %s's cleanup.policy is %s, not compact: its records are compacted once here, and not by "
            "its brokers later",
            to_topic,
            ",".join(target.cleanup_policy),
        )
    committed, source = _committed(opened, topic, consumer_offsets)
    if group_offsets is not None and not committed:
        log.warning("no group has committed offsets of %s in %s: --group-offsets gets no file", topic, source)
    if offset_map is not None and offset_map == group_offsets:
        raise ConfigError("--offset-map and --group-offsets are the same path: give each its own", file=offset_map)
    for path in (offset_map, group_offsets):
        if path is None:
            continue
        for log_dir_path in (out, opened.path):
            inside = os.path.realpath(path)
            if inside == os.path.realpath(log_dir_path) or inside.startswith(os.path.realpath(log_dir_path) + os.sep):
                # a broker takes every directory of its log dir for a partition's, and refuses one that is not
                raise ConfigError(
                    "--offset-map and --group-offsets must lie outside the input and output log dirs", file=path
                )
        for taken in (path, path + STAGING_SUFFIX):
            if not dry_run and os.path.exists(taken):
                raise ConfigError("this path exists already; choose a new one (or remove it)", file=taken)
    return RepartitionPlan(
        log_dir=log_dir,
        topic=topic,
        partitions=partitions,
        output=out,
        to_topic=to_topic,
        topic_id=topic_id,
        ranges=ranges,
        leader_epochs={q: epoch for q, (_, epoch) in existing.items()},
        replaced=sorted(existing),
        config={
            "segment_bytes": target.segment_bytes,
            "segment_ms": target.segment_ms,
            "index_interval_bytes": target.index_interval_bytes,
            "segment_index_bytes": target.segment_index_bytes,
            "max_message_bytes": target.max_message_bytes,
            "codec": _codec(target.compression_type),
            "delete_retention_ms": target.delete_retention_ms,
        },
        committed=committed,
        committed_source=source,
        left_unstable=unstable,
        source=opened,
        listed=tuple(parts),
        offset_map=offset_map,
        group_offsets=group_offsets,
        dry_run=dry_run,
        compaction=CompactionStrategy.of(target.compaction_strategy, target.compaction_strategy_header)
        if compact
        else None,
        now=now_ms(now),
    )


def _completed(intent: dict, log_dir: str, output: str) -> RepartitionPlan:
    """The plan of a run whose commit `complete_commit` completed: nothing left to do."""
    command = intent["command"]
    return RepartitionPlan(
        log_dir=log_dir,
        topic=command["topic"],
        partitions=command["partitions"],
        output=LogFileSystem.for_path(output)[1],
        to_topic=command["toTopic"],
        topic_id=intent["topicId"],
        ranges=[],
        leader_epochs={},
        replaced=[],
        config={},
        committed={},
        committed_source="",
        left_unstable={},
        offset_map=command["offsetMap"],
        group_offsets=command["groupOffsets"],
        completed=intent["written"],
    )


def _check_output(opened: LogDir, log_dir: str, output: str, topic: str, to_topic: str, dry_run: bool):
    fs, out = LogFileSystem.for_path(output)
    if not fs.is_local:
        raise ConfigError("--output must be a local directory: a broker's log dir", file=output)
    source, target = os.path.realpath(opened.path), os.path.realpath(out)
    if target == source and to_topic == topic:
        raise ConfigError("--output is the input log dir: give --to-topic another topic, or another --output")
    if target.startswith(source + os.sep):
        raise ConfigError(f"--output lies inside the input log dir {opened.path}; choose a directory outside it")
    if fs.exists(out) and not fs.is_dir(out):
        raise ConfigError("--output is a file, not a log dir", file=out)
    if fs.exists(out + STAGING_SUFFIX):
        raise LogDirError(
            "an earlier run that did not finish left this staging directory; remove it and run again",
            file=out + STAGING_SUFFIX,
        )
    if not dry_run:
        opened.ensure_unlocked()
        if fs.exists(out) and fs.list_dir(out):
            LogDir.open(out).ensure_unlocked()
    return fs, out


def _ranges(opened: LogDir, parts, stop_at_last_stable: bool):
    """Per source partition, what a read_committed consumer reads: [log start, last stable offset).
    Records past the last stable offset (an open transaction, or a high watermark below the log end)
    are refused, or left with a warning."""
    checkpoints = opened.offset_checkpoints()
    ranges, unstable = [], {}
    for part in parts:
        part.ensure_settled()
        state = partition_state(part, replay_partition, **checkpoints.of((part.topic, part.partition)))
        if state.last_stable_offset < state.log_end_offset:
            unstable[part.partition] = (state.last_stable_offset, state.log_end_offset)
        ranges.append(
            PartitionRange(
                part.partition,
                state.log_start_offset,
                max(state.last_stable_offset, state.log_start_offset),
                tuple(part.aborted_txns()),
            )
        )
    if unstable and not stop_at_last_stable:
        p, (lso, end) = min(unstable.items())
        raise ConfigError(
            f"partition {p} of {parts[0].topic} has offsets {lso}..{end - 1} past its last stable offset {lso} "
            "(an open transaction or unreplicated records): finish or abort the transaction first, or give "
            "--stop-at-last-stable to leave them out",
            file=opened.path,
        )
    for p, (lso, end) in sorted(unstable.items()):
        log.warning(
            "partition %d of %s: offsets %d..%d past its last stable offset are left out",
            p,
            parts[0].topic,
            lso,
            end - 1,
        )
    return ranges, unstable


def _target_dirs(fs: LogFileSystem, out: str, to_topic: str, partitions: int) -> dict[int, tuple[str | None, int]]:
    """The target topic's partition directories already in OUT: q -> (their topic id, leader epoch).
    Only empty ones (a topic just created) may be replaced; a partition beyond N is refused."""
    found: dict[int, tuple[str | None, int]] = {}
    if not fs.exists(out) or not fs.list_dir(out):
        return found
    opened = LogDir.open(out)
    for part in opened.partitions({to_topic}):
        if part.partition >= partitions:
            raise ConfigError(
                f"{out} holds partition {part.partition} of {to_topic}, which has more than --partitions "
                f"{partitions} partitions",
                file=part.path,
            )
        if any(s.size for s in part.segments):
            raise ConfigError(
                f"partition {part.partition} of {to_topic} in the output holds records: repartition writes only "
                "into partitions that are empty (a topic just created)",
                file=part.path,
            )
        meta, epochs = part.read_file(PARTITION_METADATA), part.read_file(LEADER_EPOCH_CHECKPOINT)
        topic_id = parse_partition_metadata(meta.decode(), file=part.path).topic_id if meta else None
        entries = parse_leader_epoch_checkpoint(epochs.decode(), file=part.path) if epochs else []
        found[part.partition] = (topic_id, entries[-1].epoch if entries else 0)
    return found


def _topic_id(given: str | None, metadata: str | None, to_topic: str, existing: dict) -> str:
    """The target's topic id: --topic-id, else the KRaft metadata's for its name; each must agree with
    the partition.metadata of target partitions already in OUT, which alone may also give it."""
    found = {tid for tid, _ in existing.values() if tid}
    if given is not None:
        try:
            format_partition_metadata(given)  # what the run writes: checked before Spark starts
        except CorruptCheckpointError:
            raise ConfigError(
                f"--topic-id {given!r} is not a topic id: 22 characters of URL-safe base64, not all zero, as "
                "kafka-topics --describe shows it"
            ) from None
    if given is None and metadata is not None:
        given = _lookup_topic_id(metadata, to_topic)
    if given is None:
        if len(found) == 1:
            return found.pop()
        raise ConfigError(
            f"the topic id of {to_topic} is not known: give --topic-id (kafka-topics --describe shows it) or "
            "--metadata with a log dir holding the cluster's __cluster_metadata-0"
        )
    if found - {given}:
        raise ConfigError(f"topic id {given} of {to_topic} is not the id {found.pop()} its partitions in --output have")
    return given


def _lookup_topic_id(metadata: str, name: str) -> str:
    from .replicas import _metadata_partition, metadata_replay

    part = _metadata_partition(metadata)
    ids = [tid for tid, topic in metadata_replay(part).topic_names.items() if topic == name]
    if not ids:
        raise ConfigError(f"the KRaft metadata has no topic {name!r}: create it first", file=part.path)
    return ids[0]


def _codec(compression_type: str) -> int | None:
    return None if compression_type == "producer" else _CODECS[compression_type]


def _committed(opened: LogDir, topic: str, consumer_offsets: str | None) -> tuple[dict, str]:
    """Each group's committed offsets of `topic` by source partition: from a file, or the log dir's
    own __consumer_offsets."""
    from .retain import load_committed_offsets
    from .retain_partition import read_committed_offsets

    if consumer_offsets is not None:
        offsets, source = load_committed_offsets(consumer_offsets), consumer_offsets
    else:
        offsets, source = read_committed_offsets(opened), f"{opened.path}'s {CONSUMER_OFFSETS_TOPIC}"
    committed: dict[str, dict[int, int]] = {}
    for (group, t, p), offset in offsets.offsets.items():
        if t == topic and offset is not None:
            committed.setdefault(group, {})[p] = offset
    return committed, source


# -- running ------------------------------------------------------------------------------------------


def run_repartition(spark, plan: RepartitionPlan) -> RepartitionResult:
    """Execute `plan` (nothing but the plan's summary for a dry run) and commit its output."""
    from ..spark.repartition import WriteSpec, plan_blocks, stage_records, write_partitions
    from ..spark.session import started

    result = RepartitionResult(plan)
    if plan.completed is not None:  # an earlier run's commit, completed by the plan
        result.written, result.groups = plan.completed, _groups(plan.completed)
        return result
    if plan.dry_run:
        return result
    _ensure_unchanged(plan)
    fs, out = LogFileSystem.for_path(plan.output)
    staging = out + STAGING_SUFFIX
    map_staging = None if plan.offset_map is None else plan.offset_map + STAGING_SUFFIX
    try:
        fs.make_dirs(staging)
        if map_staging is not None:
            os.makedirs(map_staging)
        spec = WriteSpec(
            staging=staging,
            topic=plan.to_topic,
            topic_id=plan.topic_id,
            partitions=plan.partitions,
            leader_epochs=plan.leader_epochs,
            offset_map=map_staging,
            committed=plan.committed,
            compaction=plan.compaction,
            now=plan.now,
            **plan.config,
        )
        blocks = plan_blocks(plan.listed, plan.topic, plan.ranges)  # while a session the command line started starts
        clock = time.perf_counter()
        # the driver places blocks itself while a session the command line started starts
        result.staged = stage_records(spark, plan.log_dir, plan.topic, blocks, spec)
        spark = started(spark)
        spec = dataclasses.replace(spec, carries=block_carries(result.staged.pop("maxima")))
        result.seconds["session"] = result.staged.pop("sessionSeconds")
        result.seconds["place"], clock = time.perf_counter() - clock - result.seconds["session"], time.perf_counter()
        written = sorted(write_partitions(spark, spec), key=lambda w: w["partition"])
        result.seconds["write"], clock = time.perf_counter() - clock, time.perf_counter()
        if [w["partition"] for w in written] != list(range(plan.partitions)):
            raise LogDirError(
                f"the run wrote partitions {[w['partition'] for w in written]}, not 0..{plan.partitions - 1}"
            )
        result.written, result.groups = written, _groups(written)
        _commit(fs, out, staging, _intent(plan, written))
    except BaseException:
        if fs.exists(fs.join(staging, COMMIT_INTENT)):  # past its renames: the next run completes the commit
            log.warning("%s: the commit did not finish; run the same command again to complete it", out)
            raise
        if fs.exists(staging):
            fs.delete_dir(staging)
        if map_staging is not None and os.path.exists(map_staging):
            fs.delete_dir(map_staging)
        raise
    result.seconds["commit"] = time.perf_counter() - clock
    return result


def _groups(written: list[dict]) -> dict[str, dict[int, tuple[int, int]]]:
    """group -> new partition -> (offset it resumes at, records it re-reads)."""
    groups: dict[str, dict[int, tuple[int, int]]] = {}
    for w in written:
        for group, (offset, reread) in w["groups"].items():
            groups.setdefault(group, {})[w["partition"]] = (offset, reread)
    return groups


def _ensure_unchanged(plan: RepartitionPlan) -> None:
    """The source is as the plan listed it, and no broker has started on it since: the planned offset
    ranges read from a partition a segment left since (retention, an operator) would skip its records
    without a word. Refused (LogDirError): run again to plan again."""
    assert plan.source is not None  # a plan that runs was made from its source
    plan.source.ensure_unlocked()
    plan.source.ensure_unchanged(plan.listed, CHANGED, topics={plan.topic})


CHANGED = "another process used the log directory in between; run the repartition again"


# -- the commit -----------------------------------------------------------------------------------------
# As Kafka's swap (storage/swap.py) and kafkalog's own: an intent written before the first rename,
# removed after the last step, and a next run that finds it rolls the commit forward. A failure
# raised in this process during the renames moves back those done instead; then the intent goes.

COMMIT_INTENT = "kafkalog-commit-intent.json"  # in the staging directory: what completing the commit needs


def _command(log_dir, topic, partitions, to_topic, offset_map, group_offsets, compact) -> dict:
    """What makes a run "the same command" as the one whose commit an intent describes (paths made
    absolute: the next run may start elsewhere)."""
    real = [None if p is None else os.path.realpath(p) for p in (log_dir, offset_map, group_offsets)]
    return dict(zip(("logDir", "offsetMap", "groupOffsets"), real)) | {
        "topic": topic,
        "partitions": partitions,
        "toTopic": to_topic,
        "compact": compact,
    }


def _intent(plan: RepartitionPlan, written: list[dict]) -> dict:
    args = (plan.log_dir, plan.topic, plan.partitions, plan.to_topic, plan.offset_map, plan.group_offsets)
    return {
        "version": 1,
        "command": _command(*args, plan.compaction is not None),
        "topicId": plan.topic_id,
        "replaced": [f"{plan.to_topic}-{q}" for q in plan.replaced],  # moved aside to `<name>.replaced`
        "written": written,  # per new partition, in order: its log end offset, the groups' resumes, ...
    }


def _commit(fs: LogFileSystem, out: str, staging: str, intent: dict) -> None:
    """Move the new partitions into OUT under its lock, checkpoint them, publish the offset map and the
    groups' CSV files, and remove the staging directory."""
    fs.make_dirs(out)
    opened = LogDir.open(out)
    path = fs.join(staging, COMMIT_INTENT)
    with opened.locked():
        fs.write_atomic(path, json.dumps(intent, default=int).encode())
        fs.sync_dir(staging)
        moved: list[tuple[str, str]] = []  # each rename done: undone if a later one fails
        try:
            _move_all(fs, out, staging, intent, moved)
        except BaseException:  # OUT as it was: a broker would load some of the new partitions as the whole topic
            for src, dst in reversed(moved):
                fs.rename(dst, src)
            fs.delete(path)
            raise
        _finish(fs, opened, staging, intent)


def _move_all(fs: LogFileSystem, out: str, staging: str, intent: dict, moved: list) -> int:
    """Each new partition the intent names moved into OUT (those still staged); how many moved."""
    topic = intent["command"]["toTopic"]
    count = sum(_move_in(fs, out, staging, f"{topic}-{w['partition']}", intent, moved) for w in intent["written"])
    fs.sync_dir(out)
    return count


def _move_in(fs: LogFileSystem, out: str, staging: str, name: str, intent: dict, moved: list) -> bool:
    """Move the staged partition `name` into OUT, its empty directory there to `<name>.replaced` first:
    as the commit does, and again after a crash (a partition still staged is one not yet moved).
    Whether it moved."""
    src, target = fs.join(staging, name), fs.join(out, name)
    if not fs.exists(src):
        if not fs.exists(target):
            raise LogDirError(
                "the commit's intent names this partition, but it is neither staged nor here", file=target
            )
        return False
    if fs.exists(target):
        if name not in intent["replaced"]:
            raise LogDirError("the commit would replace this directory, which its plan did not find", file=target)
        _move(fs, target, src + ".replaced", moved)
    _move(fs, src, target, moved)
    return True


def _move(fs: LogFileSystem, src: str, dst: str, moved: list[tuple[str, str]]) -> None:
    fs.rename(src, dst)
    moved.append((src, dst))


def _finish(fs: LogFileSystem, opened: LogDir, staging: str, intent: dict) -> None:
    """The commit's steps after its renames, each as fit to do again after a crash as the first time."""
    command = intent["command"]
    topic = command["toTopic"]
    ends: dict[tuple[str, int], int | None] = {
        TopicPartition(topic, w["partition"]): w["logEndOffset"] for w in intent["written"]
    }
    opened.update_checkpoint(LOG_START_OFFSET_CHECKPOINT, dict.fromkeys(ends))
    opened.update_checkpoint(RECOVERY_POINT_CHECKPOINT, ends)
    opened.update_checkpoint(REPLICATION_OFFSET_CHECKPOINT, ends)
    fs.sync_dir(opened.path)
    offset_map = command["offsetMap"]
    if offset_map is not None and fs.exists(offset_map + STAGING_SUFFIX):
        fs.rename(offset_map + STAGING_SUFFIX, offset_map)
        fs.sync_dir(os.path.dirname(offset_map))
    if command["groupOffsets"] is not None:
        write_group_csvs(command["groupOffsets"], topic, _groups(intent["written"]))
    for entry in fs.list_dir(staging):  # the intent last: a crash here leaves it to the next run
        if entry.name != COMMIT_INTENT:
            (fs.delete_dir if entry.is_dir else fs.delete)(entry.path)
    fs.delete_dir(staging)


def complete_commit(output: str, dry_run: bool = False) -> dict | None:
    """Roll forward the commit a run killed during it (kill -9, power) left in OUT: its intent's
    renames done, the checkpoints written, the offset map and CSVs published, the staging directory
    removed; with a warning that says so. The intent, or None without one. A dry run refuses."""
    fs, out = LogFileSystem.for_path(output)
    staging = out + STAGING_SUFFIX
    path = fs.join(staging, COMMIT_INTENT)
    if not fs.exists(path):
        return None
    if dry_run:
        raise LogDirError(
            f"a run was killed during its commit into {out}; run the same command without --dry-run: it "
            "completes that commit first",
            file=path,
        )
    try:
        intent = json.loads(fs.read_bytes(path))
        topic, written = intent["command"]["toTopic"], intent["written"]
    except (ValueError, KeyError, TypeError) as err:
        raise LogDirError(f"the commit's intent cannot be read ({err}); OUT is left as it is", file=path) from None
    opened = LogDir.open(out)
    with opened.locked():
        moved = _move_all(fs, out, staging, intent, [])
        _finish(fs, opened, staging, intent)
    log.warning(
        "%s: a run killed during its commit had left %d of the %d new partitions of %s in %s; this run moved "
        "them in, wrote the checkpoints%s and removed the staging directory: the commit is complete",
        out,
        moved,
        len(written),
        topic,
        staging,
        ", the offset map and the groups' offsets"
        if intent["command"]["offsetMap"] or intent["command"]["groupOffsets"]
        else "",
    )
    return intent


def group_csv(topic: str, offsets: dict[int, tuple[int, int]]) -> str:
    """The CSV `kafka-consumer-groups.sh --reset-offsets --from-file` takes: topic,partition,offset."""
    text = io.StringIO()
    rows = csv.writer(text, lineterminator="\n")
    for q, (offset, _) in sorted(offsets.items()):
        rows.writerow([topic, q, offset])
    return text.getvalue()


def write_group_csvs(directory: str, topic: str, groups: dict[str, dict[int, tuple[int, int]]]) -> None:
    """One `<group>.csv` per group (the name URL-quoted) in `directory`, which is made (or written
    again: a commit completed after a crash)."""
    os.makedirs(directory, exist_ok=True)
    for group, offsets in sorted(groups.items()):
        path = os.path.join(directory, urllib.parse.quote(group, safe="") + ".csv")
        with open(path, "w") as f:
            f.write(group_csv(topic, offsets))
