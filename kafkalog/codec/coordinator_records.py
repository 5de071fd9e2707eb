"""Records of the coordinators' internal topics (sans-IO): `__consumer_offsets` (the group
coordinator), `__share_group_state` (the share coordinator, KIP-932) and `__transaction_state` (the
transaction coordinator).

Each record's key is an int16 record type (for `__transaction_state`: the key version, 0) and then
the key message; a value is an int16 version and then the value message, in the message-schema
wire format (`codec/message.py`); a null value is a tombstone. `decode_coordinator_record` shows a
record as kafka-dump-log's decoders do; a record type or value version not known here is shown as
its type or version and raw bytes.

The schemas are transcribed from Kafka 4.3's message specs (group-coordinator, share-coordinator
and transaction-coordinator, src/main/resources/common/message). Record types 0 and 1 (offset
commits, the key layouts of Kafka before and after 0.10) share one key and one value schema.
`codec/consumer_offsets.py` reads and writes the classic records (types 0 to 2) with these schemas,
as typed values for the commands that replay them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ..errors import KafkaLogError
from ..topics import CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from .control import ControlType, control_record
from .message import Reader, Schema, decode, parse_schemas

GROUP_SCHEMAS = parse_schemas(
    """
ConsumerGroupCurrentMemberAssignmentKey 0
  groupId string
  memberId string
ConsumerGroupCurrentMemberAssignmentValue 0 flex0+
  memberEpoch int32
  previousMemberEpoch int32
  state int8
  assignedPartitions []{}
    topicId uuid
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  partitionsPendingRevocation []{}
    topicId uuid
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
ConsumerGroupMemberMetadataKey 0
  groupId string
  memberId string
ConsumerGroupMemberMetadataValue 0 flex0+
  instanceId string null0+
  rackId string null0+
  clientId string
  clientHost string
  subscribedTopicNames []string
  subscribedTopicRegex string null0+
  rebalanceTimeoutMs int32
  serverAssignor string null0+
  classicMemberMetadata {} null0+ tag0
    sessionTimeoutMs int32
    supportedProtocols []{}
      name string
      metadata bytes
ConsumerGroupMetadataKey 0
  groupId string
ConsumerGroupMetadataValue 0 flex0+
  epoch int32
  metadataHash int64 tag0
ConsumerGroupPartitionMetadataKey 0
  groupId string
ConsumerGroupPartitionMetadataValue 0 flex0+
  topics []{}
    topicId uuid
    topicName string
    numPartitions int32
    partitionMetadata []{}
      partition int32
      racks []string
ConsumerGroupRegularExpressionKey 0
  groupId string
  regularExpression string
ConsumerGroupRegularExpressionValue 0 flex0+
  topics []string
  version int64
  timestamp int64
ConsumerGroupTargetAssignmentMemberKey 0
  groupId string
  memberId string
ConsumerGroupTargetAssignmentMemberValue 0 flex0+
  topicPartitions []{}
    topicId uuid
    partitions []int32
ConsumerGroupTargetAssignmentMetadataKey 0
  groupId string
ConsumerGroupTargetAssignmentMetadataValue 0 flex0+
  assignmentEpoch int32
  assignmentTimestamp int64 tag0
GroupMetadataKey 0
  group string
GroupMetadataValue 0-4 flex4+
  protocolType string
  generation int32
  protocol string null0+
  leader string null0+
  currentStateTimestamp int64 2+
  members []{}
    memberId string
    groupInstanceId string 3+ null3+
    clientId string
    clientHost string
    rebalanceTimeout int32 1+
    sessionTimeout int32
    subscription bytes
    assignment bytes
OffsetCommitKey 0
  group string
  topic string
  partition int32
OffsetCommitValue 0-4 flex4+
  offset int64
  leaderEpoch int32 3+
  metadata string
  commitTimestamp int64
  expireTimestamp int64 1
  topicId uuid 4+ tag0
ShareGroupCurrentMemberAssignmentKey 0
  groupId string
  memberId string
ShareGroupCurrentMemberAssignmentValue 0 flex0+
  memberEpoch int32
  previousMemberEpoch int32
  state int8
  assignedPartitions []{}
    topicId uuid
    partitions []int32
ShareGroupMemberMetadataKey 0
  groupId string
  memberId string
ShareGroupMemberMetadataValue 0 flex0+
  rackId string null0+
  clientId string
  clientHost string
  subscribedTopicNames []string
ShareGroupMetadataKey 0
  groupId string
ShareGroupMetadataValue 0 flex0+
  epoch int32
  metadataHash int64
ShareGroupStatePartitionMetadataKey 0
  groupId string
ShareGroupStatePartitionMetadataValue 0 flex0+
  initializingTopics []{}
    topicId uuid
    topicName string
    partitions []int32
  initializedTopics []{}
    topicId uuid
    topicName string
    partitions []int32
  deletingTopics []{}
    topicId uuid
    topicName string
ShareGroupTargetAssignmentMemberKey 0
  groupId string
  memberId string
ShareGroupTargetAssignmentMemberValue 0 flex0+
  topicPartitions []{}
    topicId uuid
    partitions []int32
ShareGroupTargetAssignmentMetadataKey 0
  groupId string
ShareGroupTargetAssignmentMetadataValue 0 flex0+
  assignmentEpoch int32
  assignmentTimestamp int64 tag0
StreamsGroupCurrentMemberAssignmentKey 0
  groupId string
  memberId string
StreamsGroupCurrentMemberAssignmentValue 0 flex0+
  memberEpoch int32
  previousMemberEpoch int32
  state int8
  activeTasks []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  standbyTasks []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  warmupTasks []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  activeTasksPendingRevocation []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  standbyTasksPendingRevocation []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
  warmupTasksPendingRevocation []{}
    subtopologyId string
    partitions []int32
    assignmentEpochs []int32 null0+ tag0
StreamsGroupMemberMetadataKey 0
  groupId string
  memberId string
StreamsGroupMemberMetadataValue 0 flex0+
  instanceId string null0+
  rackId string null0+
  clientId string
  clientHost string
  rebalanceTimeoutMs int32
  topologyEpoch int32
  processId string
  userEndpoint {} null0+
    host string
    port uint16
  clientTags []{}
    key string
    value string
StreamsGroupMetadataKey 0
  groupId string
StreamsGroupMetadataValue 0 flex0+
  epoch int32
  metadataHash int64
  validatedTopologyEpoch int32 tag0
  lastAssignmentConfigs []{} null0+ tag1
    key string
    value string
StreamsGroupTargetAssignmentMemberKey 0
  groupId string
  memberId string
StreamsGroupTargetAssignmentMemberValue 0 flex0+
  activeTasks []{}
    subtopologyId string
    partitions []int32
  standbyTasks []{}
    subtopologyId string
    partitions []int32
  warmupTasks []{}
    subtopologyId string
    partitions []int32
StreamsGroupTargetAssignmentMetadataKey 0
  groupId string
StreamsGroupTargetAssignmentMetadataValue 0 flex0+
  assignmentEpoch int32
  assignmentTimestamp int64 tag0
StreamsGroupTopologyKey 0
  groupId string
StreamsGroupTopologyValue 0 flex0+
  epoch int32
  subtopologies []{}
    subtopologyId string
    sourceTopics []string
    sourceTopicRegex []string
    stateChangelogTopics []{}
      name string
      partitions int32
      replicationFactor int16
      topicConfigs []{}
        key string
        value string
    repartitionSinkTopics []string
    repartitionSourceTopics []{}
      name string
      partitions int32
      replicationFactor int16
      topicConfigs []{}
        key string
        value string
    copartitionGroups []{}
      sourceTopics []int16
      sourceTopicRegex []int16
      repartitionSourceTopics []int16
"""
)

SHARE_SCHEMAS = parse_schemas(
    """
ShareSnapshotKey 0
  groupId string
  topicId uuid
  partition int32
ShareSnapshotValue 0 flex0+
  snapshotEpoch int32
  stateEpoch int32
  leaderEpoch int32
  startOffset int64
  deliveryCompleteCount int32 tag0
  createTimestamp int64
  writeTimestamp int64
  stateBatches []{}
    firstOffset int64
    lastOffset int64
    deliveryState int8
    deliveryCount int16
ShareUpdateKey 0
  groupId string
  topicId uuid
  partition int32
ShareUpdateValue 0 flex0+
  snapshotEpoch int32
  leaderEpoch int32
  startOffset int64
  deliveryCompleteCount int32 tag0
  stateBatches []{}
    firstOffset int64
    lastOffset int64
    deliveryState int8
    deliveryCount int16
"""
)

# The consumer protocol's subscription and assignment, as a classic group's members carry them
# (clients/src/main/resources/common/message/ConsumerProtocol*.json).
CONSUMER_PROTOCOL_SCHEMAS = parse_schemas(
    """
ConsumerProtocolAssignment 0-3
  assignedPartitions []{}
    topic string
    partitions []int32
  userData bytes null0+
ConsumerProtocolSubscription 0-3
  topics []string
  userData bytes null0+
  ownedPartitions []{} 1+
    topic string 1+
    partitions []int32 1+
  generationId int32 2+
  rackId string 3+ null3+
"""
)

TRANSACTION_SCHEMAS = parse_schemas(
    """
TransactionLogKey 0
  transactionalId string
TransactionLogValue 0-1 flex1+
  producerId int64
  previousProducerId int64 tag0@1+
  nextProducerId int64 tag1@1+
  producerEpoch int16
  nextProducerEpoch int16 tag3@1+
  transactionTimeoutMs int32
  transactionStatus int8
  transactionPartitions []{} null0+
    topic string
    partitionIds []int32
  transactionLastUpdateTimestampMs int64
  transactionStartTimestampMs int64
  clientTransactionVersion int16 tag2@1+
"""
)

# The group coordinator's record types (CoordinatorRecordType): the schemas are NAME + "Key" and NAME + "Value".
GROUP_RECORD_TYPES = {
    0: "OffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
GROUP_METADATA = 2
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
SHARE_RECORD_TYPES = {SHARE_SNAPSHOT: "ShareSnapshot", SHARE_UPDATE: "ShareUpdate"}
TRANSACTION_RECORD_TYPES = {0: "TransactionLog"}


class RecordFamily(NamedTuple):
    """The records of one coordinator's topic: record type -> schema name stem, and the schemas."""

    topic: str
    types: dict[int, str]
    schemas: dict[str, Schema]

    def schema(self, record_type: int, part: str) -> Schema | None:
        stem = self.types.get(record_type)
        return None if stem is None else self.schemas[stem + part]


GROUP_RECORDS = RecordFamily(CONSUMER_OFFSETS_TOPIC, GROUP_RECORD_TYPES, GROUP_SCHEMAS)
SHARE_RECORDS = RecordFamily(SHARE_GROUP_STATE_TOPIC, SHARE_RECORD_TYPES, SHARE_SCHEMAS)
TRANSACTION_RECORDS = RecordFamily(TRANSACTION_STATE_TOPIC, TRANSACTION_RECORD_TYPES, TRANSACTION_SCHEMAS)


def decode_coordinator_record(family: RecordFamily, key, value) -> dict:
    """A record of `family`'s topic as kafka-dump-log's decoder shows it: {"key": {"type", "data"},
    "value": {"version", "data"} or None for a tombstone}; "raw" bytes instead of "data" for a type
    or version not known here. Bytes Kafka could not have written raise CorruptBatchError (positions
    inside the key or the value)."""
    what = f"{family.topic} key"
    if key is None:
        raise KafkaLogError(f"{what} is null; expected a record type and a key", position=0)
    record_type = Reader(key, what).int16("record type")
    key_schema = family.schema(record_type, "Key")
    decoded: dict = {"key": _message(key_schema, record_type, 0, key, "type"), "value": None}
    if value is not None:
        version = Reader(value, f"{family.topic} value").int16("value version")
        decoded["value"] = _message(family.schema(record_type, "Value"), version, version, value, "version")
        if family is GROUP_RECORDS and record_type == GROUP_METADATA:
            _decode_consumer_protocol(decoded["value"].get("data"))
    return decoded


def _decode_consumer_protocol(group: dict | None) -> None:
    """A classic consumer group's member subscriptions and assignments decoded in place, as
    kafka-dump-log does; bytes that do not decode stay bytes."""
    if group is None or group.get("protocolType") != "consumer":
        return
    for member in group["members"]:
        for field, schema in (
            ("subscription", "ConsumerProtocolSubscription"),
            ("assignment", "ConsumerProtocolAssignment"),
        ):
            data = member[field]
            try:
                version = Reader(data, field).int16("version")
                if CONSUMER_PROTOCOL_SCHEMAS[schema].has_version(version):
                    member[field] = decode(CONSUMER_PROTOCOL_SCHEMAS[schema], version, data[2:], whole=False)
            except KafkaLogError:
                continue


def _message(schema: Schema | None, label: int, version: int, data, label_name: str) -> dict:
    """{label_name: label, "data": fields} of the message after the int16 at the start of `data`."""
    body = bytes(data[2:])
    if schema is None or not schema.has_version(version):
        return {label_name: label, "raw": body}
    try:
        return {label_name: label, "data": decode(schema, version, body)}
    except KafkaLogError as err:
        raise err.located(base_position=2) from None


# -- share-group state, as the share coordinator loads it --------------------------------------------


def share_partition_start_offsets(batches: Iterable) -> dict[tuple[str, str, int], int | None]:
    """The start offset of each share partition (group, topic id, partition) of one
    `__share_group_state` partition, given as its (file, batch) pairs in log order: as the share
    coordinator replays it, a ShareSnapshot replaces a share partition's state, a ShareUpdate applies
    on top of it (its start offset replaces the state's unless it is -1; an update without a state
    before it starts one), and a tombstone of either key deletes the state. None: a start offset that
    is not known (-1, or a value version of a newer Kafka). Transactional batches
    count once their producer's next marker is a COMMIT, as for every coordinator. Errors name the
    segment file and the offset."""
    states: dict[tuple[str, str, int], int | None] = {}
    pending: dict[int, list] = {}
    for file, batch in batches:
        try:
            if batch.is_control:
                marker = control_record(batch)
                if marker is not None:
                    done = pending.pop(batch.producer_id, [])
                    if marker.type == ControlType.COMMIT:
                        _apply_share_records(states, done)
                continue
            records = _share_records(batch)
        except KafkaLogError as err:
            raise err.located(file=file) from None
        if batch.is_transactional:
            pending.setdefault(batch.producer_id, []).extend(records)
        else:
            _apply_share_records(states, records)
    return states


def _share_records(batch) -> list:
    """(record type, share partition, value fields or None) of a batch's records."""
    out = []
    for record in batch.records():
        try:
            decoded = decode_coordinator_record(SHARE_RECORDS, record.key, record.value)
        except KafkaLogError as err:
            raise err.located(offset=record.offset) from None
        key, value = decoded["key"], decoded["value"]
        if "data" not in key:
            continue  # a record type of a newer Kafka: not a share partition's state
        fields = key["data"]
        out.append((key["type"], (fields["groupId"], fields["topicId"], fields["partition"]), value))
    return out


def _apply_share_records(states: dict, records: list) -> None:
    for record_type, partition, value in records:
        if value is None:
            states.pop(partition, None)
        elif "data" not in value:  # a value version of a newer Kafka: the start offset is not known
            states[partition] = None
        elif record_type == SHARE_SNAPSHOT or states.get(partition) is None or value["data"]["startOffset"] != -1:
            start = value["data"]["startOffset"]
            states[partition] = None if start < 0 else start
