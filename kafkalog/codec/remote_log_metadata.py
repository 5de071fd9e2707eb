"""Records of `__remote_log_metadata`, the topic of Kafka's TopicBasedRemoteLogMetadataManager
(KIP-405 tiered storage), sans-IO.

A record has a null key; its value is framed as RemoteLogMetadataSerde (AbstractApiMessageSerde)
writes it: an unsigned varint frame version (1), the message's api key and its version (unsigned
varints), then the message in the message-schema wire format (`codec/message.py`). The four
messages (Kafka 4.3's storage/src/main/resources/message/*.json, all version 0 and flexible):

* 0 RemoteLogSegmentMetadataRecord -- a segment's copy to remote storage started: its id, offsets,
  leader epochs and size;
* 1 RemoteLogSegmentMetadataUpdateRecord -- its state changed (copy finished, deletion started or
  finished);
* 2 RemotePartitionDeleteMetadataRecord -- a partition's remote log is being deleted;
* 3 RemoteLogSegmentMetadataSnapshotRecord -- a segment in the metadata manager's snapshot file.

`remote_log_segments` replays them as RemoteLogMetadataCache does, giving each partition's remote
segments and their states; `highest_uploaded_offset` is what UnifiedLog learns from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ..errors import CorruptBatchError, UnsupportedFormatError
from .message import decode, parse_schemas, read_frame

_SEGMENT_ID = """
  remoteLogSegmentId {}
    topicIdPartition {}
      name string
      id uuid
      partition int32
    id uuid"""
_EPOCHS = """
  segmentLeaderEpochs []{}
    leaderEpoch int32
    offset int64"""

SCHEMAS = parse_schemas(
    f"""
RemoteLogSegmentMetadataRecord 0 flex0+{_SEGMENT_ID}
  startOffset int64
  endOffset int64
  brokerId int32
  maxTimestampMs int64
  eventTimestampMs int64{_EPOCHS}
  segmentSizeInBytes int32
  customMetadata bytes null0+
  remoteLogSegmentState int8
  txnIndexEmpty bool tag0
RemoteLogSegmentMetadataUpdateRecord 0 flex0+{_SEGMENT_ID}
  brokerId int32
  eventTimestampMs int64
  customMetadata bytes null0+
  remoteLogSegmentState int8
RemotePartitionDeleteMetadataRecord 0 flex0+
  topicIdPartition {{}}
    name string
    id uuid
    partition int32
  brokerId int32
  eventTimestampMs int64
  remotePartitionDeleteState int8
RemoteLogSegmentMetadataSnapshotRecord 0 flex0+
  segmentId uuid
  startOffset int64
  endOffset int64
  brokerId int32
  maxTimestampMs int64
  eventTimestampMs int64{_EPOCHS}
  segmentSizeInBytes int32
  customMetadata bytes null0+
  remoteLogSegmentState int8
  txnIndexEmpty bool tag0
"""
)
API_KEYS = {
    0: "RemoteLogSegmentMetadataRecord",
    1: "RemoteLogSegmentMetadataUpdateRecord",
    2: "RemotePartitionDeleteMetadataRecord",
    3: "RemoteLogSegmentMetadataSnapshotRecord",
}
# RemoteLogSegmentState.id() and RemotePartitionDeleteState.id()
SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED")
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"


def _state_name(names: tuple[str, ...], value: int, what: str) -> str:
    if not 0 <= value < len(names):
        raise CorruptBatchError(f"{what} {value} is not one of Kafka's ({', '.join(names)})", position=0)
    return names[value]


def decode_remote_log_metadata(value) -> dict:
    """A `__remote_log_metadata` record value: {"type", "version", "data"}, with the state byte also
    named ("state"). Raises CorruptBatchError for bytes Kafka could not have written, and
    UnsupportedFormatError for a message type or version Kafka's RemoteLogMetadataSerde does not
    know (it refuses them too); positions are inside `value`."""
    api_key, version, start = read_frame(value, "remote log metadata record")
    schema = SCHEMAS.get(API_KEYS.get(api_key, ""))
    if schema is None or not schema.has_version(version):
        raise UnsupportedFormatError(
            f"remote log metadata record type {api_key} version {version} is not one Kafka defines "
            f"({', '.join(f'{k} {n} v0' for k, n in API_KEYS.items())})",
            position=0,
        )
    try:
        data = decode(schema, version, bytes(value[start:]))
        if "remotePartitionDeleteState" in data:
            state = _state_name(PARTITION_DELETE_STATES, data["remotePartitionDeleteState"], "partition delete state")
        else:
            state = _state_name(SEGMENT_STATES, data["remoteLogSegmentState"], "segment state")
    except CorruptBatchError as err:
        raise err.located(base_position=start) from None
    return {"type": schema.name, "version": version, "state": state, "data": data}


class RemoteLogSegment(NamedTuple):
    """One remote segment as the metadata tells it (RemoteLogSegmentMetadata)."""

    topic: str
    topic_id: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int  # inclusive
    state: str
    size: int
    max_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset)


# (topic id, partition) -> segment id -> segment
RemoteLogSegments = dict[tuple[str, int], dict[str, RemoteLogSegment]]


def remote_log_segments(values: Iterable) -> RemoteLogSegments:
    """Replay decoded records (`decode_remote_log_metadata` outputs, in log order) as
    RemoteLogMetadataCache does: a copy start adds a segment, an update changes its state (a
    finished deletion removes it), a finished partition deletion removes the partition. Snapshot
    records (which name no partition) are not part of the topic and are left out."""
    out: RemoteLogSegments = {}
    for record in values:
        data, state = record["data"], record["state"]
        if record["type"] == "RemotePartitionDeleteMetadataRecord":
            if state == "DELETE_PARTITION_FINISHED":
                tip = data["topicIdPartition"]
                out.pop((tip["id"], tip["partition"]), None)
            continue
        if record["type"] == "RemoteLogSegmentMetadataSnapshotRecord":
            continue
        sid = data["remoteLogSegmentId"]
        tip = sid["topicIdPartition"]
        segments = out.setdefault((tip["id"], tip["partition"]), {})
        if record["type"] == "RemoteLogSegmentMetadataRecord":
            epochs = tuple((e["leaderEpoch"], e["offset"]) for e in data["segmentLeaderEpochs"])
            segments[sid["id"]] = RemoteLogSegment(
                tip["name"],
                tip["id"],
                tip["partition"],
                sid["id"],
                data["startOffset"],
                data["endOffset"],
                state,
                data["segmentSizeInBytes"],
                data["maxTimestampMs"],
                epochs,
            )
        elif sid["id"] in segments:  # an update of a segment whose start was seen
            if state == "DELETE_SEGMENT_FINISHED":
                del segments[sid["id"]]
            else:
                segments[sid["id"]] = segments[sid["id"]]._replace(state=state)
    return out


def highest_uploaded_offset(segments: Iterable[RemoteLogSegment]) -> int:
    """The highest offset (inclusive) of a copied segment that is not being deleted, as
    UnifiedLog.highestOffsetInRemoteStorage; -1 when there is none."""
    return max((s.end_offset for s in segments if s.state == COPY_SEGMENT_FINISHED), default=-1)
