"""Which copies of a partition exist, and whether every one of them was given: the check a purge
makes before it writes anything (a purge that leaves a key on another broker's replica is no erasure).

    from kafkalog.operations.replicas import check_replicas, copies, missing_replicas

    copies(["/data/b1", "/data/b2"])          # {("orders", 0): [ReplicaDir("/data/b1", 1, "CKCc..."), ...]}
    missing_replicas(["/data/b1"], ["orders"])   # [MissingReplica("orders", 0, 2, "x5Tq...")], or None
                                                 # when no metadata log says where replicas live

A KRaft cluster says where every replica lives in its metadata log (`__cluster_metadata-0`, on each
controller): each partition's replicas (broker ids) and the directory of each (directory ids),
replayed as a broker loads them (rules/replica_assignment.py, storage/kraft.py `metadata_records`).
Each log dir says whose it is in its `meta.properties` (`node.id`, `directory.id`). A replica is
given when a given log dir belongs to its broker and, where the metadata names the replica's
directory, is that directory; where it names none (MIGRATING, UNASSIGNED, LOST), or the log dir's
meta.properties has no `directory.id`, when a given log dir of its broker holds the partition.
The metadata log is the one named (`metadata_dir`), else the one among the given log dirs that
reaches furthest (the controllers' copies agree on what is committed; the furthest holds the
latest of it). Without one, nothing can say which copies exist.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import ConfigError, KafkaLogError
from ..rules.partition_state import loaded_log_start
from ..rules.replica_assignment import Assignment, AssignmentReplay, MetadataReplayError
from ..storage.fs import LogFileSystem
from ..storage.kraft import metadata_records
from ..storage.logdir import LogDir
from ..storage.partition import Partition
from ..storage.segment import log_end_offset
from ..topics import KRAFT_METADATA_TOPIC

log = logging.getLogger("kafkalog")
METADATA_PARTITION = f"{KRAFT_METADATA_TOPIC}-0"
NO_METADATA = (
    "no KRaft metadata log among the log dirs (--metadata DIR names one): kafkalog cannot know whether "
    "other copies of these partitions exist, on other brokers or in other log dirs"
)


@dataclass(frozen=True)
class ReplicaDir:
    """A partition directory in a given log dir, and whose log dir it is (its meta.properties)."""

    log_dir: str
    node_id: int | None  # None: the log dir has no meta.properties, or one without the id
    directory_id: str | None


@dataclass(frozen=True)
class MissingReplica:
    """A replica the metadata names that no given log dir holds."""

    topic: str
    partition: int
    broker: int
    directory: str | None  # None: the metadata does not say which directory of the broker

    def __str__(self) -> str:
        where = "" if self.directory is None else f" (directory {self.directory})"
        return f"{self.topic}-{self.partition} on broker {self.broker}{where}"

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "broker": self.broker, "directory": self.directory}


@dataclass
class ReplicaCheck:
    """What `check_replicas` found: the metadata log it read (None: none), and the replicas not given."""

    metadata: str | None
    partitions: int = 0  # the partitions the metadata names for the topics checked
    missing: list[MissingReplica] = field(default_factory=list)

    def missing_dicts(self) -> list[dict] | None:
        """The replicas not given, as rows; None when no metadata log said which exist."""
        return None if self.metadata is None else [m.to_dict() for m in self.missing]

    def summary(self) -> str:
        if self.metadata is None:
            return f"WARNING: {NO_METADATA}"
        if not self.missing:
            return f"every replica of the {self.partitions} partitions was given (KRaft metadata: {self.metadata})"
        return f"WARNING: {len(self.missing)} replicas were not given and are not purged: " + ", ".join(
            map(str, self.missing)
        )


class _Given(NamedTuple):
    """A given log dir, opened, and whose it is (meta.properties; None without one)."""

    log_dir: str
    opened: LogDir
    node_id: int | None
    directory_id: str | None


def copies(log_dirs: Iterable[str]) -> dict[tuple[str, int], list[ReplicaDir]]:
    """(topic, partition) -> its copies among `log_dirs`, in their order (the metadata log excluded)."""
    return _copies(_opened(log_dirs))


def replica_assignment(metadata_dir: str) -> dict[tuple[str, int], Assignment]:
    """(topic, partition) -> replicas and directories, as the metadata log at `metadata_dir` (a
    `__cluster_metadata-0` directory, or the log dir holding one) says now."""
    return _replay(_metadata_partition(metadata_dir))


def missing_replicas(
    log_dirs: Iterable[str], topics: Iterable[str] | None = None, metadata_dir: str | None = None
) -> list[MissingReplica] | None:
    """The replicas of every partition of `topics` (default: every topic but internal ones) that no
    log dir of `log_dirs` holds, as the metadata log says (`metadata_dir`, else the one among
    `log_dirs`); None when there is no metadata log to say it."""
    check = _check(_opened(log_dirs), topics, metadata_dir)
    return None if check.metadata is None else check.missing


def check_replicas(
    log_dirs: Iterable[str | LogDir],
    topics: Iterable[str] | None = None,
    metadata_dir: str | None = None,
    *,
    allow_missing: bool = False,
) -> ReplicaCheck:
    """`missing_replicas` as a purge needs it, before it writes anything: a ConfigError (one line,
    naming the first missing replica's partition, broker and directory) when a replica was not
    given, unless `allow_missing`; else what was checked and what is missing (`summary()` says it,
    or that without metadata nothing can say whether other copies exist)."""
    check = _check(_opened(log_dirs), topics, metadata_dir)
    if allow_missing and check.metadata is None:
        log.warning("--allow-missing-replicas does nothing here: %s", NO_METADATA)
    if check.missing and not allow_missing:
        more = f" ({len(check.missing) - 1} more replicas missing)" if len(check.missing) > 1 else ""
        raise ConfigError(
            f"the replica of {check.missing[0]} is not among the given log dirs{more}: a purge must take every "
            "copy; give its log dir, or --allow-missing-replicas to purge the others and record it as not purged",
            file=check.metadata,
        )
    return check


def _check(opened: list[_Given], topics: Iterable[str] | None, metadata_dir: str | None) -> ReplicaCheck:
    part = _metadata_partition(metadata_dir) if metadata_dir is not None else _furthest_metadata(opened)
    if part is None:
        return ReplicaCheck(None)
    assignment = _replay(part)
    if topics is None:
        wanted = [tp for tp in assignment if not tp[0].startswith("__")]
    else:
        named = {topics} if isinstance(topics, str) else set(topics)
        wanted = [tp for tp in assignment if tp[0] in named]
    held = _copies(opened)
    owners = {(node, directory) for _, _, node, directory in opened}
    missing = []
    for tp in wanted:
        for replica in assignment[tp].replica_list():
            # where the metadata or the log dir does not name the directory: a log dir of the broker holding it
            given = (replica.broker, replica.directory) in owners or any(
                c.node_id == replica.broker and None in (replica.directory, c.directory_id) for c in held.get(tp, ())
            )
            if not given:
                missing.append(MissingReplica(*tp, replica.broker, replica.directory))
    return ReplicaCheck(part.path, len(wanted), missing)


def _opened(log_dirs: Iterable[str | LogDir]) -> list[_Given]:
    """Each log dir opened (a LogDir given is not listed again) and its meta.properties read."""
    given = []
    for log_dir in log_dirs:
        opened = LogDir.open(log_dir) if isinstance(log_dir, str) else log_dir
        meta = opened.read_meta()
        ids = (None, None) if meta is None else (meta.node_id, meta.directory_id)
        given.append(_Given(opened.uri, opened, *ids))
    return given


def _copies(given: list[_Given]) -> dict[tuple[str, int], list[ReplicaDir]]:
    found: dict[tuple[str, int], list[ReplicaDir]] = {}
    for log_dir, opened, node, directory in given:
        for tp in opened.topic_partitions:
            if tp[0] != KRAFT_METADATA_TOPIC:
                found.setdefault(tp, []).append(ReplicaDir(log_dir, node, directory))
    return found


def _metadata_partition(metadata_dir: str) -> Partition:
    """The `__cluster_metadata-0` that `metadata_dir` is or holds."""
    fs, path = LogFileSystem.for_path(metadata_dir)
    if fs.name(path) != METADATA_PARTITION:
        path = fs.join(path, METADATA_PARTITION)
    if not fs.is_dir(path):
        raise ConfigError(
            f"no KRaft metadata log here: expected a {METADATA_PARTITION} directory, or a log dir holding one",
            file=path,
        )
    return Partition.open(fs, path)


def _furthest_metadata(opened: list[_Given]) -> Partition | None:
    """The metadata log among the log dirs that reaches the highest offset (None: there is none)."""
    metadata = (KRAFT_METADATA_TOPIC, 0)
    found = [g.opened.partition(*metadata) for g in opened if metadata in g.opened.partition_paths]
    return max(found, key=_reach, default=None)


def _reach(part: Partition) -> int:
    """How far a metadata log reaches: its latest snapshot's end offset or its log end offset."""
    ends = [offset for offset, _ in part.kraft_snapshots]
    if part.segments:
        ends.append(log_end_offset(part.segments))
    return max(ends, default=0)


def _replay(part: Partition) -> dict[tuple[str, int], Assignment]:
    return metadata_replay(part).assignments()


def metadata_replay(part: Partition) -> AssignmentReplay:
    """The metadata log `part` replayed as a starting broker replays it: its topics and partitions."""
    replay = AssignmentReplay()
    for path, offset, record in metadata_records(part):
        try:
            replay.apply(offset, record)
        except MetadataReplayError as err:
            raise err.located(file=path) from None
    return replay


# -- copies given to one purge -------------------------------------------------------------------------

LISTED = 5  # the partitions, or copies, a warning names one by one; beyond, it counts them


class CopyOffsets(NamedTuple):
    """How far one copy of a partition reaches, and how its segments are cut."""

    log_dir: str
    log_start_offset: int
    log_end_offset: int
    segments: tuple[int, ...]  # base offsets

    def to_dict(self, topic: str, partition: int) -> dict:
        return {"topic": topic, "partition": partition, **self._asdict(), "segments": list(self.segments)}


def replica_differences(copies: Sequence) -> dict[tuple[str, int], list[CopyOffsets]]:
    """The partitions held by several of `copies` (a purge's: each with its `name`, `opened` LogDir and
    listed `segments`) whose copies differ in log start offset (as a broker loads it), log end offset
    or segments: (topic, partition) -> each copy's. Replicas in sync agree on the first two; a
    follower that lags, or a copy from another time, does not, and each copy is then purged on its
    own offsets (spark/purge.py)."""
    held: dict[tuple[str, int], list[CopyOffsets]] = {}
    for c in copies:
        ends = c.log_ends()
        starts = _log_start_checkpoints(c.opened)
        for tp, segments in c.segments.items():
            if segments:
                start = loaded_log_start(starts.get(tp), segments[0].base_offset)
                offsets = CopyOffsets(c.name, start, ends[tp], tuple(s.base_offset for s in segments))
                held.setdefault(tp, []).append(offsets)
    return {tp: found for tp, found in sorted(held.items()) if len({o[1:] for o in found}) > 1}


def _log_start_checkpoints(opened: LogDir) -> dict:
    """The log dir's checkpointed log start offsets; none where the checkpoint cannot be read (which
    validate reports): the comparison then goes by the first segments' base offsets."""
    try:
        return dict(opened.offset_checkpoints().log_starts)
    except KafkaLogError:
        return {}


def differences_warning(differences: Mapping[tuple[str, int], list[CopyOffsets]]) -> str | None:
    """One line naming the partitions whose copies differ and how (None when they all agree)."""
    if not differences:
        return None
    named = []
    for (topic, partition), found in list(differences.items())[:LISTED]:
        how = [
            f"{what}: " + ", ".join(f"{o.log_dir} {getter(o)}" for o in found)
            for what, getter in (
                ("log start offset", lambda o: o.log_start_offset),
                ("log end offset", lambda o: o.log_end_offset),
                ("segments", lambda o: len(o.segments)),
            )
            if len({getter(o) for o in found}) > 1
        ]
        named.append(f"{topic}-{partition} ({'; '.join(how or ['segment base offsets'])})")
    more = f" and {len(differences) - LISTED} more" if len(differences) > LISTED else ""
    return (
        f"WARNING: the copies of {len(differences)} partitions differ, each purged on its own offsets (the run "
        f"table records them): {', '.join(named)}{more}"
    )


def identity_warning(copies: Sequence[Mapping]) -> str | None:
    """One line naming the copies (of several; dicts with `log_dir`, `node_id`, `directory_id`) that
    their meta.properties does not tell apart: without a broker id, or with another copy's broker and
    directory ids (a copied directory). The ledger and reports name every copy by its directory."""
    if len(copies) < 2:
        return None
    unnamed = [c["log_dir"] for c in copies if c["node_id"] is None]
    claimed: dict = {}
    for c in copies:
        if c["node_id"] is not None:
            claimed.setdefault((c["node_id"], c["directory_id"]), []).append(c["log_dir"])
    shared = [(ids, dirs) for ids, dirs in claimed.items() if len(dirs) > 1]
    said = []
    if unnamed:
        said.append(f"{', '.join(unnamed)} name no broker (no meta.properties, or no node.id in it)")
    for (node, directory), dirs in shared:
        ids = f"broker {node}" + ("" if directory is None else f", {directory}")
        said.append(f"{' and '.join(dirs)} each say they are {ids}")
    if not said:
        return None
    return "WARNING: " + "; ".join(said) + ": these copies are told apart by their directories only"
