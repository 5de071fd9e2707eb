"""Where the replicas of each partition live, as a KRaft cluster's metadata says: the replay of
`TopicRecord`, `PartitionRecord`, `PartitionChangeRecord` and `RemoveTopicRecord` (no I/O).

The rules, restated from Kafka's metadata image (TopicsDelta, TopicDelta, PartitionRegistration,
MetadataBatchLoader, DirectoryId):
- a `TopicRecord` creates a topic: its id, its name, no partitions. Names are looked up through the
  topic id, so a topic deleted and created again under the same name is a new topic;
- a `PartitionRecord` sets a partition's whole registration; a `PartitionChangeRecord` merges into
  it (PartitionRegistration.merge): `replicas` null (or absent) keeps the replicas, `directories`
  null keeps the directories; directories that are absent (versions before 1), empty or all
  MIGRATING become one MIGRATING per replica (defaultToMigrating). A record whose directories do not
  match its replicas in number is refused, as Kafka refuses it (InvalidReplicaDirectoriesException);
- a `RemoveTopicRecord` removes the topic and all its partitions; a change of a partition or topic
  that does not exist is refused, as Kafka's replay refuses it;
- records between a `BeginTransactionRecord` and its `EndTransactionRecord` apply together at the
  end; those before an `AbortTransactionRecord`, or of a transaction still open at the end of the
  log, never apply (KIP-868's metadata transactions).
A directory id that names no directory -- MIGRATING (the replica's directory is not known yet),
UNASSIGNED, LOST -- is kept as it is and reported as unknown (`Replica.directory` None).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KafkaLogError

# Kafka's DirectoryId: reserved directory ids, as Uuid.toString writes them
MIGRATING = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid(0, 0): the broker has not said which directory yet
UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1): to be placed in any directory
LOST = "AAAAAAAAAAAAAAAAAAAAAg"  # Uuid(0, 2): the directory was lost
NO_DIRECTORY = frozenset({MIGRATING, UNASSIGNED, LOST})

TOPIC, PARTITION, CHANGE = "TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD"
REMOVE_TOPIC = "REMOVE_TOPIC_RECORD"
BEGIN, END, ABORT = "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"
_REPLAYED = (TOPIC, PARTITION, CHANGE, REMOVE_TOPIC)


class MetadataReplayError(KafkaLogError):
    """A metadata record that Kafka's metadata replay would refuse, or that kafkalog cannot read."""


@dataclass(frozen=True)
class Replica:
    broker: int
    directory: str | None  # the directory id, None where the metadata names none (MIGRATING, UNASSIGNED, LOST)


@dataclass(frozen=True)
class Assignment:
    """A partition's replicas (broker ids) and the directory of each, in the metadata's order."""

    replicas: tuple[int, ...]
    directories: tuple[str, ...]

    def replica_list(self) -> list[Replica]:
        return [
            Replica(broker, None if directory in NO_DIRECTORY else directory)
            for broker, directory in zip(self.replicas, self.directories)
        ]


class AssignmentReplay:
    """Replays decoded metadata records (`codec.metadata_records.decode_metadata_record`), in offset
    order, from an empty image: feed a snapshot's records and then the log's that follow it."""

    def __init__(self) -> None:
        self.topic_names: dict[str, str] = {}  # topic id -> name
        self._partitions: dict[str, dict[int, Assignment]] = {}  # topic id -> partition -> assignment
        self._transaction: list[dict] | None = None  # the records of an open metadata transaction

    def apply(self, offset: int, record: dict) -> None:
        """Replay one record; MetadataReplayError (naming `offset`) for one Kafka would refuse."""
        kind = record["type"]
        try:
            if kind == BEGIN:
                if self._transaction is not None:
                    raise MetadataReplayError("a BeginTransactionRecord inside a metadata transaction")
                self._transaction = []
            elif kind in (END, ABORT):
                if self._transaction is None:
                    raise MetadataReplayError(f"{_name(kind)} without a BeginTransactionRecord")
                committed, self._transaction = self._transaction, None
                for data in committed if kind == END else ():
                    self._replay(data)
            elif kind in _REPLAYED:
                _check_version(record)
                if self._transaction is not None:
                    self._transaction.append(record)
                else:
                    self._replay(record)
        except MetadataReplayError as err:
            err.offset = offset
            raise

    def assignments(self) -> dict[tuple[str, int], Assignment]:
        """(topic name, partition) -> Assignment, for every partition of every topic that exists."""
        return dict(
            sorted(
                ((self.topic_names[tid], p), a) for tid, listed in self._partitions.items() for p, a in listed.items()
            )
        )

    def _replay(self, record: dict) -> None:
        kind, data = record["type"], record["data"]
        topic_id = data["topicId"]
        if kind == TOPIC:
            self.topic_names[topic_id], self._partitions[topic_id] = data["name"], {}
            return
        if topic_id not in self.topic_names:
            raise MetadataReplayError(f"{_name(kind)} of topic id {topic_id}, which no TopicRecord created")
        if kind == REMOVE_TOPIC:
            del self.topic_names[topic_id], self._partitions[topic_id]
            return
        partitions, pid = self._partitions[topic_id], data["partitionId"]
        if kind == PARTITION:
            partitions[pid] = _registration(data["replicas"], data.get("directories"), None)
            return
        current = partitions.get(pid)
        if current is None:
            raise MetadataReplayError(
                f"PartitionChangeRecord of partition {data['partitionId']} of topic "
                f"{self.topic_names[topic_id]} ({topic_id}), which no PartitionRecord created"
            )
        partitions[pid] = _registration(data.get("replicas"), data.get("directories"), current)


def _registration(replicas: list[int] | None, directories: list[str] | None, current: Assignment | None) -> Assignment:
    """PartitionRegistration from a PartitionRecord (`current` None) or merged with a change: null
    keeps the current value, and all-MIGRATING (or no) directories are one MIGRATING per replica."""
    new_replicas = tuple(replicas) if replicas is not None else current.replicas if current else ()
    if directories is not None and directories and replicas is not None and len(directories) != len(replicas):
        raise MetadataReplayError(
            f"{len(directories)} directories for {len(replicas)} replicas; Kafka refuses the record "
            "(InvalidReplicaDirectoriesException)"
        )
    new_directories = tuple(directories) if directories is not None else current.directories if current else ()
    if all(d == MIGRATING for d in new_directories):
        new_directories = (MIGRATING,) * len(new_replicas)
    if len(new_directories) != len(new_replicas):
        raise MetadataReplayError(
            f"the partition would have {len(new_directories)} directories for {len(new_replicas)} replicas; "
            "Kafka refuses the record (the lengths for replicas and directories do not match)"
        )
    return Assignment(new_replicas, new_directories)


def _check_version(record: dict) -> None:
    """A record the codec could not read (a version newer than its schemas) cannot be replayed."""
    if "data" not in record:
        raise MetadataReplayError(
            f"{_name(record['type'])} version {record['version']} is newer than the versions kafkalog "
            "reads; cannot tell where replicas live"
        )


def _name(kind: str) -> str:
    """TOPIC_RECORD -> TopicRecord, as Kafka's messages are named."""
    return "".join(word.capitalize() for word in kind.split("_"))
