"""A segment that is not the active one must read whole: bytes after its last whole batch are lost
data, and the error names the file, the byte and the offset where the loss begins."""

from __future__ import annotations

import pytest

from kafkalog.errors import TruncatedDataError
from kafkalog.operations.generate import generate, preset
from kafkalog.storage.logdir import LogDir


@pytest.fixture
def rolled(tmp_path):
    """A partition of the small preset with rolled segments: (its directory, its first two segments)."""
    generate(str(tmp_path / "log"), preset("small", seed=3))
    part = LogDir.open(str(tmp_path / "log")).partition("orders", 0)
    assert len(part.segments) > 2
    return part.segments[0], part.segments[1]


@pytest.mark.parametrize("keep", [5, 20])  # no whole batch, and not even a base offset's 8 bytes
def test_a_cut_before_the_first_whole_batch_names_the_segments_first_offset(rolled, keep):
    first, _ = rolled
    with open(first.log_path, "r+b") as f:
        f.truncate(keep)
    cut = LogDir.open(first.log_path.rsplit("/", 2)[0]).partition("orders", 0).segments[0]
    with pytest.raises(TruncatedDataError) as caught:
        list(cut.batches())
    err = caught.value
    assert (err.file, err.position, err.offset) == (first.log_path, 0, first.base_offset)


def test_a_cut_after_whole_batches_names_the_offset_after_the_last_one(rolled):
    first, second = rolled
    batches = list(first.batches())
    position, last = batches[-1]
    with open(first.log_path, "r+b") as f:
        f.truncate(position + 5)
    cut = LogDir.open(first.log_path.rsplit("/", 2)[0]).partition("orders", 0).segments[0]
    with pytest.raises(TruncatedDataError) as caught:
        list(cut.batches())
    assert (caught.value.position, caught.value.offset) == (position, batches[-2][1].last_offset + 1)
    assert caught.value.offset == last.base_offset < second.base_offset


@pytest.mark.parametrize("chunk", [1000, 1 << 23])  # chunks that cut batches (read again at the next), and one read
def test_a_segment_read_through_a_hashing_filesystem_gives_its_files_sha256_without_another_open(rolled, chunk):
    """What a purge's rewrite reports of its source (spark/rewrite.py, the evidence's hash), read once:
    its reads in order, the bytes after its last whole batch read when it is closed."""
    import hashlib
    from dataclasses import replace

    from kafkalog.storage.fs import HashingFileSystem

    first, _ = rolled
    with open(first.log_path, "ab") as f:
        f.write(b"\0" * 7)  # bytes that are no batch: hashed all the same
    expected = [b.last_offset for _, b in first.batches()]
    opened = []
    hashing = HashingFileSystem(first.fs, [first.log_path])
    inner_open = hashing.inner.open_input
    hashing.inner.open_input = lambda path: (opened.append(path), inner_open(path))[1]
    read = replace(first, fs=hashing)
    assert hashing.sha256(first.log_path) is None  # not read yet
    assert [b.last_offset for _, b in read.reader(chunk_size=chunk)] == expected
    with open(first.log_path, "rb") as f:
        assert hashing.sha256(first.log_path) == hashlib.sha256(f.read()).hexdigest()
    assert opened == [first.log_path]
