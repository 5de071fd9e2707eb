"""The `__consumer_offsets` record decoder: synthetic bytes for every version, replay, garbage, real data."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import NamedTuple

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.consumer_offsets import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    OtherCoordinatorKey,
    committed_offsets,
    consumer_assignment,
    consumer_subscription,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    group_metadata,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    replay_committed_offsets,
)
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptBatchError, KafkaLogError, TruncatedDataError, UnsupportedFormatError

# -- encoders written from the schemas, independently of the decoder ------------------------------


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s(text: str | None) -> bytes:
    """A classic (int16-length) string; None is -1."""
    if text is None:
        return i16(-1)
    raw = text.encode()
    return i16(len(raw)) + raw


def cs(text: str | None) -> bytes:
    """A compact string: unsigned varint length+1; None is 0."""
    if text is None:
        return uv(0)
    raw = text.encode()
    return uv(len(raw) + 1) + raw


def b32(data: bytes) -> bytes:
    return i32(len(data)) + data


def cb(data: bytes) -> bytes:
    return uv(len(data) + 1) + data


def tagged(*fields: tuple[int, bytes]) -> bytes:
    return uv(len(fields)) + b"".join(uv(tag) + uv(len(data)) + data for tag, data in fields)


def offset_key(version: int, group: str, topic: str, partition: int) -> bytes:
    return i16(version) + s(group) + s(topic) + i32(partition)


def group_key(group: str) -> bytes:
    return i16(2) + s(group)


def offset_value(
    version: int,
    offset: int,
    metadata: str,
    commit_ts: int,
    *,
    leader_epoch: int = -1,
    expire_ts: int = -1,
    tags: bytes = b"\x00",
) -> bytes:
    if version == 0:
        return i16(0) + i64(offset) + s(metadata) + i64(commit_ts)
    if version == 1:
        return i16(1) + i64(offset) + s(metadata) + i64(commit_ts) + i64(expire_ts)
    if version == 2:
        return i16(2) + i64(offset) + s(metadata) + i64(commit_ts)
    if version == 3:
        return i16(3) + i64(offset) + i32(leader_epoch) + s(metadata) + i64(commit_ts)
    assert version == 4
    return i16(4) + i64(offset) + i32(leader_epoch) + cs(metadata) + i64(commit_ts) + tags


class M(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    rebalance: int
    session: int
    subscription: bytes
    assignment: bytes


def member(version: int, m: M, tags: bytes = b"\x00") -> bytes:
    flex = version >= 4
    st = cs if flex else s
    by = cb if flex else b32
    out = st(m.member_id)
    if version >= 3:
        out += st(m.instance_id)
    out += st(m.client_id) + st(m.host)
    if version >= 1:
        out += i32(m.rebalance)
    out += i32(m.session) + by(m.subscription) + by(m.assignment)
    return out + (tags if flex else b"")


def group_value(
    version: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_ts: int,
    members: list[M],
    *,
    tags: bytes = b"\x00",
    member_tags: bytes = b"\x00",
) -> bytes:
    flex = version >= 4
    st = cs if flex else s
    out = i16(version) + st(protocol_type) + i32(generation) + st(protocol) + st(leader)
    if version >= 2:
        out += i64(state_ts)
    out += uv(len(members) + 1) if flex else i32(len(members))
    out += b"".join(member(version, m, member_tags) for m in members)
    return out + (tags if flex else b"")


ALICE = M("alice-1", "static-a", "client-a", "/10.0.0.1", 60000, 10000, b"\x00\x01sub", b"\x00\x01asg")
BOB = M("bob-2", None, "client-b", "/10.0.0.2", 45000, 30000, b"", b"\x00\x00")

# -- keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_key_versions_0_and_1(version):
    key = offset_key(version, "my-group", "orders", 7)
    assert decode_key(key) == OffsetCommitKey(version, "my-group", "orders", 7)


def test_offset_commit_key_non_ascii_and_empty_group():
    assert decode_key(offset_key(1, "", "tópico-ü", 0)) == OffsetCommitKey(1, "", "tópico-ü", 0)


def test_group_metadata_key_version_2():
    assert decode_key(group_key("my-group")) == GroupMetadataKey(2, "my-group")


@pytest.mark.parametrize("record_type", [3, 4, 5, 8, 11, 16, 17, 99, 32767])
def test_newer_record_types_are_other_coordinator_keys(record_type):
    # A KIP-848 ConsumerGroupMetadataKey is type 3 with a body of (version 0) group string; the body
    # is kept, undecoded, so a reader can skip or pass it on.
    key = i16(record_type) + s("cg")
    assert decode_key(key) == OtherCoordinatorKey(record_type, s("cg"))
    record = decode_record(key, b"\x00\x00anything")
    assert record == CoordinatorRecord(OtherCoordinatorKey(record_type, s("cg")), b"\x00\x00anything")
    assert decode_record(key, None).value is None


def test_keys_accept_bytearray_and_memoryview():
    key = offset_key(1, "g", "t", 3)
    assert decode_key(bytearray(key)) == decode_key(memoryview(key)) == OffsetCommitKey(1, "g", "t", 3)


# -- offset commit values -------------------------------------------------------------------------


def test_offset_commit_value_v0():
    assert decode_offset_commit_value(offset_value(0, 42, "meta", 1_600_000_000_000)) == OffsetCommitValue(
        0, 42, -1, "meta", 1_600_000_000_000, -1, ()
    )


def test_offset_commit_value_v1_has_expire_timestamp():
    value = offset_value(1, 42, "", 1_600_000_000_000, expire_ts=1_600_086_400_000)
    assert decode_offset_commit_value(value) == OffsetCommitValue(
        1, 42, -1, "", 1_600_000_000_000, 1_600_086_400_000, ()
    )


def test_offset_commit_value_v2_drops_expire_timestamp():
    assert decode_offset_commit_value(offset_value(2, 2**40, "x", 5)) == OffsetCommitValue(2, 2**40, -1, "x", 5, -1, ())


def test_offset_commit_value_v3_has_leader_epoch():
    assert decode_offset_commit_value(offset_value(3, 9, "", 7, leader_epoch=12)) == OffsetCommitValue(
        3, 9, 12, "", 7, -1, ()
    )


def test_offset_commit_value_v4_is_flexible():
    value = offset_value(4, 1234, "métadonnées", 99, leader_epoch=3)
    # compact string: varint(len+1), and an empty tagged-field section at the end
    assert value.endswith(i64(99) + b"\x00")
    assert decode_offset_commit_value(value) == OffsetCommitValue(4, 1234, 3, "métadonnées", 99, -1, ())


def test_offset_commit_value_v4_keeps_unknown_tagged_fields():
    value = offset_value(4, 5, "m", 6, tags=tagged((0, b"\x01\x02"), (300, b"")))
    assert decode_offset_commit_value(value).tagged_fields == ((0, b"\x01\x02"), (300, b""))


def test_offset_commit_value_v4_long_metadata_uses_multibyte_varint():
    metadata = "m" * 200  # length+1 = 201 needs a 2-byte varint
    assert decode_offset_commit_value(offset_value(4, 1, metadata, 2)).metadata == metadata


def test_offset_commit_value_negative_offset_is_kept():
    assert decode_offset_commit_value(offset_value(3, -1, "", 0)).offset == -1


# -- group metadata values ------------------------------------------------------------------------


def test_group_metadata_value_v0_rebalance_timeout_is_session_timeout():
    value = group_value(0, "consumer", 5, "range", "alice-1", -1, [ALICE, BOB])
    decoded = decode_group_metadata_value(value)
    assert decoded == GroupMetadataValue(
        0,
        "consumer",
        5,
        "range",
        "alice-1",
        -1,
        (
            MemberMetadata("alice-1", None, "client-a", "/10.0.0.1", 10000, 10000, b"\x00\x01sub", b"\x00\x01asg"),
            MemberMetadata("bob-2", None, "client-b", "/10.0.0.2", 30000, 30000, b"", b"\x00\x00"),
        ),
        (),
    )
    assert decoded.member_ids == ("alice-1", "bob-2")


def test_group_metadata_value_v1_has_rebalance_timeout():
    decoded = decode_group_metadata_value(group_value(1, "consumer", 5, "range", "alice-1", -1, [ALICE, BOB]))
    assert [(m.rebalance_timeout, m.session_timeout) for m in decoded.members] == [(60000, 10000), (45000, 30000)]
    assert decoded.current_state_timestamp == -1
    assert all(m.group_instance_id is None for m in decoded.members)


def test_group_metadata_value_v2_has_current_state_timestamp():
    decoded = decode_group_metadata_value(group_value(2, "connect", 73, "default", "bob-2", 1_558_995_867_705, [BOB]))
    assert decoded == GroupMetadataValue(
        2,
        "connect",
        73,
        "default",
        "bob-2",
        1_558_995_867_705,
        (MemberMetadata("bob-2", None, "client-b", "/10.0.0.2", 45000, 30000, b"", b"\x00\x00"),),
        (),
    )


def test_group_metadata_value_v3_has_group_instance_id():
    decoded = decode_group_metadata_value(group_value(3, "consumer", 2, "sticky", "alice-1", 77, [ALICE, BOB]))
    assert [m.group_instance_id for m in decoded.members] == ["static-a", None]
    assert decoded.members[0] == MemberMetadata(
        "alice-1", "static-a", "client-a", "/10.0.0.1", 60000, 10000, b"\x00\x01sub", b"\x00\x01asg"
    )


def test_group_metadata_value_v4_is_flexible():
    value = group_value(
        4,
        "consumer",
        8,
        "cooperative-sticky",
        "alice-1",
        1234,
        [ALICE, BOB],
        tags=tagged((7, b"x")),
        member_tags=tagged((1, b"\xff")),
    )
    decoded = decode_group_metadata_value(value)
    assert (
        decoded.version,
        decoded.protocol_type,
        decoded.generation,
        decoded.protocol,
        decoded.leader,
        decoded.current_state_timestamp,
    ) == (4, "consumer", 8, "cooperative-sticky", "alice-1", 1234)
    assert decoded.members == (
        MemberMetadata(
            "alice-1",
            "static-a",
            "client-a",
            "/10.0.0.1",
            60000,
            10000,
            b"\x00\x01sub",
            b"\x00\x01asg",
            ((1, b"\xff"),),
        ),
        MemberMetadata("bob-2", None, "client-b", "/10.0.0.2", 45000, 30000, b"", b"\x00\x00", ((1, b"\xff"),)),
    )
    assert decoded.tagged_fields == ((7, b"x"),)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_empty_group_has_null_protocol_and_leader(version):
    # What the coordinator writes once every member has left: generation bumped, no protocol.
    decoded = decode_group_metadata_value(group_value(version, "consumer", 3, None, None, 10, []))
    assert (decoded.protocol, decoded.leader, decoded.members) == (None, None, ())
    assert decoded.generation == 3 and decoded.protocol_type == "consumer"


def test_group_metadata_value_empty_protocol_type():
    # A group created by a bare offset commit or an admin client has protocolType "".
    assert decode_group_metadata_value(group_value(2, "", 0, None, None, 1, [])).protocol_type == ""


# -- tombstones and records -----------------------------------------------------------------------


def test_null_values_are_tombstones():
    assert decode_offset_commit_value(None) is None
    assert decode_group_metadata_value(None) is None
    assert decode_record(offset_key(1, "g", "t", 0), None) == CoordinatorRecord(OffsetCommitKey(1, "g", "t", 0), None)
    assert decode_record(group_key("g"), None) == CoordinatorRecord(GroupMetadataKey(2, "g"), None)


def test_decode_record_dispatches_on_the_key():
    record = decode_record(offset_key(0, "g", "t", 1), offset_value(3, 10, "", 5))
    assert record.value == OffsetCommitValue(3, 10, -1, "", 5, -1, ())
    record = decode_record(group_key("g"), group_value(3, "consumer", 1, "range", "alice-1", 2, [ALICE]))
    assert record.value.member_ids == ("alice-1",)


# -- replay ---------------------------------------------------------------------------------------


def test_committed_offsets_keeps_the_latest_commit_and_applies_tombstones():
    records = [
        (group_key("g1"), group_value(3, "consumer", 1, "range", "alice-1", 1, [ALICE])),
        (offset_key(1, "g1", "t", 0), offset_value(3, 10, "", 100)),
        (offset_key(1, "g1", "t", 1), offset_value(3, 20, "", 100)),
        (offset_key(1, "g2", "t", 0), offset_value(1, 5, "old", 50, expire_ts=60)),
        (offset_key(1, "g1", "t", 0), offset_value(3, 15, "", 200)),  # replaces offset 10
        (offset_key(1, "g1", "t", 1), None),  # deletes t-1
        (offset_key(0, "g2", "t", 0), offset_value(0, 6, "", 70)),  # v0 key, same entry as v1
        (i16(3) + s("g1"), b"\x00\x00opaque"),  # KIP-848 record: skipped
        (group_key("g1"), None),  # group tombstone: offsets stay
        (offset_key(1, "g3", "u", 2), offset_value(4, 1, "", 1)),
        (offset_key(1, "g3", "u", 2), None),
        (offset_key(1, "g3", "u", 2), offset_value(4, 2, "again", 3)),  # commit after a tombstone
        (offset_key(1, "g4", "v", 0), None),  # tombstone of nothing
    ]
    assert committed_offsets(records) == {
        ("g1", "t", 0): OffsetCommitValue(3, 15, -1, "", 200, -1, ()),
        ("g2", "t", 0): OffsetCommitValue(0, 6, -1, "", 70, -1, ()),
        ("g3", "u", 2): OffsetCommitValue(4, 2, -1, "again", 3, -1, ()),
    }
    assert list(group_metadata(records)) == []
    assert committed_offsets([]) == {} and group_metadata([]) == {}


def test_group_metadata_keeps_the_latest_state_per_group():
    records = [
        (group_key("g1"), group_value(2, "consumer", 1, "range", "alice-1", 1, [ALICE])),
        (group_key("g2"), group_value(2, "connect", 4, "default", "bob-2", 1, [BOB])),
        (group_key("g1"), group_value(2, "consumer", 2, None, None, 2, [])),
        (group_key("g2"), None),
        (offset_key(1, "g1", "t", 0), offset_value(3, 1, "", 1)),
    ]
    assert group_metadata(records) == {"g1": GroupMetadataValue(2, "consumer", 2, None, None, 2, (), ())}


class _Rec(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


def test_replay_accepts_record_objects_and_names_the_failing_offset():
    good = _Rec(40, 0, offset_key(1, "g", "t", 0), offset_value(3, 1, "", 1))
    assert committed_offsets([good]) == {("g", "t", 0): OffsetCommitValue(3, 1, -1, "", 1, -1, ())}
    bad = _Rec(41, 0, offset_key(1, "g", "t", 0), offset_value(3, 1, "", 1)[:-1])
    with pytest.raises(TruncatedDataError) as info:
        committed_offsets([good, bad])
    assert info.value.offset == 41
    assert "offset 41" in str(info.value)


def test_replay_reports_corrupt_group_metadata():
    with pytest.raises(CorruptBatchError):
        committed_offsets([(group_key("g"), i16(2) + s(None))])


# -- encoders -------------------------------------------------------------------------------------


def test_encoders_write_what_the_group_coordinator_writes():
    assert offset_commit_key("g", "tópico", 7) == offset_key(1, "g", "tópico", 7)
    assert offset_commit_value(42, 5, "m", 1_700_000_000_000) == offset_value(
        3, 42, "m", 1_700_000_000_000, leader_epoch=5
    )
    assert group_metadata_key("g") == group_key("g")
    members = [("alice-1", "client-a", "/10.0.0.1", b"sub", b""), ("bob-2", "client-b", "/10.0.0.2", b"", b"asg")]
    assert group_metadata_value(
        generation=3, protocol="range", leader="alice-1", state_timestamp=9, members=members
    ) == group_value(
        3,
        "consumer",
        3,
        "range",
        "alice-1",
        9,
        [M(m, None, c, h, 300_000, 45_000, sub, asg) for m, c, h, sub, asg in members],
    )
    # ConsumerProtocolSubscription v0 and ConsumerProtocolAssignment v0, user data null
    assert consumer_subscription(["a", "b"]) == i16(0) + i32(2) + s("a") + s("b") + i32(-1)
    assert consumer_assignment([("a", 0), ("b", 3), ("a", 2)]) == (
        i16(0) + i32(2) + s("a") + i32(2) + i32(0) + i32(2) + s("b") + i32(1) + i32(3) + i32(-1)
    )


# -- a whole partition ----------------------------------------------------------------------------


def _partition(*batches: bytes) -> list:
    return [("00000000000000000000.log", batch) for batch in iter_batches(b"".join(batches))]


def _commits(offset: int, *records, **kwargs) -> bytes:
    return build_batch([Record(offset + i, 0, k, v) for i, (k, v) in enumerate(records)], base_offset=offset, **kwargs)


def test_replay_committed_offsets_keeps_the_last_commit_of_each_key_across_batches():
    key = offset_key(1, "g", "t", 0)
    partition = _partition(
        _commits(0, (key, offset_value(3, 10, "", 1)), (offset_key(0, "g", "t", 1), offset_value(1, 5, "", 1))),
        _commits(2, (group_key("g"), group_value(3, "consumer", 1, "range", "alice-1", 1, [ALICE]))),
        _commits(3, (key, offset_value(4, 11, "", 2)), (offset_key(1, "g", "t", 1), None)),
        _commits(5, (key, offset_value(3, 12, "x", 3)), (i16(3) + s("cg"), b"\x00\x00opaque")),
    )
    assert replay_committed_offsets(partition) == {("g", "t", 0): OffsetCommitValue(3, 12, -1, "x", 3, -1, ())}


def test_replay_committed_offsets_names_the_file_and_offset_of_a_bad_value_under_a_known_key():
    key = offset_key(1, "g", "t", 0)
    partition = _partition(
        _commits(0, (key, offset_value(3, 10, "", 1))), _commits(1, (key, offset_value(3, 11, "", 2)[:-1]))
    )
    with pytest.raises(TruncatedDataError) as info:
        replay_committed_offsets(partition)
    assert (info.value.file, info.value.offset) == ("00000000000000000000.log", 1)
    assert "offset commit value v3: commitTimestamp" in str(info.value)


# -- bad input ------------------------------------------------------------------------------------

VALID_KEYS = [offset_key(0, "grp", "topic", 1), offset_key(1, "grp", "tópico", 2), group_key("grp")]
VALID_OFFSET_VALUES = [
    offset_value(0, 1, "md", 2),
    offset_value(1, 1, "md", 2, expire_ts=3),
    offset_value(2, 1, "md", 2),
    offset_value(3, 1, "md", 2, leader_epoch=4),
    offset_value(4, 1, "md", 2, leader_epoch=4, tags=tagged((2, b"ab"))),
]
VALID_GROUP_VALUES = [
    group_value(
        v, "consumer", 1, "range", "alice-1", 5, [ALICE, BOB], tags=tagged((1, b"z")), member_tags=tagged((0, b""))
    )
    for v in range(5)
]


def _decoders_for(data: bytes):
    return (
        [decode_key]
        if data in VALID_KEYS
        else ([decode_offset_commit_value] if data in VALID_OFFSET_VALUES else [decode_group_metadata_value])
    )


@pytest.mark.parametrize("data", VALID_KEYS + VALID_OFFSET_VALUES + VALID_GROUP_VALUES)
def test_every_truncation_raises_truncated_data_error(data):
    (decode,) = _decoders_for(data)
    decode(data)  # the whole thing is valid
    for cut in range(len(data)):
        with pytest.raises(TruncatedDataError) as info:
            decode(data[:cut])
        assert 0 <= info.value.position <= cut
        assert "expected" in info.value.message


@pytest.mark.parametrize("data", VALID_KEYS + VALID_OFFSET_VALUES + VALID_GROUP_VALUES)
def test_trailing_bytes_are_corrupt(data):
    (decode,) = _decoders_for(data)
    with pytest.raises(CorruptBatchError) as info:
        decode(data + b"\x00")
    assert not isinstance(info.value, TruncatedDataError)
    assert info.value.position == len(data)
    assert "expected the record to end" in info.value.message


def test_null_and_empty_keys():
    with pytest.raises(CorruptBatchError, match="expected bytes"):
        decode_key(None)
    with pytest.raises(TruncatedDataError, match="expected an int16"):
        decode_key(b"")
    with pytest.raises(TruncatedDataError):
        decode_key(b"\x00")


def test_negative_key_version_is_corrupt():
    with pytest.raises(CorruptBatchError, match="expected 0 or more"):
        decode_key(i16(-1) + s("g"))


@pytest.mark.parametrize("decode", [decode_offset_commit_value, decode_group_metadata_value])
def test_unknown_value_versions(decode):
    with pytest.raises(UnsupportedFormatError, match=r"version 5; expected 0\.\.4") as info:
        decode(i16(5) + b"\x00" * 40)
    assert info.value.position == 0
    with pytest.raises(CorruptBatchError, match=r"version -1"):
        decode(i16(-1) + b"\x00" * 40)
    with pytest.raises(TruncatedDataError):
        decode(b"")


def test_null_non_nullable_strings_are_corrupt():
    with pytest.raises(CorruptBatchError, match="group has length -1; expected a non-null string") as info:
        decode_key(i16(1) + s(None) + s("t") + i32(0))
    assert info.value.position == 2
    with pytest.raises(CorruptBatchError, match="metadata"):
        decode_offset_commit_value(i16(3) + i64(1) + i32(-1) + s(None) + i64(1))
    with pytest.raises(CorruptBatchError, match="metadata"):
        decode_offset_commit_value(i16(4) + i64(1) + i32(-1) + cs(None) + i64(1) + b"\x00")
    with pytest.raises(CorruptBatchError, match="protocolType"):
        decode_group_metadata_value(i16(2) + s(None) + i32(1) + s(None) + s(None) + i64(0) + i32(0))
    with pytest.raises(CorruptBatchError, match=r"members\[0\]\.memberId"):
        decode_group_metadata_value(i16(4) + cs("c") + i32(1) + cs(None) + cs(None) + i64(0) + uv(2) + cs(None))


def test_negative_lengths_below_null_are_corrupt():
    with pytest.raises(CorruptBatchError, match="protocol has length -2"):
        decode_group_metadata_value(i16(2) + s("c") + i32(1) + i16(-2) + s(None) + i64(0) + i32(0))
    with pytest.raises(CorruptBatchError, match="members has -2 elements; expected a non-null array"):
        decode_group_metadata_value(i16(2) + s("c") + i32(1) + s(None) + s(None) + i64(0) + i32(-2))
    with pytest.raises(CorruptBatchError, match="non-null array"):
        decode_group_metadata_value(i16(4) + cs("c") + i32(1) + cs(None) + cs(None) + i64(0) + uv(0) + b"\x00")
    with pytest.raises(CorruptBatchError, match="subscription has length -1; expected non-null bytes"):
        decode_group_metadata_value(
            i16(0) + s("c") + i32(1) + s(None) + s(None) + i32(1) + s("m") + s("c") + s("h") + i32(1) + i32(-1) + i32(0)
        )


def test_invalid_utf8_is_corrupt():
    with pytest.raises(CorruptBatchError, match="not valid UTF-8") as info:
        decode_key(i16(2) + i16(2) + b"\xc3\x28")
    assert info.value.position == 2


def test_overlong_varint_is_corrupt():
    with pytest.raises(CorruptBatchError, match="unsigned varint") as info:
        decode_offset_commit_value(i16(4) + i64(1) + i32(-1) + b"\xff\xff\xff\xff\xff\x01")
    assert info.value.position == 14
    with pytest.raises(CorruptBatchError, match="unsigned varint"):  # 5 bytes but above 2^31
        decode_offset_commit_value(i16(4) + i64(1) + i32(-1) + b"\xff\xff\xff\xff\x0f")


def test_huge_declared_lengths_are_truncation_not_allocation():
    with pytest.raises(TruncatedDataError, match="declares 2147483645 bytes"):
        decode_offset_commit_value(i16(4) + i64(1) + i32(-1) + uv(2**31 - 2) + b"abc")
    with pytest.raises(TruncatedDataError):
        decode_group_metadata_value(i16(3) + s("c") + i32(1) + s(None) + s(None) + i64(0) + i32(2**31 - 1))


def test_error_messages_name_the_position_and_the_expectation():
    with pytest.raises(TruncatedDataError) as info:
        decode_offset_commit_value(i16(3) + i64(1))
    err = info.value
    assert err.position == 10
    assert str(err) == ("byte 10: offset commit value v3: leaderEpoch: expected an int32 (4 bytes) but only 0 remain")
    assert err.to_dict()["error"] == "TruncatedDataError"


def test_random_and_mutated_bytes_raise_only_kafkalog_errors():
    rng = random.Random(20240607)
    decoders = [decode_key, decode_offset_commit_value, decode_group_metadata_value]
    inputs = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64))) for _ in range(1500)]
    for valid in VALID_KEYS + VALID_OFFSET_VALUES + VALID_GROUP_VALUES:
        for _ in range(150):
            mutated = bytearray(valid)
            for _ in range(rng.randrange(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            inputs.append(bytes(mutated))
    for data in inputs:
        for decode in decoders:
            try:
                decode(data)
            except KafkaLogError as exc:
                assert exc.position is not None and 0 <= exc.position <= len(data)


# -- real data written by Kafka brokers -----------------------------------------------------------

FIXTURES = Path("/work/shared/fixtures/real/broker-dirs")


class RawRecord(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _read_consumer_offsets(broker: str) -> list[RawRecord]:
    """Every record of every `__consumer_offsets-*` partition, read with kafka-python, in log order."""
    from kafka.record import MemoryRecords

    root = FIXTURES / broker
    if not root.is_dir():
        pytest.skip(f"fixture {root} is not available")
    out = []
    partitions = sorted(root.glob("__consumer_offsets-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    for part in partitions:
        partition = int(part.name.rsplit("-", 1)[1])
        for segment in sorted(part.glob("*.log"), key=lambda p: int(p.stem)):
            records = MemoryRecords(segment.read_bytes())
            while (batch := records.next_batch()) is not None:
                assert not batch.is_control_batch and not batch.is_transactional
                for record in batch:
                    out.append(RawRecord(partition, record.offset, record.key, record.value))
    return out


def _census(records: list[RawRecord]) -> dict:
    counts: dict = {}
    for r in records:
        decoded = decode_record(r.key, r.value)
        kind = (
            type(decoded.key).__name__,
            decoded.key.version,
            None if decoded.value is None else decoded.value.version,
        )
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def test_kafka_2_7_1_every_record_decodes():
    records = _read_consumer_offsets("kafka-2.7.1-zk")
    assert _census(records) == {
        ("GroupMetadataKey", 2, 3): 8,
        ("GroupMetadataKey", 2, None): 6,
        ("OffsetCommitKey", 1, 3): 1,
        ("OffsetCommitKey", 1, None): 1,
    }
    # Partitions 8, 17, 28, 33 and 39 hold data; Kafka's cleaner left offset gaps (39 starts at 4).
    assert sorted({r.partition for r in records}) == [8, 17, 28, 33, 39]
    assert [r.offset for r in records if r.partition == 39] == [4, 16, 17, 18, 19]


def test_kafka_2_7_1_commit_then_tombstone():
    records = _read_consumer_offsets("kafka-2.7.1-zk")
    p39 = {r.offset: r for r in records if r.partition == 39}
    # The raw bytes, checked by hand: key v1 "console-consumer-65070" / "test_topic_0603" / 0;
    # value v3, offset 9, leaderEpoch -1, metadata "", commitTimestamp 0x01888260a41b.
    assert p39[16].key == (b"\x00\x01\x00\x16console-consumer-65070\x00\x0ftest_topic_0603\x00\x00\x00\x00")
    assert p39[16].value == bytes.fromhex("00030000000000000009ffffffff0000000001888260a41b")
    assert p39[18].key == p39[16].key and p39[18].value is None
    assert decode_key(p39[16].key) == OffsetCommitKey(1, "console-consumer-65070", "test_topic_0603", 0)
    assert decode_offset_commit_value(p39[16].value) == OffsetCommitValue(3, 9, -1, "", 0x01888260A41B, -1, ())

    before = [r for r in records if r.partition == 39 and r.offset < 18]
    assert committed_offsets(before) == {
        ("console-consumer-65070", "test_topic_0603", 0): OffsetCommitValue(3, 9, -1, "", 1685814551579, -1, ())
    }
    # The only commit in this log was deleted, and so was every group.
    assert committed_offsets(records) == {}
    assert group_metadata(records) == {}


def test_kafka_2_7_1_group_metadata_v3_members():
    records = _read_consumer_offsets("kafka-2.7.1-zk")
    first = next(r for r in records if r.partition == 17 and r.offset == 0)
    assert first.key == b"\x00\x02\x00\x16console-consumer-55231"
    value = decode_group_metadata_value(first.value)
    member_id = "consumer-console-consumer-55231-1-5fc19737-e0a8-47c5-9617-54b903a61502"
    assert (value.version, value.protocol_type, value.generation, value.protocol, value.leader) == (
        3,
        "consumer",
        1,
        "range",
        member_id,
    )
    assert value.current_state_timestamp == 1670071252892
    assert value.members == (
        MemberMetadata(
            member_id,
            None,
            "consumer-console-consumer-55231-1",
            "/127.0.0.1",
            300000,
            10000,
            # ConsumerProtocolSubscription v1: topics ["myTopic"], userData null, ownedPartitions []
            b"\x00\x01" + i32(1) + s("myTopic") + i32(-1) + i32(0),
            # ConsumerProtocolAssignment v1: myTopic [0], userData null
            b"\x00\x01" + i32(1) + s("myTopic") + i32(1) + i32(0) + i32(-1),
        ),
    )
    assert member_id.encode() in first.value  # the leader string as stored
    # Offset 1 is the empty group after the member left: generation 2, no protocol or leader.
    second = decode_group_metadata_value(next(r for r in records if r.partition == 17 and r.offset == 1).value)
    assert (second.generation, second.protocol, second.leader, second.members) == (2, None, None, ())


def test_confluent_5_1_2_every_record_decodes():
    records = _read_consumer_offsets("confluent-5.1.2-lz4")
    assert len(records) == 225
    assert _census(records) == {
        ("GroupMetadataKey", 2, 2): 173,
        ("GroupMetadataKey", 2, None): 2,
        ("OffsetCommitKey", 1, 3): 49,
        ("OffsetCommitKey", 1, None): 1,
    }


def test_confluent_5_1_2_committed_offsets():
    records = _read_consumer_offsets("confluent-5.1.2-lz4")
    offsets = committed_offsets(records)
    assert len(offsets) == 18
    assert sorted({group for group, _, _ in offsets}) == [
        "_confluent-controlcenter-5-1-2-1",
        "_confluent-controlcenter-5-1-2-1-command",
    ]
    # Control Center read all 12 partitions of _confluent-metrics, each committed at offset 0.
    assert {p: v.offset for (g, t, p), v in offsets.items() if t == "_confluent-metrics"} == {p: 0 for p in range(12)}
    assert offsets[("_confluent-controlcenter-5-1-2-1-command", "_confluent-command", 0)] == OffsetCommitValue(
        3, 2, -1, "", 1558748658672, -1, ()
    )
    assert (
        offsets[
            ("_confluent-controlcenter-5-1-2-1", "_confluent-controlcenter-5-1-2-1-monitoring-trigger-event-rekey", 0)
        ].offset
        == 22
    )
    assert all(v.version == 3 and v.leader_epoch == -1 and v.metadata == "" for v in offsets.values())

    # Partition 0: Kafka Connect committed "docker-connect-configs" with the empty group id five times
    # (offsets 0..4), then the commit was deleted at offset 5, so it is not in the result.
    p0 = [r for r in records if r.partition == 0]
    assert [r.offset for r in p0] == [0, 1, 2, 3, 4, 5]
    raw_key = i16(1) + i16(0) + i16(22) + b"docker-connect-configs" + i32(0)
    assert all(r.key == raw_key for r in p0) and p0[5].value is None
    # by hand: value v3 at offset 0 -> committed offset 12, leaderEpoch -1, metadata ""
    assert p0[0].value[:16] == bytes.fromhex("0003000000000000000cffffffff0000")
    assert committed_offsets(p0[:5]) == {("", "docker-connect-configs", 0): decode_offset_commit_value(p0[4].value)}
    assert committed_offsets(p0) == {}


def test_confluent_5_1_2_group_metadata():
    records = _read_consumer_offsets("confluent-5.1.2-lz4")
    groups = group_metadata(records)
    assert sorted(groups) == [
        "_confluent-controlcenter-5-1-2-1",
        "_confluent-controlcenter-5-1-2-1-command",
        "compose-connect-group",
        "schema-registry",
    ]
    sr = groups["schema-registry"]
    assert (sr.version, sr.protocol_type, sr.generation, sr.protocol, sr.leader) == (
        2,
        "sr",
        73,
        "v0",
        "sr-1-67be0a79-175f-4e96-83ae-de395de3c8f3",
    )
    assert [(m.client_id, m.client_host, m.rebalance_timeout, m.session_timeout) for m in sr.members] == [
        ("sr-1", "/172.21.0.6", 300000, 10000)
    ]
    connect = groups["compose-connect-group"]
    assert (connect.protocol_type, connect.generation, connect.protocol, connect.leader) == (
        "connect",
        73,
        "default",
        "connect-1-b2989e8e-56d9-4851-9ee1-5d20d7b52bc0",
    )
    assert connect.member_ids == ("connect-1-b2989e8e-56d9-4851-9ee1-5d20d7b52bc0",)
    # Both Control Center groups ended empty.
    for name in ("_confluent-controlcenter-5-1-2-1", "_confluent-controlcenter-5-1-2-1-command"):
        assert (groups[name].protocol, groups[name].leader, groups[name].members) == (None, None, ())

    # The largest value (2,460 bytes, partition 9 offset 13) is a Kafka Streams group whose member
    # subscribes to 14 topics; its subscription (ConsumerProtocol v0) lists them.
    big = next(r for r in records if r.partition == 9 and r.offset == 13)
    assert len(big.value) == 2460
    value = decode_group_metadata_value(big.value)
    assert (value.protocol_type, value.protocol) == ("consumer", "stream")
    assert all(m.member_id.startswith("_confluent-controlcenter-5-1-2-1-") for m in value.members)
    assert all(m.subscription[:6] == b"\x00\x00" + i32(14) for m in value.members)
    assert s("_confluent-metrics") in value.members[0].subscription
