"""Peak memory (resident set size, measured in a child process) of what decodes untrusted data:
a decompression bomb costs about the decompression limit, a large uncompressed record about its size.

Each child reads its input first, then records its peak RSS (VmHWM: ru_maxrss would also count the
forking parent's peak, which Linux carries across exec), does the work and reports how much the
peak grew: the bounds below are in multiples of the limit or the record, with room for
the interpreter's noise but well under what the code did before these bounds were set (a gzip bomb
held twice the limit, a large record's batch was copied before its records were read)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import lz4.block
import pytest
import snappy
import zstandard

from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.compression import Codec, _lz4_header_checksum
from kafkalog.codec.records import Record

MiB = 1 << 20
LIMIT = 32 * MiB
EXPANDED = 256 * MiB  # what the bombs expand to: eight times the limit


def _zeros_in_pieces(compressobj, size: int) -> bytes:
    zero = bytes(MiB)
    return b"".join([compressobj.compress(zero) for _ in range(size // MiB)] + [compressobj.flush()])


def gzip_bomb(size: int) -> bytes:
    return _zeros_in_pieces(zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), size)


def zstd_bomb(size: int) -> bytes:
    return _zeros_in_pieces(zstandard.ZstdCompressor(level=3).compressobj(), size)


def snappy_bomb(size: int) -> bytes:
    """snappy-java's xerial framing, 32 KiB chunks of zeros."""
    block = snappy.compress(bytes(32 * 1024))
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    return header + (struct.pack(">i", len(block)) + block) * (size // (32 * 1024))


def lz4_bomb(size: int) -> bytes:
    """Kafka's LZ4 frame: 64 KiB independent blocks of zeros, then the EndMark."""
    block = lz4.block.compress(bytes(64 * 1024), store_size=False)
    descriptor = b"\x60\x40"
    return (
        b"\x04\x22\x4d\x18"
        + descriptor
        + bytes((_lz4_header_checksum(descriptor),))
        + (struct.pack("<I", len(block)) + block) * (size // (64 * 1024))
        + bytes(4)
    )


BOMBS = {Codec.GZIP: gzip_bomb, Codec.ZSTD: zstd_bomb, Codec.SNAPPY: snappy_bomb, Codec.LZ4: lz4_bomb}

PEAK = """
def peak():  # bytes: this process's peak resident set size since it started (exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
"""

DECOMPRESS = (
    PEAK
    + """
import sys
from kafkalog.codec.compression import decompress
from kafkalog.errors import DecompressionLimitError
data = open(sys.argv[1], "rb").read()
before = peak()
try:
    print("ok", len(decompress(int(sys.argv[2]), data, limit=int(sys.argv[3]))))
except DecompressionLimitError:
    print("refused", 0)
print(peak() - before)
"""
)


def run_child(script: str, *args) -> list[str]:
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("codec", BOMBS, ids=[c.name for c in BOMBS])
def test_a_bomb_is_refused_holding_about_the_limit(tmp_path, codec):
    payload = BOMBS[codec](EXPANDED)
    assert len(payload) < LIMIT
    path = tmp_path / "payload"
    path.write_bytes(payload)
    outcome, _, grown = run_child(DECOMPRESS, path, int(codec), LIMIT)
    assert outcome == "refused"
    assert int(grown) < 1.5 * LIMIT, f"{codec.name}: peak grew by {int(grown) / MiB:.0f} MiB under a 32 MiB limit"


@pytest.mark.parametrize("codec", BOMBS, ids=[c.name for c in BOMBS])
def test_a_payload_within_the_limit_costs_at_most_twice_its_size(tmp_path, codec):
    size = 24 * MiB
    path = tmp_path / "payload"
    path.write_bytes(BOMBS[codec](size))
    outcome, length, grown = run_child(DECOMPRESS, path, int(codec), LIMIT)
    assert (outcome, int(length)) == ("ok", size)
    assert int(grown) < 2.5 * size, f"{codec.name}: peak grew by {int(grown) / MiB:.0f} MiB for {size // MiB} MiB"


DECODE = (
    PEAK
    + """
import sys
from kafkalog.codec.batch import RecordBatch
buf = open(sys.argv[1], "rb").read()
before = peak()
records = RecordBatch(buf).records()
print(len(records), len(records[0].value))
print(peak() - before)
"""
)


def test_a_large_uncompressed_record_is_decoded_without_copying_its_batch(tmp_path):
    size = 64 * MiB
    path = tmp_path / "batch"
    path.write_bytes(
        build_batch([Record(7, 1_700_000_000_000, b"k", os.urandom(1024) * (size // 1024))], base_offset=7)
    )
    count, length, grown = run_child(DECODE, path)
    assert (int(count), int(length)) == (1, size)
    # the value itself (one copy, the Record's bytes) and little else; a copy of the records section
    # first would double it
    assert int(grown) < 1.5 * size, f"peak grew by {int(grown) / MiB:.0f} MiB for a {size // MiB} MiB record"


@pytest.mark.parametrize("sizes", [[MiB + 5], [300_000, 800_000, 70_000], [2 * MiB, 0, 5]])
def test_large_records_read_in_place_equal_the_copying_reader(sizes):
    records = [
        Record(100 + i, 1_700_000_000_000 + i, b"key%d" % i, os.urandom(n), (("h", b"v"),)) for i, n in enumerate(sizes)
    ]
    data = build_batch(records, base_offset=100)
    in_place = RecordBatch(data).records()  # bytes: read where they lie when large
    copied = RecordBatch(bytearray(data)).records()  # any other buffer: from a copy of the section
    assert in_place == copied == records
    assert all(type(r.value) is bytes and type(r.key) is bytes for r in in_place)


def test_a_corrupt_large_record_fails_the_same_in_place():
    data = bytearray(build_batch([Record(0, 0, b"k", bytes(2 * MiB))]))
    struct.pack_into(">i", data, 57, 2)  # one record more than the section holds
    errors = []
    for buf in (bytes(data), data):
        with pytest.raises(Exception) as err:
            RecordBatch(buf).records()
        errors.append((type(err.value), str(err.value), err.value.position, err.value.offset))
    assert errors[0] == errors[1]
    assert errors[0][0].__name__ == "CorruptBatchError" and errors[0][2:] == (0, 0)
