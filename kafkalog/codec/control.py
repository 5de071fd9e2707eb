"""Control records: transaction markers and the other control types (Kafka's ControlRecordType).

A control record's key is (version int16, type int16); an end-transaction marker's value is
(version int16, coordinatorEpoch int32). Kafka writes one control record per control batch.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from ..errors import CorruptBatchError
from .batch import NO_PARTITION_LEADER_EPOCH, RecordBatch, TimestampType, build_batch
from .records import Record

CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_VERSION = 0


class ControlType(enum.IntEnum):
    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    """The first record of a control batch. `coordinator_epoch` is set for ABORT/COMMIT only."""

    offset: int
    timestamp: int
    type: ControlType
    version: int
    coordinator_epoch: int | None
    value: bytes | None


def _unpack_versioned(layout: struct.Struct, data: bytes | None, what: str, versioned: str) -> tuple:
    """`data` unpacked with `layout`, whose first field is a version: too few bytes ("`what` needs N
    bytes") or a negative version ("invalid `versioned` version V") is a CorruptBatchError."""
    if data is None or len(data) < layout.size:
        raise CorruptBatchError(f"{what} needs {layout.size} bytes, found {0 if data is None else len(data)}")
    fields = layout.unpack_from(data)
    if fields[0] < 0:
        raise CorruptBatchError(f"invalid {versioned} version {fields[0]}")
    return fields


def parse_control_type(key: bytes | None) -> tuple[int, ControlType]:
    """(version, type) of a control record key; an unknown type reads as UNKNOWN, as in Kafka."""
    version, type_id = _unpack_versioned(CONTROL_KEY, key, "control record key", "control record key")
    try:
        return version, ControlType(type_id)
    except ValueError:
        return version, ControlType.UNKNOWN


def parse_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker value."""
    _, coordinator_epoch = _unpack_versioned(
        END_TXN_MARKER_VALUE, value, "end transaction marker value", "end transaction marker"
    )
    return coordinator_epoch


def control_record(batch: RecordBatch) -> ControlRecord | None:
    """The control record of a control batch, or None for a control batch the cleaner emptied."""
    records = batch.records()
    if not records:
        return None
    record = records[0]
    try:
        version, type_ = parse_control_type(record.key)
        epoch = parse_coordinator_epoch(record.value) if type_ in (ControlType.ABORT, ControlType.COMMIT) else None
    except CorruptBatchError as err:
        raise err.located(base_position=batch.position, offset=record.offset) from None
    return ControlRecord(record.offset, record.timestamp, type_, version, epoch, record.value)


def build_end_txn_marker(
    *,
    offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = TimestampType.CREATE_TIME,
) -> bytes:
    """A COMMIT or ABORT marker batch as the transaction coordinator has it written (one record, key version 0).
    In a LogAppendTime topic the leader stamps the marker with its append time, `timestamp`."""
    key = CONTROL_KEY.pack(CURRENT_CONTROL_VERSION, ControlType.COMMIT if commit else ControlType.ABORT)
    value = END_TXN_MARKER_VALUE.pack(CURRENT_CONTROL_VERSION, coordinator_epoch)
    log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        [Record(offset, timestamp, key, value)],
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        timestamp_type=timestamp_type,
        log_append_time=timestamp if log_append else None,
    )
