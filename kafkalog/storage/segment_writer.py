"""The broker's append path for one segment, offline (Kafka's LogSegment.append and its indexes).

`SegmentWriter` writes one segment: it streams batches to the `.log` file and, on close, writes the
`.index` and `.timeindex` that Kafka's segment recovery would build for them, plus a `.txnindex` when
the segment holds ABORT markers. Compaction uses it with the `.cleaned` suffix; log_writer.py's
`PartitionWriter` rolls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import tuning
from ..codec.batch import (
    NO_TIMESTAMP,
)
from ..codec.reader import Batch, BatchReader
from ..errors import KafkaLogError
from ..rules.aborted_txn import AbortedTxn
from .fs import LogFileSystem
from .index import DEFAULT_INDEX_INTERVAL_BYTES, BatchSummary, IndexBuilder, OffsetIndex, TimeIndex, relative_offset
from .naming import segment_file_name
from .txnindex import TransactionIndex


class UnexpectedAppendOffsetError(KafkaLogError):
    """A batch whose offsets do not come after what the segment or log already holds."""


# -- one segment ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrittenSegment:
    """What `SegmentWriter.close` wrote. `files` maps a kind ('.log', '.index', '.timeindex',
    '.txnindex') to its path; the paths carry the writer's suffix."""

    base_offset: int
    size: int
    next_offset: int  # last offset + 1, or the base offset of an empty segment
    max_timestamp: int  # -1 when no batch has a timestamp
    batch_count: int
    files: dict
    offset_index: OffsetIndex
    time_index: TimeIndex
    txn_index: TransactionIndex
    mtime_ms: int | None

    @property
    def log_path(self) -> str:
        return self.files[".log"]


class SegmentWriter:
    """Writes the segment based at `base_offset` into directory `dir`: `<base>.log<suffix>` and its
    index files. Append batches in offset order, then `close()`; `abort()` removes everything."""

    def __init__(
        self,
        fs: LogFileSystem,
        dir: str,
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        suffix: str = "",
    ):
        self.fs = fs
        self.dir = dir
        self.base_offset = base_offset
        self.suffix = suffix
        self.log_path = self.path(".log")
        self.batches: list[BatchSummary] = []
        self.txn_index = TransactionIndex(base_offset, file=self.path(".txnindex"))
        self._indexes = IndexBuilder(base_offset, index_interval_bytes, file=self.log_path)
        self._size = 0
        self._last_offset: int | None = None
        self._max_timestamp = NO_TIMESTAMP
        self._first_batch_max_timestamp: int | None = None
        self._pending = bytearray()
        self._closed = False
        self._out = fs.open_output(self.log_path)

    def path(self, kind: str) -> str:
        return self.fs.join(self.dir, segment_file_name(self.base_offset, kind + self.suffix))

    # -- state ------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    @property
    def next_offset(self) -> int:
        return self.base_offset if self._last_offset is None else self._last_offset + 1

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def first_batch_max_timestamp(self) -> int | None:
        """The first batch's max timestamp: what time-based roll measures from."""
        return self._first_batch_max_timestamp

    @property
    def offset_index_entries(self) -> int:
        return len(self._indexes.offset_index.entries)

    @property
    def time_index_entries(self) -> int:
        return len(self._indexes.time_index.entries)

    # -- appending --------------------------------------------------------------------------------
    def append(self, data: bytes | bytearray, batches: Sequence[Batch] | None = None) -> list[BatchSummary]:
        """Append a record set (one or more whole batches, v2 or legacy). Every batch is checked
        before any byte is written, so a refused set leaves the segment as it was. `batches` may
        pass the set already parsed."""
        self._check_open()
        if batches is None:
            batches = parse_record_set(data, file=self.log_path)
        summaries = self._summaries(batches)
        self._pending += data
        if len(self._pending) >= tuning.WRITE_BUFFER_BYTES:
            self._flush()
        for summary in summaries:
            self._indexes.append(summary)
            if self._first_batch_max_timestamp is None:
                self._first_batch_max_timestamp = summary.max_timestamp
            self._max_timestamp = max(self._max_timestamp, summary.max_timestamp)
        self.batches += summaries
        self._size += len(data)
        self._last_offset = summaries[-1].last_offset
        return summaries

    def _summaries(self, batches: Sequence[Batch]) -> list[BatchSummary]:
        summaries = []
        previous = self._last_offset
        position = self._size
        for batch in batches:
            base, last = batch.base_offset, batch.last_offset
            at = position
            if previous is not None and base <= previous:
                raise UnexpectedAppendOffsetError(
                    f"batch offsets {base}..{last} do not come after the segment's last offset {previous}",
                    file=self.log_path,
                    position=at,
                    offset=base,
                )
            if last < base:
                raise UnexpectedAppendOffsetError(
                    f"batch last offset {last} is below its base offset {base}",
                    file=self.log_path,
                    position=at,
                    offset=base,
                )
            # Both ends must be expressible relative to the segment base (Kafka's offset overflow check).
            relative_offset(base, self.base_offset, file=self.log_path, position=at)
            relative_offset(last, self.base_offset, file=self.log_path, position=at)
            summaries.append(BatchSummary(at, batch.size, last, batch.max_timestamp))
            previous = last
            position += batch.size
        return summaries

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction whose ABORT marker is in this segment."""
        self._check_open()
        if not self.base_offset <= txn.last_offset < self.next_offset:
            raise UnexpectedAppendOffsetError(
                f"the ABORT marker at offset {txn.last_offset} is not in this segment "
                f"[{self.base_offset}, {self.next_offset})",
                file=self.txn_index.file,
                offset=txn.last_offset,
            )
        self.txn_index.append(txn)

    # -- finishing --------------------------------------------------------------------------------
    def close(self, mtime_ms: int | None = None) -> WrittenSegment:
        """Finish the `.log` and write the indexes (trimmed, with the final time-index entry); the
        `.txnindex` only when it has entries, as Kafka creates it lazily."""
        self._check_open()
        self._flush()
        self._out.close()
        self._closed = True
        self.fs.fsync(self.log_path)
        offset_index, time_index = self._indexes.finish()
        files = {".log": self.log_path, ".index": self.path(".index"), ".timeindex": self.path(".timeindex")}
        self.fs.write_bytes(files[".index"], offset_index.to_bytes())
        self.fs.write_bytes(files[".timeindex"], time_index.to_bytes())
        if self.txn_index.entries:
            files[".txnindex"] = self.path(".txnindex")  # the file self.txn_index was made with
            self.fs.write_bytes(files[".txnindex"], self.txn_index.to_bytes())
        if mtime_ms is not None:
            for path in files.values():
                self.fs.set_mtime(path, mtime_ms)
        return WrittenSegment(
            self.base_offset,
            self._size,
            self.next_offset,
            self._max_timestamp,
            len(self.batches),
            files,
            offset_index,
            time_index,
            self.txn_index,
            mtime_ms,
        )

    def abort(self) -> None:
        """Stop and delete whatever this writer created."""
        if not self._closed:
            self._closed = True
            self._out.close()
        for kind in (".log", ".index", ".timeindex", ".txnindex"):
            path = self.path(kind)
            if self.fs.exists(path):
                self.fs.delete(path)

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()

    def _flush(self) -> None:
        if self._pending:
            self._out.write(self._pending)  # the buffer itself: no copy of it first
            self._pending.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"segment writer for {self.log_path} is closed")


def parse_record_set(data: bytes | bytearray, file: str | None = None) -> list[Batch]:
    """The whole batches of `data`; a record set that is empty or ends inside a batch is refused."""
    reader = BatchReader(data)
    try:
        batches = list(reader)
    except KafkaLogError as err:
        raise err.located(file=file) from None
    if reader.truncated_tail is not None:
        tail = reader.truncated_tail
        raise UnexpectedAppendOffsetError(
            f"the record set ends inside a batch: {tail.length} bytes after the last whole batch",
            file=file,
            position=tail.position,
        )
    if not batches:
        raise UnexpectedAppendOffsetError("the record set holds no batch", file=file)
    return batches
