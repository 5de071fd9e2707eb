"""Names of the files and directories in a Kafka log directory."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from ..topics import KRAFT_METADATA_TOPIC

# Per-log-dir checkpoint files and per-partition files.
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

SEGMENT_FILE_KINDS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
# Appended after the kind while the cleaner, a split or an asynchronous delete is in flight.
IN_FLIGHT_STATES = (".cleaned", ".swap", ".deleted")
# Directory suffixes of partitions that are being deleted, moved between log dirs, or are strays.
NON_PARTITION_DIR_SUFFIXES = ("-delete", "-future", "-stray")

OFFSET_DIGITS = 20
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_SEGMENT_FILE = re.compile(
    r"([0-9]+)({})({})?".format(
        "|".join(map(re.escape, SEGMENT_FILE_KINDS)), "|".join(map(re.escape, IN_FLIGHT_STATES))
    )
)
_PARTITION = re.compile(r"[0-9]+")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class SegmentFileName(NamedTuple):
    """A parsed segment file name: `00000000000000012345.index.swap` → (12345, ".index", ".swap")."""

    base_offset: int
    kind: str  # one of SEGMENT_FILE_KINDS
    state: str | None = None  # one of IN_FLIGHT_STATES, or None for a live file

    def __str__(self) -> str:
        return segment_file_name(self.base_offset, self.kind + (self.state or ""))


def segment_file_name(base_offset: int, suffix: str) -> str:
    """The file name Kafka gives a segment file: the offset zero-padded to 20 digits, then `suffix`."""
    if not 0 <= base_offset <= INT64_MAX:
        raise ValueError(f"a segment base offset must be in [0, 2^63-1], got {base_offset}")
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}"


def parse_segment_file_name(name: str) -> SegmentFileName | None:
    """Parse a segment, index or snapshot file name; None for any other file.

    Like Kafka's parser this does not insist on the 20-digit padding, only on a decimal offset.
    """
    match = _SEGMENT_FILE.fullmatch(name)
    if match is None:
        return None
    base_offset = int(match.group(1))
    if base_offset > INT64_MAX:  # Kafka's Long.parseLong would refuse it
        return None
    return SegmentFileName(base_offset, match.group(2), match.group(3))


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """`orders-eu-3` → ("orders-eu", 3); None when the directory is not a live partition.

    Kafka splits at the last '-' so topic names may contain '-'. Directories scheduled for deletion,
    future (log-dir move) and stray directories are not partitions of this log dir.
    """
    if name.endswith(NON_PARTITION_DIR_SUFFIXES):
        return None
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not _PARTITION.fullmatch(partition):
        return None
    number = int(partition)
    if number > INT32_MAX:
        return None
    return TopicPartition(topic, number)


def partition_of_file(path: str) -> TopicPartition | None:
    """The partition whose directory holds the file at `path` (a segment, index or snapshot)."""
    return parse_partition_dir_name(posixpath.basename(posixpath.dirname(path.rstrip("/"))))


# Kafka's rule for topic names (org.apache.kafka.common.internals.Topic): ASCII letters and digits,
# '.', '_' and '-', at most 249 characters, and neither "." nor "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def illegal_topic_reason(topic: str) -> str | None:
    """Why Kafka would refuse `topic` as a topic name (Topic.validate), or None for a legal one."""
    if not topic:
        return "a topic name must not be empty"
    if topic in (".", ".."):
        return f"a topic name must not be {topic!r}"
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        return f"a topic name has at most {MAX_TOPIC_NAME_LENGTH} characters, this one has {len(topic)}"
    if not _LEGAL_TOPIC.fullmatch(topic):
        bad = sorted({c for c in topic if not _LEGAL_TOPIC.fullmatch(c)})
        return (
            f"topic {topic!r} contains {', '.join(map(repr, bad[:5]))}: Kafka allows only ASCII letters, "
            "digits, '.', '_' and '-'"
        )
    return None


def illegal_partition_dir_reason(name: str) -> str | None:
    """Why a directory named `<topic>-<partition>` (as parse_partition_dir_name reads it) is not one
    Kafka could have made, or None: the topic breaks Kafka's naming rule, or the partition number
    is not written as Kafka writes it (decimal, no leading zeros: `t-007` and `t-7` would be read as
    the same partition)."""
    parsed = parse_partition_dir_name(name)
    if parsed is None:
        return None
    reason = illegal_topic_reason(parsed.topic)
    if reason is not None:
        return reason
    if name != f"{parsed.topic}-{parsed.partition}":
        return f"partition number {name.rpartition('-')[2]!r} has leading zeros; Kafka writes {parsed.partition}"
    return None


# KRaft's metadata log (Kafka 4.x runs only in KRaft mode): `__cluster_metadata-0` is the controller
# quorum's Raft log (Topic.CLUSTER_METADATA_TOPIC_PARTITION, written by KafkaRaftManager through
# KafkaMetadataLog), and `bootstrap.checkpoint` (BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME, at
# the top of metadata.log.dir) is what `kafka-storage format` wrote. Kafka never applies topic
# retention or compaction to the metadata log: KafkaMetadataLog forces retention.ms and
# retention.bytes to -1 and never compacts; its segments go only below a snapshot
# (`<offset>-<epoch>.checkpoint`), by metadata.max.retention.ms/bytes. kafkalog never rewrites either.
KRAFT_BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
KRAFT_METADATA_NOT_REWRITTEN = "KRaft metadata log: Kafka never compacts or retains it"


# In `__cluster_metadata-0`: the quorum's state (raft's FileQuorumStateStore) and the snapshots,
# `<offset, 20 digits>-<epoch, 10 digits>.checkpoint` (Snapshots.filenameFromSnapshotId); a
# `.checkpoint.part` is one being written, a `.checkpoint.deleted` one being deleted.
QUORUM_STATE = "quorum-state"
_KRAFT_SNAPSHOT = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")


def parse_kraft_snapshot_name(name: str) -> tuple[int, int] | None:
    """(end offset, epoch) of a KRaft snapshot file name, or None for any other name."""
    match = _KRAFT_SNAPSHOT.fullmatch(name)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def is_kraft_metadata(topic: str) -> bool:
    """Whether `topic` is KRaft's metadata log (`__cluster_metadata`, whose one partition is 0),
    which kafkalog never compacts, retains, truncates or purges, whatever the configuration."""
    return topic == KRAFT_METADATA_TOPIC
