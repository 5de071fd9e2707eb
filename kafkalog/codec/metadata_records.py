"""Records of the KRaft metadata log (`__cluster_metadata`, its `.checkpoint` snapshots, the
`bootstrap.checkpoint`) and KRaft's control records (sans-IO).

A metadata record is a record value framed as Kafka's MetadataRecordSerde writes it: an unsigned
varint frame version (1), the record type (an unsigned varint, Kafka's MetadataRecordType id), the
record's version (an unsigned varint), then the record in the message-schema wire format
(`codec/message.py`). A KRaft control record (leader change, snapshot header and footer, KRaft
version, voters) is a control batch's record whose value is the message itself, its first field
the message's version.

The schemas below are transcribed from Kafka 4.3's message specs (metadata/src/main/resources/
common/metadata and clients/src/main/resources/common/message). A record type or version not among
them is shown as its type, version and raw bytes.
"""

from __future__ import annotations

import re

from ..errors import CorruptBatchError
from .control import ControlType
from .message import FRAME_VERSION, Reader, decode, encode, parse_schemas, read_frame
from .varint import write_uvarint

METADATA_SCHEMAS = parse_schemas(
    """
AbortTransactionRecord 0 flex0+
  reason string null0+ tag0
AccessControlEntryRecord 0 flex0+
  id uuid
  resourceType int8
  resourceName string
  patternType int8
  principal string
  host string
  operation int8
  permissionType int8
BeginTransactionRecord 0 flex0+
  name string null0+ tag0
BrokerRegistrationChangeRecord 0-3 flex0+
  brokerId int32
  brokerEpoch int64
  fenced int8 tag0
  inControlledShutdown int8 1+ tag1
  logDirs []uuid 2+ tag2
  cordonedLogDirs []uuid 3+ null3+ tag3
ClearElrRecord 0 flex0+
  topicName string
ClientQuotaRecord 0 flex0+
  entity []{}
    entityType string
    entityName string null0+
  key string
  value float64
  remove bool
ConfigRecord 0 flex0+
  resourceType int8
  resourceName string
  name string
  value string null0+
DelegationTokenRecord 0 flex0+
  owner string
  requester string
  renewers []string
  issueTimestamp int64
  maxTimestamp int64
  expirationTimestamp int64
  tokenId string
EndTransactionRecord 0 flex0+
FeatureLevelRecord 0 flex0+
  name string
  featureLevel int16
FenceBrokerRecord 0 flex0+
  id int32
  epoch int64
NoOpRecord 0 flex0+
PartitionChangeRecord 0-2 flex0+
  partitionId int32
  topicId uuid
  isr []int32 null0+ tag0
  leader int32 tag1
  replicas []int32 null0+ tag2
  removingReplicas []int32 null0+ tag3
  addingReplicas []int32 null0+ tag4
  leaderRecoveryState int8 tag5
  directories []uuid 1+ null1+ tag8
  eligibleLeaderReplicas []int32 2+ null2+ tag6
  lastKnownElr []int32 2+ null2+ tag7
PartitionRecord 0-2 flex0+
  partitionId int32
  topicId uuid
  replicas []int32
  isr []int32
  removingReplicas []int32
  addingReplicas []int32
  leader int32
  leaderRecoveryState int8 tag0
  leaderEpoch int32
  partitionEpoch int32
  directories []uuid 1+
  eligibleLeaderReplicas []int32 2+ null2+ tag1
  lastKnownElr []int32 2+ null2+ tag2
ProducerIdsRecord 0 flex0+
  brokerId int32
  brokerEpoch int64
  nextProducerId int64
RegisterBrokerRecord 0-4 flex0+
  brokerId int32
  isMigratingZkBroker bool 2+
  incarnationId uuid
  brokerEpoch int64
  endPoints []{}
    name string
    host string
    port uint16
    securityProtocol int16
  features []{}
    name string
    minSupportedVersion int16
    maxSupportedVersion int16
  rack string null0+
  fenced bool
  inControlledShutdown bool 1+
  logDirs []uuid 3+ tag0
  cordonedLogDirs []uuid 4+ null4+ tag1
RegisterControllerRecord 0 flex0+
  controllerId int32
  incarnationId uuid
  zkMigrationReady bool
  endPoints []{}
    name string
    host string
    port uint16
    securityProtocol int16
  features []{}
    name string
    minSupportedVersion int16
    maxSupportedVersion int16
RemoveAccessControlEntryRecord 0 flex0+
  id uuid
RemoveDelegationTokenRecord 0 flex0+
  tokenId string
RemoveTopicRecord 0 flex0+
  topicId uuid
RemoveUserScramCredentialRecord 0 flex0+
  name string
  mechanism int8
TopicRecord 0 flex0+
  name string
  topicId uuid
UnfenceBrokerRecord 0 flex0+
  id int32
  epoch int64
UnregisterBrokerRecord 0 flex0+
  brokerId int32
  brokerEpoch int64
UserScramCredentialRecord 0 flex0+
  name string
  mechanism int8
  salt bytes
  storedKey bytes
  serverKey bytes
  iterations int32
ZkMigrationStateRecord 0 flex0+
  zkMigrationState int8
"""
)

# MetadataRecordType: the record type ids.
METADATA_RECORD_TYPES = {
    0: "RegisterBrokerRecord",
    1: "UnregisterBrokerRecord",
    2: "TopicRecord",
    3: "PartitionRecord",
    4: "ConfigRecord",
    5: "PartitionChangeRecord",
    7: "FenceBrokerRecord",
    8: "UnfenceBrokerRecord",
    9: "RemoveTopicRecord",
    10: "DelegationTokenRecord",
    11: "UserScramCredentialRecord",
    12: "FeatureLevelRecord",
    14: "ClientQuotaRecord",
    15: "ProducerIdsRecord",
    17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord",
    19: "RemoveAccessControlEntryRecord",
    20: "NoOpRecord",
    21: "ZkMigrationStateRecord",
    22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord",
    24: "EndTransactionRecord",
    25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord",
    27: "RegisterControllerRecord",
    28: "ClearElrRecord",
}

KRAFT_CONTROL_SCHEMAS = parse_schemas(
    """
KRaftVersionRecord 0 flex0+
  version int16
  kRaftVersion int16
LeaderChangeMessage 0-1 flex0+
  version int16
  leaderId int32
  voters []{}
    voterId int32
    voterDirectoryId uuid 1+
  grantingVoters []{}
    voterId int32
    voterDirectoryId uuid 1+
SnapshotFooterRecord 0 flex0+
  version int16
SnapshotHeaderRecord 0 flex0+
  version int16
  lastContainedLogTimestamp int64
VotersRecord 0 flex0+
  version int16
  voters []{}
    voterId int32
    voterDirectoryId uuid
    endpoints []{}
      name string
      host string
      port uint16
    kRaftVersionFeature {}
      minSupportedVersion int16
      maxSupportedVersion int16
"""
)

# The schema of each KRaft control type's value (ControlRecordType).
_KRAFT_CONTROL = {
    ControlType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlType.KRAFT_VOTERS: "VotersRecord",
}


def metadata_type_name(record_type: int) -> str:
    """Kafka's MetadataRecordType name (TOPIC_RECORD, ...) of a record type id, or the id as text."""
    name = METADATA_RECORD_TYPES.get(record_type)
    return str(record_type) if name is None else re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def decode_metadata_record(value) -> dict:
    """A metadata record value: {"type", "version", "data"} as kafka-dump-log's cluster-metadata
    decoder shows it, or {"type", "version", "raw"} for a type or version not known here. A frame
    Kafka could not have written raises CorruptBatchError, positions inside `value`."""
    record_type, version, start = read_frame(value, "metadata record")
    out: dict = {"type": metadata_type_name(record_type), "version": version}
    schema = METADATA_SCHEMAS.get(METADATA_RECORD_TYPES.get(record_type, ""))
    body = bytes(value[start:])
    if schema is None or not schema.has_version(version):
        out["raw"] = body
        return out
    try:
        out["data"] = decode(schema, version, body)
    except CorruptBatchError as err:
        raise err.located(base_position=start) from None
    return out


def encode_metadata_record(name: str, version: int, data: dict) -> bytes:
    """The record value MetadataRecordSerde writes for the record `name` (TopicRecord, ...) at
    `version` with the fields `data` (as `decode_metadata_record` returns them): what it reads back."""
    (record_type,) = [t for t, n in METADATA_RECORD_TYPES.items() if n == name]
    out = bytearray()
    for number in (FRAME_VERSION, record_type, version):
        write_uvarint(out, number)
    return bytes(out) + encode(METADATA_SCHEMAS[name], version, data)


def decode_kraft_control(control_type: ControlType, value) -> dict | None:
    """The value of a KRaft control record (leader change, snapshot header or footer, KRaft version,
    voters) as its fields, read at the version its first field names; None for another control type.
    A version not known here gives {"version", "raw"}."""
    name = _KRAFT_CONTROL.get(control_type)
    if name is None:
        return None
    schema = KRAFT_CONTROL_SCHEMAS[name]
    if value is None:
        raise CorruptBatchError(f"{name} is null; expected its fields", position=0)
    version = Reader(value, name).int16("version")
    if not schema.has_version(version):
        return {"version": version, "raw": bytes(value)}
    return decode(schema, version, value)
