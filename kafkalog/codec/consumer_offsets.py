"""Records of the internal `__consumer_offsets` topic, as the group coordinator writes them (sans-IO),
as typed values for the commands that replay them.

Every record key starts with an int16. Up to Kafka 3.x it is the key's schema version; since KIP-848
it is the coordinator record type, and the old values keep their meaning:

* 0 and 1 -- OffsetCommitKey (one layout);
* 2 -- GroupMetadataKey;
* 3 and above -- records of the new group coordinator (consumer, share and streams groups). They are
  returned as `OtherCoordinatorKey` so that a replay can skip them; `codec/coordinator_records.py`
  decodes every type (what `dump --offsets-decoder` shows).

Every non-null value starts with its int16 schema version: OffsetCommitValue and GroupMetadataValue
v0..v4, v4 flexible. The layouts of keys, values and the consumer protocol's subscription and
assignment are the schemas of `codec/coordinator_records.py`, read and written with
`codec/message.py`. A field a version lacks holds Kafka's default in the typed values here.

A null value is a tombstone: the commit (or the group) was deleted.

Decoding is strict: it accepts what Kafka writes and raises `CorruptBatchError` (or its subclass
`TruncatedDataError` when the bytes end early) for anything else, including bytes left over after
the last field. A value version Kafka does not define raises `UnsupportedFormatError`. Positions in
errors are byte positions inside the key or value that was passed in.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from ..errors import CorruptBatchError, KafkaLogError, UnsupportedFormatError
from .control import ControlType, control_record
from .coordinator_records import CONSUMER_PROTOCOL_SCHEMAS, GROUP_SCHEMAS
from .message import Reader, Schema, encode, read_message

__all__ = [
    "OFFSET_COMMIT_KEY_VERSIONS",
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSIONS",
    "GROUP_METADATA_VALUE_VERSIONS",
    "FLEXIBLE_VALUE_VERSION",
    "OffsetCommitKey",
    "GroupMetadataKey",
    "OtherCoordinatorKey",
    "CoordinatorKey",
    "OffsetCommitValue",
    "MemberMetadata",
    "GroupMetadataValue",
    "CoordinatorRecord",
    "decode_key",
    "decode_offset_commit_value",
    "decode_group_metadata_value",
    "decode_record",
    "committed_offsets",
    "group_metadata",
    "offset_commit_key",
    "offset_commit_value",
    "group_metadata_key",
    "group_metadata_value",
    "consumer_subscription",
    "consumer_assignment",
    "replay_committed_offsets",
]

# The layouts are the group coordinator's schemas in codec/coordinator_records.py. The typed values
# keep a flexible value's tagged fields as raw (tag, bytes) pairs in wire order, the topic id (tag 0
# of OffsetCommitValue v4+) included: so that field is left out of the schema read here.
_OFFSET_COMMIT_KEY = GROUP_SCHEMAS["OffsetCommitKey"]
_GROUP_METADATA_KEY = GROUP_SCHEMAS["GroupMetadataKey"]
_OFFSET_COMMIT_VALUE = GROUP_SCHEMAS["OffsetCommitValue"]._replace(
    fields=tuple(f for f in GROUP_SCHEMAS["OffsetCommitValue"].fields if f.tag is None)
)
_GROUP_METADATA_VALUE = GROUP_SCHEMAS["GroupMetadataValue"]
_SUBSCRIPTION = CONSUMER_PROTOCOL_SCHEMAS["ConsumerProtocolSubscription"]
_ASSIGNMENT = CONSUMER_PROTOCOL_SCHEMAS["ConsumerProtocolAssignment"]


def _span(schema: Schema) -> range:
    return range(schema.versions[0], schema.versions[1] + 1)


OFFSET_COMMIT_KEY_VERSIONS = (0, 1)  # record types 0 and 1: one key schema
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSIONS = _span(_OFFSET_COMMIT_VALUE)
GROUP_METADATA_VALUE_VERSIONS = _span(_GROUP_METADATA_VALUE)
assert _GROUP_METADATA_VALUE.flexible is not None and _GROUP_METADATA_VALUE.flexible == _OFFSET_COMMIT_VALUE.flexible
FLEXIBLE_VALUE_VERSION = _GROUP_METADATA_VALUE.flexible[0]  # 4 in both value schemas

# -- what a decode returns ------------------------------------------------------------------------


class OffsetCommitKey(NamedTuple):
    """The key of a committed offset (key versions 0 and 1 share one layout)."""

    version: int
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    """The key of a classic group's metadata (key version 2)."""

    version: int
    group: str


class OtherCoordinatorKey(NamedTuple):
    """A key of a record type this module does not decode (KIP-848 records and later, type >= 3).

    `data` is the key after its int16 record type. Readers skip such records.
    """

    record_type: int
    data: bytes


CoordinatorKey = OffsetCommitKey | GroupMetadataKey | OtherCoordinatorKey


class OffsetCommitValue(NamedTuple):
    """A committed offset. Fields a version lacks hold Kafka's schema default, -1.

    `tagged_fields` holds the (tag, raw bytes) pairs of a v4 value's tagged-field section (Kafka 4.x
    writes the topic id there, tag 0, which `codec/coordinator_records.py` decodes).
    """

    version: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    tagged_fields: tuple = ()


class MemberMetadata(NamedTuple):
    """One member of a classic group, as stored in GroupMetadataValue.

    `group_instance_id` is None before v3 (static membership). A v0 value has no rebalance
    timeout; as Kafka does when it loads one, `rebalance_timeout` then equals `session_timeout`.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    tagged_fields: tuple = ()


class GroupMetadataValue(NamedTuple):
    """A classic group's state. `current_state_timestamp` is -1 before v2 (Kafka's default)."""

    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple  # of MemberMetadata
    tagged_fields: tuple = ()

    @property
    def member_ids(self) -> tuple:
        return tuple(m.member_id for m in self.members)


class CoordinatorRecord(NamedTuple):
    """A decoded `__consumer_offsets` record.

    `value` is None for a tombstone, an OffsetCommitValue or GroupMetadataValue for those keys,
    and the undecoded value bytes for an `OtherCoordinatorKey`.
    """

    key: CoordinatorKey
    value: OffsetCommitValue | GroupMetadataValue | bytes | None


# -- reading ------------------------------------------------------------------------------------


def _require(data, what: str) -> None:
    if data is None:
        raise CorruptBatchError(f"{what} is null; expected bytes", position=0)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _tagged(fields: dict) -> tuple:
    """A struct's tagged fields as (tag, raw bytes) in wire order: the schemas read here declare
    none, so the decoder keeps each one raw."""
    unknown = fields.get("_unknownTaggedFields")
    return () if unknown is None else tuple((field["tag"], field["data"]) for field in unknown)


# -- keys -----------------------------------------------------------------------------------------


def decode_key(key: bytes | bytearray | memoryview) -> CoordinatorKey:
    """Decode a `__consumer_offsets` record key.

    Returns an OffsetCommitKey (versions 0 and 1), a GroupMetadataKey (version 2) or an
    OtherCoordinatorKey (record types 3 and above). A null key, a negative version or a truncated or
    garbled key raises CorruptBatchError (TruncatedDataError when the bytes end early).
    """
    _require(key, "__consumer_offsets record key")
    reader = Reader(key, "__consumer_offsets key")
    version = reader.int16("key version")
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        reader.what = f"offset commit key v{version}"
        fields = read_message(reader, _OFFSET_COMMIT_KEY, 0)
        reader.finish()
        return OffsetCommitKey(version, fields["group"], fields["topic"], fields["partition"])
    if version == GROUP_METADATA_KEY_VERSION:
        reader.what = f"group metadata key v{version}"
        fields = read_message(reader, _GROUP_METADATA_KEY, 0)
        reader.finish()
        return GroupMetadataKey(version, fields["group"])
    if version < 0:
        raise CorruptBatchError(
            f"__consumer_offsets key has version/record type {version}; expected 0 or more", position=0
        )
    return OtherCoordinatorKey(version, bytes(key[2:]))


# -- values ---------------------------------------------------------------------------------------


def _value_fields(value, name: str, schema: Schema, versions: range) -> tuple[int, dict]:
    """(version, fields) of a value of `schema` (`versions`) behind its int16 version."""
    reader = Reader(value, name)
    version = reader.int16("value version")
    if version not in versions:
        error = CorruptBatchError if version < 0 else UnsupportedFormatError
        raise error(f"{name} has version {version}; expected {versions.start}..{versions.stop - 1}", position=0)
    reader.what = f"{name} v{version}"
    fields = read_message(reader, schema, version)
    reader.finish()
    return version, fields


def decode_offset_commit_value(value: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """Decode an OffsetCommitValue (versions 0..4); None (a tombstone) decodes to None."""
    if value is None:
        return None
    _require(value, "offset commit value")
    version, f = _value_fields(value, "offset commit value", _OFFSET_COMMIT_VALUE, OFFSET_COMMIT_VALUE_VERSIONS)
    return OffsetCommitValue(
        version,
        f["offset"],
        f.get("leaderEpoch", -1),
        f["metadata"],
        f["commitTimestamp"],
        f.get("expireTimestamp", -1),
        _tagged(f),
    )


def _member(m: dict) -> MemberMetadata:
    return MemberMetadata(
        m["memberId"],
        m.get("groupInstanceId"),
        m["clientId"],
        m["clientHost"],
        m.get("rebalanceTimeout", m["sessionTimeout"]),  # v0 has none: Kafka takes the session timeout
        m["sessionTimeout"],
        m["subscription"],
        m["assignment"],
        _tagged(m),
    )


def decode_group_metadata_value(value: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """Decode a GroupMetadataValue (versions 0..4); None (a tombstone) decodes to None."""
    if value is None:
        return None
    _require(value, "group metadata value")
    version, f = _value_fields(value, "group metadata value", _GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_VERSIONS)
    return GroupMetadataValue(
        version,
        f["protocolType"],
        f["generation"],
        f["protocol"],
        f["leader"],
        f.get("currentStateTimestamp", -1),
        tuple(_member(m) for m in f["members"]),
        _tagged(f),
    )


# -- records and replay ---------------------------------------------------------------------------


def decode_record(key, value) -> CoordinatorRecord:
    """Decode one `__consumer_offsets` record's key and, according to the key, its value."""
    decoded_key = decode_key(key)
    if isinstance(decoded_key, OffsetCommitKey):
        return CoordinatorRecord(decoded_key, decode_offset_commit_value(value))
    if isinstance(decoded_key, GroupMetadataKey):
        return CoordinatorRecord(decoded_key, decode_group_metadata_value(value))
    return CoordinatorRecord(decoded_key, None if value is None else bytes(value))


def _replay(records: Iterable) -> Iterator[CoordinatorRecord]:
    """Decode each (key, value) pair or object with `key` and `value`; errors name its `offset`."""
    for item in records:
        if hasattr(item, "key") and hasattr(item, "value"):
            key, value, record_offset = item.key, item.value, getattr(item, "offset", None)
        else:
            key, value = item
            record_offset = None
        try:
            yield decode_record(key, value)
        except KafkaLogError as exc:
            if record_offset is not None and exc.offset is None:
                exc.offset = record_offset
            raise


def committed_offsets(records: Iterable) -> dict[tuple[str, str, int], OffsetCommitValue]:
    """Replay `__consumer_offsets` records in log order into the latest commit per (group, topic, partition).

    Each item is a (key, value) pair, or any object with `key` and `value` attributes (such as a
    decoded record; if it also has an `offset`, errors name it). An offset commit replaces the
    previous one for its key and a tombstone removes it, as the group coordinator does when it loads
    a partition. Offset commit keys v0 and v1 for the same group, topic and partition are one entry.
    Group metadata records are decoded (so corruption is reported) but do not change offsets: Kafka
    deletes a group's offsets with their own tombstones. Records of other types are skipped.

    Pass only records that count: drop control batches and the batches of aborted transactions
    first, as the coordinator only applies transactional commits once their transaction commits.
    """
    offsets: dict[tuple[str, str, int], OffsetCommitValue] = {}
    for record in _replay(records):
        if isinstance(record.key, OffsetCommitKey):
            entry = (record.key.group, record.key.topic, record.key.partition)
            if record.value is None:
                offsets.pop(entry, None)
            else:
                assert isinstance(record.value, OffsetCommitValue)  # decode_record decodes it for this key
                offsets[entry] = record.value
    return offsets


def group_metadata(records: Iterable) -> dict[str, GroupMetadataValue]:
    """Replay `__consumer_offsets` records in log order into the latest metadata per classic group.

    Takes the same items as `committed_offsets`. A group metadata tombstone removes its group;
    offset commits are decoded (so corruption is reported) but do not change the result.
    """
    groups: dict[str, GroupMetadataValue] = {}
    for record in _replay(records):
        if isinstance(record.key, GroupMetadataKey):
            if record.value is None:
                groups.pop(record.key.group, None)
            else:
                assert isinstance(record.value, GroupMetadataValue)  # decode_record decodes it for this key
                groups[record.key.group] = record.value
    return groups


# -- encoders: what the group coordinator writes (the synthetic broker uses them) --------------------


def _versioned(version: int, schema: Schema, schema_version: int, values: dict) -> bytes:
    """An int16 version (or record type) and then the message `values` as `schema` at `schema_version`."""
    return struct.pack(">h", version) + encode(schema, schema_version, values)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1: group, topic, partition."""
    return _versioned(1, _OFFSET_COMMIT_KEY, 0, {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    """OffsetCommitValue v3: offset, leaderEpoch, metadata, commitTimestamp (no expire timestamp)."""
    fields = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": commit_timestamp}
    return _versioned(3, _OFFSET_COMMIT_VALUE, 3, fields)


def group_metadata_key(group: str) -> bytes:
    """GroupMetadataKey (key version 2): group."""
    return _versioned(GROUP_METADATA_KEY_VERSION, _GROUP_METADATA_KEY, 0, {"group": group})


def group_metadata_value(
    *,
    generation: int,
    protocol: str,
    leader: str,
    state_timestamp: int,
    members: Sequence[tuple[str, str, str, bytes, bytes]],
) -> bytes:
    """GroupMetadataValue v3 of a consumer group; members are (member id, client id, client host,
    subscription, assignment), without group instance ids."""
    fields = {
        "protocolType": "consumer",
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "currentStateTimestamp": state_timestamp,
        "members": [
            {
                "memberId": member_id,
                "groupInstanceId": None,
                "clientId": client_id,
                "clientHost": host,
                "rebalanceTimeout": 300_000,  # the consumer's defaults
                "sessionTimeout": 45_000,
                "subscription": subscription,
                "assignment": assignment,
            }
            for member_id, client_id, host, subscription, assignment in members
        ],
    }
    return _versioned(3, _GROUP_METADATA_VALUE, 3, fields)


def consumer_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: topics, no user data."""
    return _versioned(0, _SUBSCRIPTION, 0, {"topics": list(topics), "userData": None})


def consumer_assignment(partitions: Sequence[tuple[str, int]]) -> bytes:
    """ConsumerProtocolAssignment v0: partitions by topic, no user data."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    assigned = [{"topic": topic, "partitions": numbers} for topic, numbers in by_topic.items()]
    return _versioned(0, _ASSIGNMENT, 0, {"assignedPartitions": assigned, "userData": None})


# -- a whole partition, as the group coordinator loads it -------------------------------------------


def replay_committed_offsets(batches: Iterable) -> dict[tuple[str, str, int], OffsetCommitValue]:
    """The live commits of one `__consumer_offsets` partition, given as its (file, batch) pairs in log
    order (`Partition.batches()`), as the group coordinator loads it: control batches never count; a
    transactional commit counts once the next marker of its producer is a COMMIT (an ABORT, or no
    marker yet, drops it); the latest commit per (group, topic, partition) in log order wins, and a
    tombstone removes it. Other record types
    (group metadata, KIP-848 records) are skipped. Errors name the segment file and the offset."""
    latest: dict = {}  # key -> (log offset, value): a commit replaces only an older one, as the
    pending: dict[int, list] = {}  # coordinator's loader does when a transaction's commits land late
    keys: dict = {}  # raw key -> (group, topic, partition) or None: a partition repeats its keys

    def apply(commits):
        for key, log_offset, value in commits:
            if key not in latest or latest[key][0] < log_offset:
                latest[key] = (log_offset, value)

    for file, batch in batches:
        try:
            if batch.is_control:
                marker = control_record(batch)
                if marker is not None:  # an emptied control batch completes nothing
                    done = pending.pop(batch.producer_id, [])
                    if marker.type == ControlType.COMMIT:
                        apply(done)
                continue
            commits = _offset_commits(batch, keys)
        except KafkaLogError as err:
            raise err.located(file=file) from None
        if batch.is_transactional:
            pending.setdefault(batch.producer_id, []).extend(commits)
        else:
            apply(commits)
    return {key: value for key, (_, value) in latest.items() if value is not None}


_UNSEEN = object()


def _offset_commits(batch, keys: dict) -> list:
    """(key, log offset, value or None for a tombstone) of the batch's offset commits; `keys` holds
    the keys decoded so far (a key's bytes decode alike every time)."""
    out = []
    for record in batch.records():
        raw = record.key
        if raw is None:
            continue
        try:
            key = keys.get(raw, _UNSEEN)
            if key is _UNSEEN:
                decoded = decode_key(raw)
                key = keys[raw] = (
                    (decoded.group, decoded.topic, decoded.partition) if isinstance(decoded, OffsetCommitKey) else None
                )
            if key is not None:
                out.append((key, record.offset, decode_offset_commit_value(record.value)))
        except KafkaLogError as err:
            raise err.located(offset=record.offset) from None
    return out
