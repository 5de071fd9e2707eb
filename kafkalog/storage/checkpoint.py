"""Checkpoint text files: offset checkpoints, leader-epoch-checkpoint, partition.metadata.

Kafka's CheckpointFile format (a version line, a count line, one entry per line) for the offset
checkpoints and leader epochs, and partition.metadata's own `key: value` lines. Parsing follows
Java's reader: lines end at "\\n", "\\r" or "\\r\\n", fields are split on runs of ASCII whitespace
(Java's `\\s+`), numbers are Java ints/longs. Errors name the 1-based line and, in `position`, the
byte where that line starts.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from ..errors import CorruptCheckpointError
from .naming import TopicPartition

OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s
_METADATA_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")  # Java's :\s+
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")  # 16 bytes, URL-safe base64, padding optional


class EpochEntry(NamedTuple):
    """The first offset written in a leader epoch."""

    epoch: int
    start_offset: int


class PartitionMetadata(NamedTuple):
    version: int
    topic_id: str  # URL-safe base64 of the 16-byte topic UUID, without padding


class _Line(NamedTuple):
    number: int  # 1-based
    position: int  # byte position of the line's start in the UTF-8 file
    text: str


def _lines(text: str) -> list[_Line]:
    """The lines Java's BufferedReader.readLine returns: a final line break does not start a line."""
    lines = []
    position = start = 0
    for number, match in enumerate(_LINE_BREAK.finditer(text), start=1):
        line = text[start : match.start()]
        lines.append(_Line(number, position, line))
        position += len(line.encode("utf-8", "surrogatepass")) + len(match.group())
        start = match.end()
    if start < len(text):
        lines.append(_Line(len(lines) + 1, position, text[start:]))
    return lines


def _split(pattern: re.Pattern, text: str) -> list[str]:
    """Java's String.split: a leading empty field is kept, trailing empty fields are dropped."""
    fields = pattern.split(text)
    while fields and not fields[-1]:
        fields.pop()
    return fields


def _java_integer(text: str, bits: int) -> int | None:
    """Integer.parseInt (bits=32) / Long.parseLong (bits=64), or None where Java would throw."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _error(line: _Line, message: str, file: str | None) -> CorruptCheckpointError:
    return CorruptCheckpointError(message, file=file, position=line.position, line=line.number)


def _malformed(line: _Line, expected: str, file: str | None) -> CorruptCheckpointError:
    return _error(line, f"expected {expected}, found {line.text!r}", file)


E = TypeVar("E")


def _read_checkpoint(
    text: str, version: int, parse_entry: Callable[[str], E | None], expected: str, file: str | None
) -> list[tuple[_Line, E]]:
    """Kafka's CheckpointReadBuffer.read: the entries with the lines they came from."""
    lines = _lines(text)
    if not lines:  # an empty file holds no entries
        return []
    found = _java_integer(lines[0].text, 32)
    if found is None:
        raise _malformed(lines[0], "the format version", file)
    if found != version:
        raise _error(lines[0], f"unrecognised version {found}, expected {version}", file)
    if len(lines) == 1:  # Kafka reads a missing count line as "no entries"
        return []
    count = _java_integer(lines[1].text, 32)
    if count is None or count < 0:
        raise _malformed(lines[1], "the entry count", file)
    entries: list[tuple[_Line, E]] = []
    for line in lines[2:]:
        entry = parse_entry(line.text)
        if entry is None:
            raise _malformed(line, expected, file)
        entries.append((line, entry))
    if len(entries) != count:
        raise _error(lines[1], f"expected {count} entries, found {len(entries)}", file)
    return entries


# -- offset checkpoints (recovery point, log start offset, replication, cleaner) -------------------


def _offset_entry(text: str) -> tuple[TopicPartition, int] | None:
    fields = _split(_WHITESPACE, text)
    if len(fields) != 3:
        return None
    partition, offset = _java_integer(fields[1], 32), _java_integer(fields[2], 64)
    if partition is None or offset is None:
        return None
    return TopicPartition(fields[0], partition), offset


def parse_offset_checkpoint(text: str, file: str | None = None) -> dict[tuple[str, int], int]:
    """`topic partition offset` lines → {(topic, partition): offset}; a repeated partition keeps its
    last line, as Kafka's map does."""
    entries = _read_checkpoint(text, OFFSET_CHECKPOINT_VERSION, _offset_entry, "'topic partition offset'", file)
    return dict(entry for _, entry in entries)


def format_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> str:
    """The file content, entries sorted by topic and partition so that output is reproducible."""
    lines = [str(OFFSET_CHECKPOINT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        line = f"{topic} {partition} {offset}"
        if _offset_entry(line) != ((topic, partition), offset):
            raise CorruptCheckpointError(
                f"cannot write {line!r}: Kafka would not read it back as topic "
                f"{topic!r}, partition {partition}, offset {offset}"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


# -- leader-epoch-checkpoint --------------------------------------------------------------------


def _epoch_entry(text: str) -> EpochEntry | None:
    fields = _split(_WHITESPACE, text)
    if len(fields) != 2:
        return None
    epoch, start_offset = _java_integer(fields[0], 32), _java_integer(fields[1], 64)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def _check_epochs(entries: Sequence[EpochEntry], lines: Sequence[_Line] | None, file: str | None) -> None:
    """Epochs and start offsets ≥ 0 (Kafka's cache refuses others), epochs strictly increasing,
    start offsets non-decreasing: the order Kafka's cache keeps and writes."""

    def fail(i: int, message: str) -> CorruptCheckpointError:
        if lines is None:
            return CorruptCheckpointError(f"entry {i} {tuple(entries[i])}: {message}", file=file)
        return _error(lines[i], message, file)

    for i, entry in enumerate(entries):
        if entry.epoch < 0 or entry.start_offset < 0:
            raise fail(i, f"epoch {entry.epoch} and start offset {entry.start_offset} must not be negative")
        if i and entry.epoch <= entries[i - 1].epoch:
            raise fail(i, f"epoch {entry.epoch} does not increase on the previous epoch {entries[i - 1].epoch}")
        if i and entry.start_offset < entries[i - 1].start_offset:
            raise fail(
                i, f"start offset {entry.start_offset} is below the previous entry's {entries[i - 1].start_offset}"
            )


def parse_leader_epoch_checkpoint(text: str, file: str | None = None) -> list[EpochEntry]:
    entries = _read_checkpoint(text, LEADER_EPOCH_CHECKPOINT_VERSION, _epoch_entry, "'epoch startOffset'", file)
    epochs = [entry for _, entry in entries]
    _check_epochs(epochs, [line for line, _ in entries], file)
    return epochs


def format_leader_epoch_checkpoint(entries: Sequence[tuple[int, int]]) -> str:
    epochs = [EpochEntry(*entry) for entry in entries]
    _check_epochs(epochs, None, None)
    lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(epochs))]
    lines += [f"{entry.epoch} {entry.start_offset}" for entry in epochs]
    return "\n".join(lines) + "\n"


def truncate_epochs_from_start(entries: Sequence[EpochEntry], new_start: int) -> list[EpochEntry]:
    """The cache after the log start offset moves to `new_start` (LeaderEpochFileCache.truncateFromStart).

    Entries starting at or before `new_start` go; the last of them comes back starting at
    `new_start`, because the surviving log from `new_start` on still belongs to that epoch.
    """
    removed = 0
    while removed < len(entries) and entries[removed].start_offset <= new_start:
        removed += 1
    if not removed:
        return list(entries)
    return [EpochEntry(entries[removed - 1].epoch, new_start), *entries[removed:]]


def truncate_epochs_from_end(entries: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """The cache after the log is truncated to end before `end_offset` (truncateFromEnd): entries
    starting at or after it go. A negative `end_offset` (undefined) changes nothing."""
    kept = len(entries)
    if end_offset >= 0:
        while kept and entries[kept - 1].start_offset >= end_offset:
            kept -= 1
    return list(entries[:kept])


def epochs_from_batches(batches: Iterable[tuple[int, int]], entries: Sequence[EpochEntry] = ()) -> list[EpochEntry]:
    """The cache that segment recovery builds (LogSegment.recover).

    `batches` are (partition_leader_epoch, base_offset) of v2 batches in log order (legacy batches
    carry no epoch). A batch whose epoch is ≥ 0 and above the latest cached epoch starts a new
    entry; like Kafka's assign, that first drops cached entries starting at or after its offset.
    """
    result = list(entries)
    for epoch, base_offset in batches:
        if epoch >= 0 and (not result or epoch > result[-1].epoch):
            while result and result[-1].start_offset >= base_offset:
                result.pop()
            result.append(EpochEntry(epoch, base_offset))
    return result


# -- partition.metadata -------------------------------------------------------------------------


def _topic_id_bytes(text: str) -> bytes | None:
    if not _TOPIC_ID.fullmatch(text):
        return None
    return base64.urlsafe_b64decode(text[:22] + "==")


def parse_partition_metadata(text: str, file: str | None = None) -> PartitionMetadata:
    """`version: 0` and `topic_id: <id>`; Kafka ignores the labels and anything after line 2."""
    lines = _lines(text)
    if not lines:
        raise CorruptCheckpointError(
            "empty file; expected 'version: 0' and 'topic_id: <id>' lines", file=file, position=0, line=1
        )
    fields = _split(_METADATA_SEPARATOR, lines[0].text)
    version = _java_integer(fields[1], 32) if len(fields) == 2 else None
    if version is None:
        raise _malformed(lines[0], "'version: <int>'", file)
    if version != PARTITION_METADATA_VERSION:
        raise _error(lines[0], f"unrecognised version {version}, expected {PARTITION_METADATA_VERSION}", file)
    if len(lines) < 2:
        raise CorruptCheckpointError(
            "missing; expected 'topic_id: <id>'",
            file=file,
            position=len(text.encode("utf-8", "surrogatepass")),
            line=2,
        )
    fields = _split(_METADATA_SEPARATOR, lines[1].text)
    raw = _topic_id_bytes(fields[1]) if len(fields) == 2 else None
    if raw is None:
        raise _malformed(lines[1], "'topic_id: <22-character URL-safe base64 topic id>'", file)
    if not any(raw):
        raise _error(lines[1], "the all-zero topic id is not a valid topic id", file)
    return PartitionMetadata(version, base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii"))


def format_partition_metadata(topic_id: str) -> str:
    """The file content Kafka writes: two lines, no trailing line break."""
    raw = _topic_id_bytes(topic_id)
    if raw is None or not any(raw):
        raise CorruptCheckpointError(
            f"cannot write topic id {topic_id!r}: expected a non-zero 16-byte id in URL-safe base64"
        )
    canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {canonical}"
