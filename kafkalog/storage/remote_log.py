"""The remote log of tiered partitions (KIP-405): where kafkalog learns what is in remote storage.

Two sources, each optional:

* `__remote_log_metadata` in the log directory: the records of Kafka's
  TopicBasedRemoteLogMetadataManager, replayed (`codec/remote_log_metadata.py`) into each
  partition's remote segments and their states.
* A remote storage directory in the layout of Kafka's reference `LocalTieredStorage` (its test
  tree: RemoteTopicPartitionDirectory and RemoteLogSegmentFileset), on a local path or an object
  store: `<root>/kafka-tiered-storage/<topic>-<partition>-<topicId>/<startOffset>-<segmentId>` with
  the suffixes `.log`, `.index`, `.timeindex`, `.txnindex` (optional), `.snapshot` and
  `.leader_epoch_checkpoint`; the start offset has 20 digits, the ids are Kafka's 22-character
  base64 uuids. A fileset is complete when every file but the optional one is there
  (`openExistingFileset`); LocalTieredStorage copies the files in that order, the snapshot last.

`tiered_segments` reads a partition as its remote segments then its local ones, in offset order,
each offset once.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..codec.remote_log_metadata import (
    RemoteLogSegments,
    decode_remote_log_metadata,
    highest_uploaded_offset,
    remote_log_segments,
)
from ..errors import KafkaLogError, LogDirError
from ..topics import REMOTE_LOG_METADATA_TOPIC
from .checkpoint import parse_partition_metadata
from .fs import FileEntry, LogFileSystem
from .logdir import LogDir
from .naming import PARTITION_METADATA, SegmentFileName
from .partition import Partition
from .segment import LogSegment, locate

ROOT_STORAGE_DIR_NAME = "kafka-tiered-storage"  # LocalTieredStorage.ROOT_STORAGE_DIR_NAME
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")  # the files a LogSegment reads
REQUIRED_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".leader_epoch_checkpoint")
# the staging directory of a purge's rewrite of a fileset, `<startOffset>-<segmentId>` + this
# (storage/remote_rewrite.py); one left by an interrupted purge makes the partition unreadable
REMOTE_STAGING_SUFFIX = ".kafkalog-staged"
_UUID = r"[a-zA-Z0-9_-]{22}"
_PARTITION_DIR = re.compile(rf"([a-zA-Z0-9._-]+)-(\d+)-({_UUID})")  # Topic.LEGAL_CHARS
_FILESET_FILE = re.compile(rf"(\d+)-({_UUID})(\.[a-z_]+)")


def remote_segment_file(name: str) -> SegmentFileName | None:
    """A remote segment's file name, `<startOffset>-<segmentId>.<suffix>`, as (start offset, suffix);
    None for another name."""
    matched = _FILESET_FILE.fullmatch(name)
    if matched is None or matched[3] not in (*SEGMENT_SUFFIXES, *REQUIRED_SUFFIXES):
        return None
    return SegmentFileName(int(matched[1]), matched[3])


def topic_id(part: Partition) -> str | None:
    """The topic id of a local partition (`partition.metadata`), None without the file."""
    return partition_topic_id(part.fs, part.path)


def partition_topic_id(fs: LogFileSystem, partition_path: str) -> str | None:
    """`topic_id` of the partition directory at `partition_path`, without listing it."""
    path = fs.join(partition_path, PARTITION_METADATA)
    if not fs.exists(path):
        return None
    return parse_partition_metadata(fs.read_bytes(path).decode("utf-8", "replace"), file=path).topic_id


# -- __remote_log_metadata -----------------------------------------------------------------------------------


def read_remote_log_metadata(log_dir: LogDir) -> RemoteLogSegments | None:
    """The remote segments that the log dir's `__remote_log_metadata` partitions tell, replayed in
    each partition's log order; None when the log dir has none of them."""
    parts = [log_dir.partition(t, p) for t, p in log_dir.topic_partitions if t == REMOTE_LOG_METADATA_TOPIC]
    if not parts:
        return None
    out: RemoteLogSegments = {}
    for part in parts:  # a remote partition's records are all in one metadata partition
        out.update(remote_log_segments(_decoded(part)))
    return out


def _decoded(part: Partition) -> Iterable[dict]:
    for segment in part.segments:
        for position, batch in segment.batches():
            if batch.is_control:
                continue
            try:
                records = [decode_remote_log_metadata(r.value) for r in batch.records()]
            except KafkaLogError as err:
                raise locate(err, segment.log_path, position, batch) from None
            yield from records


# -- Kafka's LocalTieredStorage layout ----------------------------------------------------------------------


@dataclass
class RemotePartition:
    """One `<topic>-<partition>-<topicId>` directory: its segments (complete filesets) in offset
    order as LogSegments, and the incomplete filesets (a copy in progress or interrupted)."""

    fs: LogFileSystem
    path: str
    topic: str
    partition: int
    topic_id: str
    segments: list[LogSegment] = field(default_factory=list)
    segment_ids: dict[int, str] = field(default_factory=dict)  # start offset -> segment id
    incomplete: list[str] = field(default_factory=list)  # paths of a fileset's files

    @classmethod
    def open(cls, fs: LogFileSystem, path: str, *, staging_ok: bool = False) -> RemotePartition:
        """The partition at `path`; a purge's staging directory in it is refused unless `staging_ok`
        (the purge's own tasks, which stage beside each other)."""
        name = fs.name(path)
        matched = _PARTITION_DIR.fullmatch(name)
        if matched is None:
            raise LogDirError(
                f"{name!r} is not a remote partition directory name (expected <topic>-<partition>-<topicId>)",
                file=path,
            )
        part = cls(fs, path, matched[1], int(matched[2]), matched[3])
        filesets: dict[tuple[int, str], dict[str, FileEntry]] = {}
        for entry in fs.list_dir(path):
            if entry.is_dir and entry.name.endswith(REMOTE_STAGING_SUFFIX):
                if staging_ok:
                    continue
                raise LogDirError(
                    "an interrupted kafkalog purge left this staged rewrite of a remote segment: run the purge "
                    "again with the same remote storage directory, which finishes (or undoes) it, before reading "
                    "the partition or starting the broker",
                    file=entry.path,
                )
            parsed = None if entry.is_dir else _FILESET_FILE.fullmatch(entry.name)
            if parsed is None:
                raise LogDirError(
                    f"{entry.name!r} is not a remote segment file (expected <startOffset>-<segmentId>.<suffix>)",
                    file=entry.path,
                )
            filesets.setdefault((int(parsed[1]), parsed[2]), {})[parsed[3]] = entry
        for (start, segment_id), files in sorted(filesets.items()):
            if not all(s in files for s in REQUIRED_SUFFIXES):
                part.incomplete += [e.path for e in files.values()]
                continue
            if start in part.segment_ids:
                raise LogDirError(
                    f"two remote segments start at offset {start} ({part.segment_ids[start]} and {segment_id})",
                    file=path,
                )
            kept = {s: e for s, e in files.items() if s in SEGMENT_SUFFIXES}
            part.segments.append(LogSegment(fs, path, start, kept, topic=part.topic, partition=part.partition))
            part.segment_ids[start] = segment_id
        for segment, following in zip(part.segments, part.segments[1:]):
            segment.next_base_offset = following.base_offset
        return part

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @staticmethod
    def is_remote_partition(fs: LogFileSystem, path: str) -> bool:
        """Whether `path` is named as a remote partition directory and is one."""
        return _PARTITION_DIR.fullmatch(fs.name(path)) is not None and fs.is_dir(path)

    def highest_offset(self) -> int:
        """The last offset of the last complete segment (-1: none), read from its files."""
        for segment in reversed(self.segments):
            last = segment.last_offset()
            if last is not None:
                return last
        return -1


@dataclass
class RemoteStorage:
    """A LocalTieredStorage directory: `path` is its `kafka-tiered-storage` directory (given itself,
    or the directory that holds it, as the `dir` setting of the storage manager names it)."""

    fs: LogFileSystem
    path: str
    partition_paths: dict[tuple[str, int], list[str]] = field(default_factory=dict)

    @classmethod
    def open(cls, path_or_uri: str) -> RemoteStorage:
        return cls.at(*LogFileSystem.for_path(path_or_uri))

    @classmethod
    def at(cls, fs: LogFileSystem, path: str) -> RemoteStorage:
        if fs.name(path) != ROOT_STORAGE_DIR_NAME and fs.is_dir(fs.join(path, ROOT_STORAGE_DIR_NAME)):
            path = fs.join(path, ROOT_STORAGE_DIR_NAME)
        if not fs.is_dir(path):
            raise LogDirError("remote storage directory does not exist or is not a directory", file=path)
        storage = cls(fs, path)
        for entry in fs.list_dir(path):
            matched = _PARTITION_DIR.fullmatch(entry.name) if entry.is_dir else None
            if matched is None:
                raise LogDirError(
                    f"{entry.name!r} is not a remote partition directory (expected <topic>-<partition>-<topicId>)",
                    file=entry.path,
                )
            storage.partition_paths.setdefault((matched[1], int(matched[2])), []).append(entry.path)
        return storage

    @staticmethod
    def is_remote_storage(fs: LogFileSystem, path: str) -> bool:
        """Whether the directory is (or holds) a `kafka-tiered-storage` directory."""
        return fs.name(path) == ROOT_STORAGE_DIR_NAME or fs.is_dir(fs.join(path, ROOT_STORAGE_DIR_NAME))

    def partitions(self) -> list[RemotePartition]:
        return [RemotePartition.open(self.fs, p) for _, paths in sorted(self.partition_paths.items()) for p in paths]

    def partition(self, topic: str, partition: int, topic_id: str | None = None) -> RemotePartition | None:
        """The remote partition of (topic, partition), of `topic_id` when given (a topic deleted and
        made again under its name has another id); None when there is none. Without a topic id,
        two directories of the partition are refused: which one is the live topic is not known."""
        paths = [
            p
            for p in self.partition_paths.get((topic, partition), [])
            if topic_id is None or self.fs.name(p).endswith(f"-{topic_id}")
        ]
        if not paths:
            return None
        if len(paths) > 1:
            raise LogDirError(
                f"{len(paths)} remote directories of partition {topic}-{partition} (topics of the same name "
                "with different ids); the local partition's partition.metadata names which one is live",
                file=self.path,
            )
        return RemotePartition.open(self.fs, paths[0])


# -- what a partition's remote log is -------------------------------------------------------------------


@dataclass
class RemoteLogView:
    """Everything kafkalog was given about remote storage: the replayed `__remote_log_metadata`
    (None: not in the log dir) and a LocalTieredStorage directory (None: none given)."""

    metadata: RemoteLogSegments | None = None
    storage: RemoteStorage | None = None

    def highest_offset(self, part: Partition) -> int | None:
        """UnifiedLog.highestOffsetInRemoteStorage of a local partition: the highest offset of a
        copied segment (-1: none). `__remote_log_metadata` is Kafka's own view and wins where it lists
        the partition (a fileset whose copy it does not record as finished is one Kafka deletes, not
        one it reads); the remote storage directory answers for a partition it does not list (its
        records may be in another broker's log dir). None when neither knows the partition (or it has
        no topic id to find its remote log by)."""
        tid = topic_id(part)
        if tid is None:
            return None
        if self.metadata is not None and (tid, part.partition) in self.metadata:
            return highest_uploaded_offset(self.metadata[(tid, part.partition)].values())
        remote = self.storage.partition(part.topic, part.partition, tid) if self.storage is not None else None
        return remote.highest_offset() if remote is not None else None


def open_remote_log(log_dir: LogDir, remote_storage: str | None = None) -> RemoteLogView:
    return RemoteLogView(
        read_remote_log_metadata(log_dir), RemoteStorage.open(remote_storage) if remote_storage else None
    )


def tiered_segments(remote: Sequence[LogSegment], local: Sequence[LogSegment]) -> list[LogSegment]:
    """A partition's segments in offset order, each offset once: the remote segments below the first
    local segment, then the local ones (offsets both hold are read from the local copy). Kafka copies
    whole local segments, so the two meet at a segment boundary; a remote segment that runs into the
    local log is refused, naming its file."""
    if not local:
        return list(remote)
    first_local = local[0].base_offset
    below = [s for s in remote if s.base_offset < first_local]
    if below:
        last = below[-1].last_offset()
        if last is not None and last >= first_local:
            raise KafkaLogError(
                f"remote segment ends at offset {last}, inside the local log that starts at {first_local}; "
                "expected the remote and local segments to meet at a segment boundary",
                file=below[-1].log_path,
            )
        below[-1] = dataclasses.replace(below[-1], next_base_offset=first_local)  # its offsets' bound
    return [*below, *local]


def with_remote_segments(log_dir: LogDir, segments: Sequence[LogSegment], storage: RemoteStorage) -> list[LogSegment]:
    """Local segments (of several partitions, in partition then offset order) with each partition's
    remote segments before them (`tiered_segments`); a partition's remote log is the directory of its
    topic id (`partition.metadata`)."""
    out: list[LogSegment] = []
    for (topic, number), group in itertools.groupby(segments, key=lambda s: (s.topic, s.partition)):
        local = list(group)
        tid = partition_topic_id(log_dir.fs, log_dir.partition_paths[(topic, number)])
        remote = storage.partition(topic, number, tid) if tid is not None else None
        out += tiered_segments(remote.segments, local) if remote is not None else local
    return out
