"""Header-only reads of a segment (SegmentReader's `headers_only`): a local file's large v2 data
batches come as their header alone, their records skipped by their length; everything a whole read
checks is checked alike, and an object store's reads do not change."""

from __future__ import annotations

import struct

import pytest

from kafkalog import tuning
from kafkalog.codec.batch import RecordBatch, RecordBatchHeader, build_batch
from kafkalog.codec.control import build_end_txn_marker
from kafkalog.codec.legacy import build_legacy_batch
from kafkalog.codec.records import Record
from kafkalog.errors import CorruptBatchError, KafkaLogError, TruncatedDataError
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.segment import SegmentReader

BIG = tuning.SKIP_RECORDS_BYTES  # a record value this long makes a batch whose records are skipped


def batch(offset: int, value_bytes: int = 10, *, pid: int = -1, ts: int = 100) -> bytes:
    return build_batch(
        [Record(offset, ts, b"k", b"v" * value_bytes)], producer_id=pid, producer_epoch=0 if pid >= 0 else -1
    )


def mixed() -> list[bytes]:
    """Large and small v2 batches, a transaction's marker (a control batch) and legacy messages."""
    return [
        batch(0, BIG, pid=7, ts=110),
        batch(1, 100, ts=120),
        batch(2, 2 * BIG, ts=130),
        build_end_txn_marker(offset=3, timestamp=140, producer_id=7, producer_epoch=0, commit=True),
        batch(4, 3 * BIG, ts=150),
        build_legacy_batch([Record(5, 160, b"k", b"v" * BIG)], magic=1),
        batch(6, 5, ts=170),
        batch(7, BIG, ts=180),
    ]


class Counting(LogFileSystem):
    """A local filesystem that counts the bytes read (and can say it is an object store)."""

    def __init__(self, *, local: bool = True):
        super().__init__(LogFileSystem.for_path("/")[0].fs)
        self.is_local = local
        self.reads: list[int] = []

    def open_input(self, path: str):
        opened, reads = super().open_input(path), self.reads

        class Input:
            def read_at(self, length: int, position: int):
                data = opened.read_at(length, position)
                reads.append(len(data))
                return data

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                opened.__exit__(*exc)

        return Input()


def read(path, fs: LogFileSystem, *, headers_only: bool, end: int | None = None, **kwargs):
    size = path.stat().st_size if end is None else end
    return list(SegmentReader(fs, str(path), size, headers_only=headers_only, **kwargs))


def fields(batches):
    return [
        (p, b.last_offset, b.max_timestamp, b.size, b.producer_id, getattr(b, "is_control", False)) for p, b in batches
    ]


def test_large_v2_data_batches_come_as_headers_and_the_rest_whole(tmp_path):
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(mixed()))
    whole_fs, header_fs = Counting(), Counting()
    whole = read(log, whole_fs, headers_only=False, offset_range=(0, None), torn_tail_ok=False)
    headers = read(log, header_fs, headers_only=True, offset_range=(0, None), torn_tail_ok=False)
    assert fields(headers) == fields(whole)
    kinds = [type(b).__name__ for _, b in headers]
    assert kinds == [
        "RecordBatchHeader",
        "RecordBatch",
        "RecordBatchHeader",
        "RecordBatch",  # the marker: its control record is read
        "RecordBatchHeader",
        "LegacyBatch",  # legacy entries come whole
        "RecordBatch",
        "RecordBatch",  # the read after the legacy entry's, as large, holds the rest of the file
    ]
    assert sum(whole_fs.reads) == log.stat().st_size
    skipped = sum(b.size for _, b in headers if isinstance(b, RecordBatchHeader))
    assert sum(header_fs.reads) < log.stat().st_size - skipped + 8 * tuning.HEADER_READ_BYTES
    header = headers[0][1]
    assert isinstance(header, RecordBatch) and header.has_producer_id and header.producer_id == 7
    with pytest.raises(TypeError, match="only its header was read"):
        header.records()
    with pytest.raises(TypeError, match="only its header was read"):
        header.verify()


def test_an_object_store_reads_as_it_did(tmp_path):
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(mixed()))
    whole_fs, header_fs = Counting(local=False), Counting(local=False)
    whole = read(log, whole_fs, headers_only=False, chunk_size=64 * 1024)
    headers = read(log, header_fs, headers_only=True, chunk_size=64 * 1024)
    assert header_fs.reads == whole_fs.reads
    assert not any(isinstance(b, RecordBatchHeader) for _, b in headers)
    assert fields(headers) == fields(whole)


def errors(path, *, end: int | None = None, **kwargs) -> tuple[KafkaLogError, KafkaLogError]:
    """The error a whole read and a header-only read of `path` raise."""
    caught = []
    for headers_only in (False, True):
        with pytest.raises(KafkaLogError) as err:
            read(path, Counting(), headers_only=headers_only, end=end, **kwargs)
        caught.append(err.value)
    return caught[0], caught[1]


def where(err: KafkaLogError):
    return type(err), err.file, err.position, err.offset, str(err)


@pytest.mark.parametrize("keep", [30, 100, BIG])  # a cut in the header, after it, in the records
def test_a_torn_large_batch_is_the_same_error(tmp_path, keep):
    data = mixed()
    at = sum(map(len, data[:4]))  # the batch at offset 4, of 3 * BIG bytes
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(data[:4]) + data[4][:keep])
    whole, headers = errors(log, torn_tail_ok=False, offset_range=(0, None))
    assert isinstance(headers, TruncatedDataError) and where(headers) == where(whole)
    assert (headers.file, headers.position, headers.offset) == (str(log), at, 4)
    # where a torn tail is allowed (the active segment), the batches before it come, and nothing more
    torn = SegmentReader(Counting(), str(log), log.stat().st_size, headers_only=True)
    assert [b.last_offset for _, b in torn] == [0, 1, 2, 3]
    assert torn.truncated_tail is not None and torn.truncated_tail.position == at


def test_a_large_batch_whose_length_runs_past_the_end_is_a_torn_tail(tmp_path):
    data = mixed()[:3]
    at = len(data[0]) + len(data[1])
    damaged = bytearray(b"".join(data))
    struct.pack_into(">i", damaged, at + 8, len(data[2]) + 100)  # its length now runs past the file's end
    log = tmp_path / "0.log"
    log.write_bytes(bytes(damaged) + b"\0" * 50)
    whole, headers = errors(log, torn_tail_ok=False, offset_range=(0, None))
    assert isinstance(headers, TruncatedDataError) and where(headers) == where(whole)
    assert (headers.position, headers.offset) == (at, 2)


@pytest.mark.parametrize("length", [20, 48])  # below a legacy entry's minimum, and below a v2 header's
def test_a_bad_length_is_the_same_error(tmp_path, length):
    data = mixed()[:3]
    at = len(data[0]) + len(data[1])
    damaged = bytearray(b"".join(data))
    struct.pack_into(">i", damaged, at + 8, length)
    log = tmp_path / "0.log"
    log.write_bytes(bytes(damaged))
    whole, headers = errors(log, torn_tail_ok=False, offset_range=(0, None))
    assert isinstance(headers, CorruptBatchError) and where(headers) == where(whole)
    assert (headers.file, headers.position, headers.offset) == (str(log), at + 8, 2)


def test_offsets_going_backwards_after_a_skipped_batch_name_their_byte(tmp_path):
    data = [batch(0, BIG), batch(1, 10), batch(5, 2 * BIG), batch(3, BIG)]  # 3 after 5
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(data))
    whole, headers = errors(log, torn_tail_ok=False, offset_range=(0, None), chunk_size=4096)
    assert isinstance(headers, CorruptBatchError) and where(headers) == where(whole)
    assert (headers.file, headers.position, headers.offset) == (str(log), sum(map(len, data[:3])), 3)
    assert "do not come after the previous batch's last offset 5" in str(headers)


def test_a_file_shorter_than_listed_is_an_error_not_an_endless_read(tmp_path):
    data = mixed()[:3]
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(data))
    listed = log.stat().st_size + 4 * BIG  # listed before it was cut
    whole, headers = errors(log, end=listed, torn_tail_ok=False, offset_range=(0, None))
    assert isinstance(whole, TruncatedDataError) and (whole.file, whole.position) == (str(log), log.stat().st_size)
    assert isinstance(headers, TruncatedDataError) and (headers.file, headers.position) == (str(log), whole.position)
    assert "short of the" in str(headers) and headers.offset == 3  # the header-only read had read the batches


def test_a_replay_from_a_snapshot_reads_from_its_offset_index_entry_and_distrusts_a_damaged_one(tmp_path):
    """Kafka's rebuildProducerState reads the snapshot's segment from the offset index's entry at or
    below the snapshot's offset. The state is the one a replay of every batch makes; an entry that
    leads to a batch above that offset, or into a batch, reads the whole segment rather than skip any."""
    from kafkalog.operations.generate import GeneratorSpec, TopicSpec, generate
    from kafkalog.storage.partition import Partition
    from kafkalog.storage.producer_state import ProducerStateManager, replay_bytes, replay_partition

    spec = TopicSpec(
        "t", records=3000, index_interval_bytes=2048, idempotent_producers=2, transactional_producers=2, abort_ratio=0.3
    )
    generate(str(tmp_path), GeneratorSpec(seed=9, consumer_offsets=None, topics=[spec]))
    part_dir = tmp_path / "t-0"
    for old in part_dir.glob("*.snapshot"):
        old.unlink()
    part = Partition.open(*LogFileSystem.for_path(str(part_dir)))
    (segment,) = part.segments
    expected, end = replay_partition(part)  # no snapshot: every batch
    entries = segment.offset_index_entries
    assert len(entries) > 10
    middle = entries[len(entries) // 2]
    at = middle.offset + 3  # a snapshot in the middle of the log, a little past an index entry
    upto = ProducerStateManager()
    for _, b in segment.batches():
        if b.last_offset >= at:
            break
        upto.append(b)
    upto.map_end_offset = at
    (part_dir / f"{at:020d}.snapshot").write_bytes(upto.snapshot().to_bytes())
    index = part_dir / f"{0:020d}.index"
    intact = index.read_bytes()

    def replayed(index_bytes: bytes, snapshot_at: int = at):
        index.write_bytes(index_bytes)
        reopened = Partition.open(*LogFileSystem.for_path(str(part_dir)))
        reopened.snapshots = {o: e for o, e in reopened.snapshots.items() if o == snapshot_at}
        starts = []
        batches = type(segment).batches
        reopened.segments[0].batches = lambda start=0, **kw: (  # type: ignore[method-assign]
            starts.append(start) or batches(reopened.segments[0], start, **kw)
        )
        state, log_end = replay_partition(reopened)
        assert (state.snapshot(), log_end) == (expected.snapshot(), end)
        assert replay_bytes(reopened) in (segment.size, segment.size - starts[0])  # at most what it read
        return starts

    assert replayed(intact) == [middle.position]
    # a broker's snapshot at the log end: the read, and what replay_bytes says it costs, start at the last entry
    (part_dir / f"{end:020d}.snapshot").write_bytes(expected.snapshot().to_bytes())
    assert replayed(intact, end) == [entries[-1].position]
    assert replay_bytes(Partition.open(*LogFileSystem.for_path(str(part_dir)))) == segment.size - entries[-1].position
    i = len(entries) // 2
    later = entries[i + 2]
    lowered = bytearray(intact)  # the middle entry's offset now lower than its batch's: it would skip batches
    struct.pack_into(">ii", lowered, 8 * i, entries[i - 1].offset + 1, later.position)
    assert replayed(bytes(lowered)) == [later.position, 0]
    inside = bytearray(intact)  # an entry that leads into a batch
    struct.pack_into(">ii", inside, 8 * i, middle.offset, middle.position + 20)
    assert replayed(bytes(inside)) == [middle.position + 20, 0]


def test_one_batch_read_alone_at_its_position(tmp_path):
    """LogSegment.batch_at: the batch a scan's row or a header-only pass found, whole (its records, its
    CRC), from one read of its own; a position where no whole batch starts is an error naming it."""
    from kafkalog.storage.partition import Partition

    part_dir = tmp_path / "t-0"
    part_dir.mkdir()
    (part_dir / f"{0:020d}.log").write_bytes(b"".join(mixed()) + batch(8)[:30])  # a torn tail: the active segment
    (segment,) = Partition.open(*LogFileSystem.for_path(str(part_dir))).segments
    whole = list(segment.batches())
    for position, expected in whole:
        found = segment.batch_at(position)
        assert found.data == expected.data and found.is_valid()
        assert [r.offset for r in found.records()] == [r.offset for r in expected.records()]
    torn = whole[-1][0] + whole[-1][1].size
    with pytest.raises(CorruptBatchError) as caught:
        segment.batch_at(torn)
    assert (caught.value.file, caught.value.position) == (segment.log_path, torn)
