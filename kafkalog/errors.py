"""The errors kafkalog raises: each names the file, the byte position and what was expected.
Errors in a file of records name the record offset too; errors in a text file (a checkpoint), whose
lines are what a reader counts, name the line instead.

The codec is sans-IO and only knows positions inside the buffer it was given; the storage layer
re-raises with the file name and the buffer's position in the file (`KafkaLogError.located`).
"""

from __future__ import annotations

import copy


class KafkaLogError(Exception):
    """Base of every error kafkalog raises on bad input or a refused operation."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        position: int | None = None,
        offset: int | None = None,
        line: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.file = file
        self.position = position
        self.offset = offset
        self.line = line  # 1-based, in text files

    def located(self, file: str | None = None, base_position: int = 0, offset: int | None = None) -> KafkaLogError:
        """A copy that names `file` (and `offset`, where it names none) and whose position is
        shifted by `base_position`: the caller's frame of reference."""
        located = copy.copy(self)
        if file is not None:
            located.file = file
        if located.offset is None:
            located.offset = offset
        if located.position is not None:
            located.position += base_position
        return located

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
            "line": self.line,
            "message": self.message,
        }


class CorruptBatchError(KafkaLogError):
    """A record batch or legacy message whose structure is not what Kafka writes."""


class CrcMismatchError(CorruptBatchError):
    """The stored CRC does not match the bytes it covers."""


class TruncatedDataError(CorruptBatchError):
    """The bytes end before the structure they declare."""


class UnsupportedFormatError(KafkaLogError):
    """An unknown magic byte, codec id or file version."""


class DecompressionLimitError(KafkaLogError):
    """A batch holds more than kafkalog decodes at once: a compressed payload that expands past the
    decompression limit, or more records than MAX_RECORDS_PER_BATCH (kafkalog/codec/batch.py)."""


class CorruptIndexError(KafkaLogError):
    """An .index, .timeindex or .txnindex file that fails Kafka's sanity checks."""


class CorruptSnapshotError(KafkaLogError):
    """A producer-state snapshot with a bad version, size or CRC-32C."""


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint file that Kafka's CheckpointFile reader would refuse."""


class ConfigError(KafkaLogError):
    """A configuration value that Kafka's validation would reject."""


class LogDirError(KafkaLogError):
    """A log directory that cannot be used as asked (locked, interrupted swap, missing)."""


class SchemaRegistryError(KafkaLogError):
    """A Schema Registry record (`_schemas`), schema file or schema that cannot be read as registered."""


class UndecodableValueError(KafkaLogError):
    """A key or value that its declared format (Confluent's wire format, Avro, Protobuf, JSON) does not decode."""


class FileAccessError(KafkaLogError):
    """The system refused to write, rename or delete a file: a full disk or quota, a read-only
    filesystem, a file or directory without write permission, an immutable file."""
