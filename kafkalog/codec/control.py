"""Control records: transaction markers and the other control types (spec §3).

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


def parse_control_type(key: bytes | None) -> tuple[int, ControlType]:
    """(version, type) of a control record key; an unknown type reads as UNKNOWN, as in Kafka."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptBatchError(f"control record key needs {CONTROL_KEY.size} bytes, "
                                f"found {0 if key is None else len(key)}")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptBatchError(f"invalid control record key version {version}")
    try:
        return version, ControlType(type_id)
    except ValueError:
        return version, ControlType.UNKNOWN


def parse_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker value."""
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise CorruptBatchError(f"end transaction marker value needs {END_TXN_MARKER_VALUE.size} bytes, "
                                f"found {0 if value is None else len(value)}")
    version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptBatchError(f"invalid end transaction marker version {version}")
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


def build_end_txn_marker(*, offset: int, timestamp: int, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int = 0,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                         timestamp_type: int = TimestampType.CREATE_TIME) -> bytes:
    """A COMMIT or ABORT marker batch as the transaction coordinator has it written (spec §1.11 B).
    In a LogAppendTime topic the leader stamps the marker with its append time, `timestamp`."""
    key = CONTROL_KEY.pack(CURRENT_CONTROL_VERSION, ControlType.COMMIT if commit else ControlType.ABORT)
    value = END_TXN_MARKER_VALUE.pack(CURRENT_CONTROL_VERSION, coordinator_epoch)
    log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch([Record(offset, timestamp, key, value)], partition_leader_epoch=partition_leader_epoch,
                       producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                       is_control=True, timestamp_type=timestamp_type,
                       log_append_time=timestamp if log_append else None)
