"""Records of the internal `__consumer_offsets` topic, as the group coordinator writes them (sans-IO).

Every record key starts with an int16. Up to Kafka 3.x it is the key's schema version; since KIP-848
it is the coordinator record type, and the old values keep their meaning:

* 0 and 1 -- OffsetCommitKey: group (string), topic (string), partition (int32);
* 2 -- GroupMetadataKey: group (string);
* 3 and above -- records of the new group coordinator (consumer, share and streams groups). They are
  returned as `OtherCoordinatorKey` so that a replay can skip them; `codec/coordinator_records.py`
  decodes every type (what `dump --offsets-decoder` shows).

Every non-null value starts with its int16 schema version:

* OffsetCommitValue v0..v4: offset int64, leaderEpoch int32 (v3+), metadata string,
  commitTimestamp int64, expireTimestamp int64 (v1 only). v4 is flexible: compact strings and a
  tagged-field section at the end.
* GroupMetadataValue v0..v4: protocolType string, generation int32, protocol nullable string,
  leader nullable string, currentStateTimestamp int64 (v2+), then the members array; each member
  has memberId, groupInstanceId (nullable, v3+), clientId, clientHost, rebalanceTimeout int32
  (v1+), sessionTimeout int32, subscription bytes and assignment bytes. v4 is flexible: compact
  strings, arrays and bytes, and a tagged-field section after each member and at the end.

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
from .message import Reader as _Reader

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

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
GROUP_METADATA_VALUE_VERSIONS = range(0, 5)
FLEXIBLE_VALUE_VERSION = 4  # both value schemas: "flexibleVersions": "4+"

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


# -- reading: the message-schema primitives of codec/message.py --------------------------------------


def _require(data, what: str) -> None:
    if data is None:
        raise CorruptBatchError(f"{what} is null; expected bytes", position=0)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")


# -- keys -----------------------------------------------------------------------------------------


def decode_key(key: bytes | bytearray | memoryview) -> CoordinatorKey:
    """Decode a `__consumer_offsets` record key.

    Returns an OffsetCommitKey (versions 0 and 1), a GroupMetadataKey (version 2) or an
    OtherCoordinatorKey (record types 3 and above). A null key, a negative version or a truncated or
    garbled key raises CorruptBatchError (TruncatedDataError when the bytes end early).
    """
    _require(key, "__consumer_offsets record key")
    reader = _Reader(key, "__consumer_offsets key")
    version = reader.int16("key version")
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        reader.what = f"offset commit key v{version}"
        group = reader.string("group", False)
        topic = reader.string("topic", False)
        partition = reader.int32("partition")
        reader.finish()
        return OffsetCommitKey(version, group, topic, partition)
    if version == GROUP_METADATA_KEY_VERSION:
        reader.what = f"group metadata key v{version}"
        group = reader.string("group", False)
        reader.finish()
        return GroupMetadataKey(version, group)
    if version < 0:
        raise CorruptBatchError(
            f"__consumer_offsets key has version/record type {version}; expected 0 or more", position=0
        )
    return OtherCoordinatorKey(version, bytes(key[2:]))


# -- values ---------------------------------------------------------------------------------------


def _value_version(value, name: str, versions: range) -> tuple[_Reader, int]:
    reader = _Reader(value, name)
    version = reader.int16("value version")
    if version < 0:
        raise CorruptBatchError(
            f"{name} has version {version}; expected {versions.start}..{versions.stop - 1}", position=0
        )
    if version not in versions:
        raise UnsupportedFormatError(
            f"{name} has version {version}; expected {versions.start}..{versions.stop - 1}", position=0
        )
    reader.what = f"{name} v{version}"
    return reader, version


def decode_offset_commit_value(value: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """Decode an OffsetCommitValue (versions 0..4); None (a tombstone) decodes to None."""
    if value is None:
        return None
    _require(value, "offset commit value")
    reader, version = _value_version(value, "offset commit value", OFFSET_COMMIT_VALUE_VERSIONS)
    flexible = version >= FLEXIBLE_VALUE_VERSION
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leaderEpoch") if version >= 3 else -1
    metadata = reader.string("metadata", flexible)
    commit_timestamp = reader.int64("commitTimestamp")
    expire_timestamp = reader.int64("expireTimestamp") if version == 1 else -1
    tagged = reader.tagged_fields() if flexible else ()
    reader.finish()
    return OffsetCommitValue(version, offset, leader_epoch, metadata, commit_timestamp, expire_timestamp, tagged)


def _decode_member(reader: _Reader, version: int, index: int) -> MemberMetadata:
    flexible = version >= FLEXIBLE_VALUE_VERSION
    p = f"members[{index}]."
    member_id = reader.string(p + "memberId", flexible)
    group_instance_id = reader.string(p + "groupInstanceId", flexible, nullable=True) if version >= 3 else None
    client_id = reader.string(p + "clientId", flexible)
    client_host = reader.string(p + "clientHost", flexible)
    rebalance_timeout = reader.int32(p + "rebalanceTimeout") if version >= 1 else None
    session_timeout = reader.int32(p + "sessionTimeout")
    if rebalance_timeout is None:
        rebalance_timeout = session_timeout
    subscription = reader.bytes_(p + "subscription", flexible)
    assignment = reader.bytes_(p + "assignment", flexible)
    tagged = reader.tagged_fields(p + "tagged fields") if flexible else ()
    return MemberMetadata(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
        tagged,
    )


def decode_group_metadata_value(value: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """Decode a GroupMetadataValue (versions 0..4); None (a tombstone) decodes to None."""
    if value is None:
        return None
    _require(value, "group metadata value")
    reader, version = _value_version(value, "group metadata value", GROUP_METADATA_VALUE_VERSIONS)
    flexible = version >= FLEXIBLE_VALUE_VERSION
    protocol_type = reader.string("protocolType", flexible)
    generation = reader.int32("generation")
    protocol = reader.string("protocol", flexible, nullable=True)
    leader = reader.string("leader", flexible, nullable=True)
    current_state_timestamp = reader.int64("currentStateTimestamp") if version >= 2 else -1
    count = reader.array_length("members", flexible)
    members = tuple(_decode_member(reader, version, i) for i in range(count))
    tagged = reader.tagged_fields() if flexible else ()
    reader.finish()
    return GroupMetadataValue(
        version, protocol_type, generation, protocol, leader, current_state_timestamp, members, tagged
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


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _bytes(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1: group, topic, partition."""
    return struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    """OffsetCommitValue v3: offset, leaderEpoch, metadata, commitTimestamp (no expire timestamp)."""
    return struct.pack(">hqi", 3, offset, leader_epoch) + _string(metadata) + struct.pack(">q", commit_timestamp)


def group_metadata_key(group: str) -> bytes:
    """GroupMetadataKey (key version 2): group."""
    return struct.pack(">h", 2) + _string(group)


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
    out = bytearray(struct.pack(">h", 3) + _string("consumer") + struct.pack(">i", generation))
    out += _string(protocol) + _string(leader) + struct.pack(">qi", state_timestamp, len(members))
    for member_id, client_id, host, subscription, assignment in members:
        out += _string(member_id) + _string(None) + _string(client_id) + _string(host)
        out += struct.pack(">ii", 300_000, 45_000)  # rebalance and session timeouts (the consumer's defaults)
        out += _bytes(subscription) + _bytes(assignment)
    return bytes(out)


def consumer_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: topics, no user data."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + _bytes(None)


def consumer_assignment(partitions: Sequence[tuple[str, int]]) -> bytes:
    """ConsumerProtocolAssignment v0: partitions by topic, no user data."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(struct.pack(">hi", 0, len(by_topic)))
    for topic, numbers in by_topic.items():
        out += _string(topic) + struct.pack(">i", len(numbers)) + b"".join(struct.pack(">i", n) for n in numbers)
    return bytes(out + _bytes(None))


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
            commits = _offset_commits(batch)
        except KafkaLogError as err:
            raise err.located(file=file) from None
        if batch.is_transactional:
            pending.setdefault(batch.producer_id, []).extend(commits)
        else:
            apply(commits)
    return {key: value for key, (_, value) in latest.items() if value is not None}


def _offset_commits(batch) -> list:
    """(key, log offset, value or None for a tombstone) of the batch's offset commits."""
    out = []
    for record in batch.records():
        if record.key is None:
            continue
        try:
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey):
                out.append(
                    ((key.group, key.topic, key.partition), record.offset, decode_offset_commit_value(record.value))
                )
        except KafkaLogError as err:
            raise err.located(offset=record.offset) from None
    return out
