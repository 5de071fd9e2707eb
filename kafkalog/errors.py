"""The errors kafkalog raises: each names the file, the byte position and what was expected.
Errors in a file of records name the record offset too; errors in a text file (a checkpoint), whose
lines are what a reader counts, name the line instead.

The codec is sans-IO and only knows positions inside the buffer it was given; the storage layer
re-raises with the file name and the buffer's position in the file (`KafkaLogError.located`).

An error raised in a Spark task reaches the driver only as the text of its Python traceback. In a
Python worker each KafkaLogError therefore carries itself as data in that text: a note (PEP 678, printed
under the exception's line) of `AS_DATA` and a JSON object, which `from_data` turns back into the error
(kafkalog/spark/errors.py finds it in Spark's exception).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import traceback

# The note that carries a KafkaLogError across a Python worker's traceback, before its JSON
AS_DATA = "kafkalog error as data: "


def in_python_worker() -> bool:
    """Whether this process is one of Spark's Python workers, whose errors the JVM receives as the text
    of their traceback: Spark starts each with the secret it answers the JVM with."""
    return "PYTHON_WORKER_FACTORY_SECRET" in os.environ


def print_notes(tracebacks: type[traceback.TracebackException]) -> None:
    """Make `tracebacks` print an exception's notes under its line, as Python 3.11's do (PEP 678);
    Python 3.10's leave them out, and with them the error as data."""
    init = tracebacks.__init__

    def __init__(self, exc_type, exc_value, *args, **kwargs):
        init(self, exc_type, exc_value, *args, **kwargs)
        if not getattr(self, "__notes__", None):  # 3.11's print them already
            self._str += "".join(f"\n{note}" for note in getattr(exc_value, "__notes__", None) or ())

    tracebacks.__init__ = __init__  # type: ignore[method-assign]


if sys.version_info < (3, 11) and in_python_worker():
    print_notes(traceback.TracebackException)


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
        if "_kafkalog_notes" in self.__dict__:  # its own notes, not the original's
            located.__dict__["_kafkalog_notes"] = list(self.__dict__["_kafkalog_notes"])
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

    @property
    def __notes__(self) -> list[str]:
        """The notes Python prints under the exception's line: those added with `add_note` and, in a
        Spark Python worker only, first, this error as data (`as_data`), as it is when printed (the
        storage layer locates an error after it is raised). The list is the error's own, so that
        `add_note` appends to it."""
        notes = self.__dict__.setdefault("_kafkalog_notes", [])
        notes[:] = [note for note in notes if not note.startswith(AS_DATA)]
        if in_python_worker():
            notes.insert(0, self.as_data())
        return notes

    def as_data(self) -> str:
        """One line: `AS_DATA` and this error as JSON, under the name of its nearest class in this
        module (the one `from_data` can build on the driver; a subclass defined elsewhere becomes it)."""
        nearest = next(c for c in type(self).__mro__ if c.__module__ == __name__)
        return AS_DATA + json.dumps({**self.to_dict(), "error": nearest.__name__})

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


class MissingExtraError(ConfigError):
    """An option, command or table that needs an optional package which is not installed (kafkalog/extras.py)."""


class LogDirError(KafkaLogError):
    """A log directory that cannot be used as asked (locked, interrupted swap, missing)."""


class SchemaRegistryError(KafkaLogError):
    """A Schema Registry record (`_schemas`), schema file or schema that cannot be read as registered."""


class UndecodableValueError(KafkaLogError):
    """A key or value that its declared format (Confluent's wire format, Avro, Protobuf, JSON) does not decode."""


class FileAccessError(KafkaLogError):
    """The system refused to write, rename or delete a file: a full disk or quota, a read-only
    filesystem, a file or directory without write permission, an immutable file."""


class UnreadableFileError(FileAccessError):
    """The system refused to read a file: no read permission, an I/O error (EIO), a file gone since it
    was listed."""


def from_data(line: str) -> KafkaLogError:
    """The error `KafkaLogError.as_data` wrote: its class, file, line, byte, offset and message. `line`
    starts with the JSON object (after `AS_DATA`); what follows it on the line is ignored."""
    data, _ = json.JSONDecoder().raw_decode(line)
    cls = getattr(sys.modules[__name__], str(data["error"]), None)
    if not (isinstance(cls, type) and issubclass(cls, KafkaLogError)):
        cls = KafkaLogError
    return cls(data["message"], file=data["file"], position=data["position"], offset=data["offset"], line=data["line"])
