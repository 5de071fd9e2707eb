"""Producer-state snapshots (`<offset>.snapshot`, Kafka's ProducerStateManager format).

Layout: version int16 = 1, CRC-32C (uint32) of every byte from offset 6 to the end, entry count
int32, then 46-byte entries. Kafka deletes a snapshot that fails any check and falls back to the
previous one, so every failure here is a CorruptSnapshotError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from ..errors import CorruptSnapshotError

VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
CRC_START = 6  # the CRC covers the count and the entries, not the version or itself
HEADER_SIZE = _HEADER.size  # 10
ENTRY_SIZE = _ENTRY.size  # 46


class ProducerStateEntry(NamedTuple):
    """One producer's state. The defaults are Kafka's "none" values: a producer with no batch in
    the log (last_offset -1) and no open transaction (current_txn_first_offset -1)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_offset: int = -1  # last data offset of the producer's last batch
    offset_delta: int = 0  # lastOffset - firstOffset of that batch
    timestamp: int = -1  # max timestamp of the producer's last entry
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


@dataclass
class ProducerSnapshot:
    """The producer state covering every batch below `offset` (the number in the file name)."""

    offset: int
    entries: list[ProducerStateEntry] = field(default_factory=list)

    @classmethod
    def from_bytes(cls, data: bytes, offset: int, file: str | None = None) -> ProducerSnapshot:
        if len(data) < HEADER_SIZE:
            raise CorruptSnapshotError(
                f"snapshot is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte "
                "header (version, CRC, entry count)",
                file=file,
                position=0,
            )
        version, stored_crc, count = _HEADER.unpack_from(data)
        if version != VERSION:
            raise CorruptSnapshotError(f"snapshot version {version}, expected {VERSION}", file=file, position=0)
        available = (len(data) - HEADER_SIZE) // ENTRY_SIZE
        if not 0 <= count <= available:
            raise CorruptSnapshotError(
                f"snapshot declares {count} entries but its {len(data)} bytes hold "
                f"{available} entries of {ENTRY_SIZE} bytes",
                file=file,
                position=CRC_START,
            )
        # Like Kafka, bytes after the last entry are accepted: the CRC still covers them.
        computed_crc = crc32c.crc32c(memoryview(data)[CRC_START:])
        if stored_crc != computed_crc:
            raise CorruptSnapshotError(
                f"snapshot CRC-32C is {stored_crc:#010x}, the bytes from offset "
                f"{CRC_START} to the end give {computed_crc:#010x}",
                file=file,
                position=2,
            )
        entries = [ProducerStateEntry(*_ENTRY.unpack_from(data, HEADER_SIZE + i * ENTRY_SIZE)) for i in range(count)]
        return cls(offset, entries)

    def to_bytes(self) -> bytes:
        body = bytearray(struct.pack(">i", len(self.entries)))
        for entry in self.entries:
            body += _ENTRY.pack(*entry)
        return struct.pack(">hI", VERSION, crc32c.crc32c(body)) + bytes(body)
