"""The KRaft files of `__cluster_metadata-0`: its snapshots (`<offset>-<epoch>.checkpoint`) and its
`quorum-state`, and the metadata records a broker replays from them and the log. kafkalog reads
them and never writes them.

A snapshot is a file of record batches (FileRawSnapshotReader): its first batch is a control batch
whose record is a SNAPSHOT_HEADER, its last a control batch whose record is a SNAPSHOT_FOOTER
(RecordsSnapshotWriter writes them; KRaft's readers require them). `quorum-state` is one line of
JSON (FileQuorumStateStore): QuorumStateData's fields and `data_version`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from ..codec.batch import RecordBatch
from ..codec.control import ControlType, control_record
from ..codec.metadata_records import decode_metadata_record
from ..errors import CorruptBatchError, CorruptSnapshotError, CrcMismatchError, KafkaLogError
from .fs import FileEntry, LogFileSystem
from .partition import Partition
from .segment import SegmentReader


def snapshot_problems(fs: LogFileSystem, entry: FileEntry) -> Iterator[KafkaLogError]:
    """What KRaft's snapshot reader would refuse in the snapshot file `entry`, each located in the
    file: a batch whose CRC does not match, bytes after the last whole batch, a first batch that is
    not the header, a last batch that is not the footer, a header or footer anywhere else. A batch
    that cannot be walked at all ends the check (it is the one problem reported after it)."""
    reader = SegmentReader(fs, entry.path, entry.size)
    kinds: list[tuple[int, int, ControlType | None]] = []  # (position, base offset, control type)
    try:
        for position, batch in reader:
            if not batch.is_valid():
                yield CorruptBatchError(
                    "snapshot batch CRC does not match; expected the CRC-32C of the batch",
                    file=entry.path,
                    position=position,
                    offset=batch.base_offset,
                )
                kinds.append((position, batch.base_offset, None))
                continue
            ctl = control_record(batch) if batch.is_control and isinstance(batch, RecordBatch) else None
            kinds.append((position, batch.base_offset, None if ctl is None else ctl.type))
    except KafkaLogError as err:
        yield err.located(file=entry.path)
        return
    if reader.truncated_tail is not None:
        tail = reader.truncated_tail
        yield CorruptBatchError(
            f"{tail.length} bytes after the last whole batch; expected the file to end with the footer",
            file=entry.path,
            position=tail.position,
        )
    if not kinds:
        yield CorruptSnapshotError("empty snapshot; expected a header batch and a footer batch", file=entry.path)
        return
    for i, (position, offset, kind) in enumerate(kinds):
        want = ControlType.SNAPSHOT_HEADER if i == 0 else ControlType.SNAPSHOT_FOOTER if i == len(kinds) - 1 else None
        if want is not None and kind != want:
            where = "first" if i == 0 else "last"
            yield CorruptSnapshotError(
                f"the {where} batch is not a {want.name} control batch; KRaft requires one there",
                file=entry.path,
                position=position,
                offset=offset,
            )
        elif want is None and kind in (ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER):
            yield CorruptSnapshotError(
                f"a {kind.name} control batch inside the snapshot; expected one only at its start or end",
                file=entry.path,
                position=position,
                offset=offset,
            )


def read_quorum_state(data: bytes, file: str) -> dict:
    """The fields of a `quorum-state` file (its one JSON object); anything else raises
    CorruptSnapshotError naming the file."""
    try:
        state = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CorruptSnapshotError(f"not a JSON object: {err}", file=file, position=0) from None
    if not isinstance(state, dict) or not isinstance(state.get("data_version"), int):
        raise CorruptSnapshotError("expected a JSON object with an integer 'data_version'", file=file, position=0)
    return state


def metadata_records(part: Partition) -> Iterator[tuple[str, int, dict]]:
    """(file, offset, decoded record) of each metadata record a broker that starts on `part` (a
    `__cluster_metadata-0`) replays: the latest snapshot's records, then the log's from the
    snapshot's end offset (KafkaRaftClient hands a new listener the latest snapshot, then the log).
    Control batches (snapshot header and footer, leader changes, voters) hold no metadata records.
    A log that starts above the latest snapshot's end (or above 0 without a snapshot) lacks records
    Kafka needs: CorruptSnapshotError, as KafkaMetadataLog refuses to load it. Every batch's CRC is
    checked; a torn batch at the end of the log, which Kafka truncates, is not read."""
    start = 0
    if part.kraft_snapshots:
        (start, _), entry = max(part.kraft_snapshots.items())
        yield from _file_records(part.fs, entry.path, entry.size, 0)
    first = part.segments[0].base_offset if part.segments else start
    if first > start:
        raise CorruptSnapshotError(
            f"the metadata log starts at offset {first} but "
            + (f"the latest snapshot ends at offset {start}" if part.kraft_snapshots else "there is no snapshot")
            + ": the records before it are lost (Kafka refuses to load the metadata log)",
            file=part.segments[0].log_path,
        )
    for segment in part.segments:
        if segment.next_base_offset is None or segment.next_base_offset > start:
            yield from _file_records(part.fs, segment.log_path, segment.size, start)


def _file_records(fs: LogFileSystem, path: str, size: int, start: int) -> Iterator[tuple[str, int, dict]]:
    """(path, offset, decoded record) of the data records at or above offset `start` in a file of
    batches. An error names the batch's position in the file and the record's offset."""
    for position, batch in SegmentReader(fs, path, size):
        if batch.last_offset < start or batch.is_control:
            continue
        if not isinstance(batch, RecordBatch):
            problem = f"a v{batch.magic} batch; KRaft writes only v2 batches"
            raise CorruptBatchError(problem, file=path, position=position, offset=batch.last_offset)
        if not batch.is_valid():
            problem = "batch CRC does not match; expected the CRC-32C of the batch"
            raise CrcMismatchError(problem, file=path, position=position, offset=batch.last_offset)
        for record in batch.records():
            if record.offset < start:
                continue
            try:
                decoded = decode_metadata_record(record.value)
            except KafkaLogError as err:
                located = err.located(file=path, offset=record.offset)
                located.position = position  # the batch's: the codec's position is inside the record's value
                raise located from None
            yield path, record.offset, decoded
