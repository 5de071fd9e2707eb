"""Walking the batches of a record set (a segment's bytes, a fetch response), as Kafka's
FileLogInputStream does: the magic byte at +16 picks v2 or legacy; fewer than 17
remaining bytes, or a last batch whose declared size runs past the end, end the walk without
an error (a truncated tail is invisible to Kafka's readers) but are recorded so reports can name them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from ..errors import CorruptBatchError, UnsupportedFormatError
from .batch import LOG_OVERHEAD, RecordBatch
from .legacy import COMPRESSION_MASK as LEGACY_COMPRESSION_MASK
from .legacy import LegacyBatch

HEADER_SIZE_UP_TO_MAGIC = 17
MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: no log entry is smaller
_OFFSET_AND_SIZE = struct.Struct(">qi")

Batch = RecordBatch | LegacyBatch


class TruncatedTail(NamedTuple):
    """Bytes after the last whole batch: where they start, how many there are, what was declared."""

    position: int
    length: int
    declared_size: int | None


class BatchReader:
    """Iterates the batches of `buf[start:end]`; after iteration `end_position` is where the last
    whole batch ends and `truncated_tail` describes any bytes after it."""

    def __init__(self, buf, start: int = 0, end: int | None = None):
        self.buf = buf
        self.start = start
        self.end = len(buf) if end is None else end
        self.end_position = start
        self.truncated_tail: TruncatedTail | None = None

    def __iter__(self) -> Iterator[Batch]:
        buf, pos, end = self.buf, self.start, self.end
        view = buf if self.end == len(buf) else memoryview(buf)[:end]
        while end - pos >= HEADER_SIZE_UP_TO_MAGIC:
            offset, size = _OFFSET_AND_SIZE.unpack_from(buf, pos)
            if size < MIN_RECORD_OVERHEAD:
                raise CorruptBatchError(
                    f"record size {size} is smaller than the minimum record overhead {MIN_RECORD_OVERHEAD}",
                    position=pos + 8,
                    offset=offset,
                )
            if pos + LOG_OVERHEAD + size > end:
                self.truncated_tail = TruncatedTail(pos, end - pos, LOG_OVERHEAD + size)
                return
            magic = buf[pos + 16]
            batch: Batch
            if magic == 2:
                batch = RecordBatch(view, pos)
            elif magic in (0, 1):
                batch = LegacyBatch(view, pos)
            else:
                raise UnsupportedFormatError(
                    f"unknown magic byte {magic}: expected 0, 1 or 2", position=pos + 16, offset=offset
                )
            yield batch
            pos += LOG_OVERHEAD + size
            self.end_position = pos
        if pos < end:
            self.truncated_tail = TruncatedTail(pos, end - pos, None)


def header_first_offset(head) -> int | None:
    """The first offset a batch's first 18 bytes tell: a v2 batch's base offset, or a plain legacy
    message's offset; None for a legacy compressed wrapper (which names only its last offset), an
    unknown magic, or fewer bytes."""
    if len(head) < HEADER_SIZE_UP_TO_MAGIC:
        return None
    offset, magic = _OFFSET_AND_SIZE.unpack_from(head, 0)[0], head[16]
    if magic == 2:
        return offset
    if magic in (0, 1) and len(head) > 17 and not head[17] & LEGACY_COMPRESSION_MASK:
        return offset
    return None


def iter_batches(buf, start: int = 0, end: int | None = None) -> Iterator[Batch]:
    """The batches of a record set; see BatchReader for the truncated-tail rule."""
    return iter(BatchReader(buf, start, end))
