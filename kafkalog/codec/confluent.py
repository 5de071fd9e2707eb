"""Confluent's wire format: the frame Schema Registry's serializers put around a key or value.

    magic byte 0 | schema id (4 bytes, big-endian) | [Protobuf only: message indexes] | payload

The Protobuf serializer adds the path from the .proto file's top level to the message type it wrote:
a zig-zag varint count, then that many zig-zag varint indexes (Kafka's ByteUtils varints), with a
single 0 byte (count 0) standing for the first message, [0] (Confluent's `MessageIndexes`).
"""

from __future__ import annotations

from ..errors import KafkaLogError, UndecodableValueError
from .varint import read_varint, write_varint

MAGIC = 0
HEADER_SIZE = 5
FIRST_MESSAGE = (0,)


def read_schema_id(data: bytes) -> int:
    """The schema id of a framed key or value; its payload starts at HEADER_SIZE."""
    if len(data) < HEADER_SIZE:
        raise UndecodableValueError(
            f"{len(data)} bytes, shorter than Confluent's 5-byte header (magic byte 0, schema id)", position=0
        )
    if data[0] != MAGIC:
        raise UndecodableValueError(f"magic byte {data[0]}, expected {MAGIC} (Confluent's wire format)", position=0)
    return int.from_bytes(data[1:HEADER_SIZE], "big", signed=True)


def read_message_indexes(data: bytes, position: int = HEADER_SIZE) -> tuple[tuple[int, ...], int]:
    """The Protobuf message indexes at `position` and where the payload starts."""
    try:
        count, position = read_varint(data, position)
        if count == 0:
            return FIRST_MESSAGE, position
        if count < 0 or count > len(data) - position:
            raise UndecodableValueError(f"message index count {count} does not fit the value", position=position)
        indexes = []
        for _ in range(count):
            index, position = read_varint(data, position)
            indexes.append(index)
    except UndecodableValueError:
        raise
    except KafkaLogError as err:
        raise UndecodableValueError(f"Protobuf message indexes: {err.message}", position=err.position) from None
    if any(i < 0 for i in indexes):
        raise UndecodableValueError(f"negative Protobuf message index in {indexes}", position=HEADER_SIZE)
    return tuple(indexes), position


def frame(schema_id: int, payload: bytes, message_indexes: tuple[int, ...] | None = None) -> bytes:
    """A value in Confluent's wire format, as its serializers write it (for tests and round trips)."""
    out = bytearray([MAGIC]) + schema_id.to_bytes(4, "big", signed=True)
    if message_indexes is not None:
        if tuple(message_indexes) == FIRST_MESSAGE:
            out.append(0)
        else:
            write_varint(out, len(message_indexes))
            for index in message_indexes:
                write_varint(out, index)
    return bytes(out + payload)
