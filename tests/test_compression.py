"""Compression codecs (spec §1.10, §2.3): round trips, Kafka's framing quirks, cross-checks with
kafka-python, the decompression limit and hostile input."""

import gzip
import random
import struct
import tracemalloc
import zlib

import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from kafkalog.codec.compression import DEFAULT_DECOMPRESSION_LIMIT, Codec, compress, decompress
from kafkalog.errors import (
    CorruptBatchError,
    DecompressionLimitError,
    KafkaLogError,
    TruncatedDataError,
    UnsupportedFormatError,
)

# every codec with every message format that allows it (zstd needs magic 2)
CODEC_MAGICS = [(codec, magic) for codec in Codec for magic in (0, 1, 2) if codec != Codec.ZSTD or magic == 2]
COMPRESSED = [codec for codec in Codec if codec != Codec.NONE]

XERIAL_HEADER = bytes.fromhex("82534e4150505900 00000001 00000001")
LZ4_MAGIC = bytes.fromhex("04224d18")
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _repeat(unit: bytes, size: int) -> bytes:
    return (unit * (size // len(unit) + 1))[:size]


# small strings, then compressible and incompressible data (lz4 stores those blocks uncompressed), often
# over 64 KiB so that several lz4 blocks and snappy chunks are written
sizes = st.one_of(st.integers(0, 70_000), st.integers(65_537, 200_000))
payloads = st.one_of(
    st.binary(max_size=300),
    st.builds(_repeat, st.binary(min_size=1, max_size=40), sizes),
    st.builds(lambda seed, size: random.Random(seed).randbytes(size), st.integers(0, 2**32), sizes),
)


def lz4_blocks(frame: bytes) -> list[tuple[bool, int]]:
    """(stored uncompressed, size) of each block of a frame without optional fields."""
    blocks, pos = [], 7
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        if word == 0:
            assert pos + 4 == len(frame)
            return blocks
        blocks.append((bool(word & 0x80000000), word & 0x7FFFFFFF))
        pos += 4 + (word & 0x7FFFFFFF)


def xerial_chunks(stream: bytes) -> list[bytes]:
    chunks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        chunks.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return chunks


def header_checksum(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF


def _zstd_streamed(data: bytes) -> bytes:
    """A frame without content size, as zstd-jni's stream writes it."""
    streamed = zstandard.ZstdCompressor(level=3).compressobj()
    return streamed.compress(data) + streamed.flush()


# --- round trips and codec dispatch -------------------------------------------------------------


@pytest.mark.parametrize("codec,magic", CODEC_MAGICS)
@FAST
@given(data=payloads)
def test_round_trip(codec, magic, data):
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


@pytest.mark.parametrize("codec,magic", CODEC_MAGICS)
def test_round_trip_accepts_any_bytes_like(codec, magic):
    data = _repeat(b"kafka", 100_000)
    packed = compress(codec, bytearray(data), magic=magic)
    assert decompress(codec, memoryview(packed), magic=magic) == data
    assert decompress(codec, bytearray(packed), magic=magic) == data


def test_none_returns_data_unchanged():
    assert compress(Codec.NONE, b"abc") == b"abc"
    assert decompress(Codec.NONE, b"abc") == b"abc"


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id):
    with pytest.raises(UnsupportedFormatError, match=f"Unknown compression type id {codec_id}"):
        compress(codec_id, b"x")
    with pytest.raises(UnsupportedFormatError, match=f"Unknown compression type id {codec_id}"):
        decompress(codec_id, b"x")


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_requires_magic_2(magic):
    with pytest.raises(UnsupportedFormatError):
        compress(Codec.ZSTD, b"x", magic=magic)
    with pytest.raises(UnsupportedFormatError):
        decompress(Codec.ZSTD, zstandard.ZstdCompressor().compress(b"x"), magic=magic)


# --- gzip -----------------------------------------------------------------------------------------


def test_gzip_writes_one_deterministic_member():
    data = _repeat(b"record", 50_000)
    packed = compress(Codec.GZIP, data)
    assert packed[:4] == b"\x1f\x8b\x08\x00" and packed[4:8] == bytes(4)  # deflate, no flags, mtime 0
    assert packed == compress(Codec.GZIP, data)
    assert zlib.decompressobj(31).decompress(packed) == data  # a single member holds everything


def test_gzip_reads_concatenated_members_and_ignores_trailing_bytes():
    assert decompress(Codec.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert decompress(Codec.GZIP, gzip.compress(b"ab") + bytes(8)) == b"ab"  # GZIPInputStream ignores them


def test_gzip_corrupt_member_after_the_first_is_rejected():
    second = bytearray(gzip.compress(b"cd" * 100))
    second[-8] ^= 0xFF  # CRC-32 of the second member
    with pytest.raises(CorruptBatchError):
        decompress(Codec.GZIP, gzip.compress(b"ab") + bytes(second))


# --- snappy ---------------------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_in_32k_chunks():
    data = random.Random(1).randbytes(100_000)
    packed = compress(Codec.SNAPPY, data)
    assert packed.startswith(XERIAL_HEADER)
    chunks = xerial_chunks(packed)
    assert [len(snappy.decompress(chunk)) for chunk in chunks] == [32768, 32768, 32768, 1696]
    assert compress(Codec.SNAPPY, b"") == XERIAL_HEADER
    assert decompress(Codec.SNAPPY, XERIAL_HEADER) == b""


@given(data=st.binary(max_size=2000))
@settings(max_examples=50)
def test_snappy_reads_a_single_raw_block(data):
    assert decompress(Codec.SNAPPY, snappy.compress(data)) == data


def test_snappy_rejects_google_framing():
    framed = snappy.StreamCompressor().add_chunk(b"hello kafka" * 100)
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
    with pytest.raises(CorruptBatchError):
        decompress(Codec.SNAPPY, framed)


def test_snappy_xerial_reader_quirks():
    one, two = compress(Codec.SNAPPY, b"first "), compress(Codec.SNAPPY, b"second")
    assert decompress(Codec.SNAPPY, one + two) == b"first second"  # snappy-java skips a second header
    assert decompress(Codec.SNAPPY, one + b"\x00\x00\x01") == b"first "  # < 4 trailing bytes end the stream
    with pytest.raises(CorruptBatchError):
        decompress(Codec.SNAPPY, XERIAL_HEADER[:8] + struct.pack(">ii", 0, 1))  # version 0
    with pytest.raises(TruncatedDataError) as caught:
        decompress(Codec.SNAPPY, one[:-1])
    assert caught.value.position == 16
    with pytest.raises(CorruptBatchError):
        decompress(Codec.SNAPPY, XERIAL_HEADER + struct.pack(">i", 0))  # an empty chunk is no snappy block


# --- lz4 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_writes_kafka_frame(magic):
    data = random.Random(2).randbytes(70_000) + bytes(100_000)
    packed = compress(Codec.LZ4, data, magic=magic)
    assert packed[:6] == LZ4_MAGIC + b"\x60\x40"
    assert packed[6] == header_checksum(b"\x60\x40") == 0x82
    # 64 KiB blocks compressed independently; the incompressible one is stored with the high bit set
    assert lz4_blocks(packed)[0] == (True, 65536)
    assert [stored for stored, _ in lz4_blocks(packed)] == [True, False, False]
    assert lz4.frame.decompress(packed) == data


def test_lz4_magic_0_writes_the_broken_header_checksum():
    data = b"legacy wrapper" * 10
    packed = compress(Codec.LZ4, data, magic=0)
    assert packed[:6] == LZ4_MAGIC + b"\x60\x40"
    assert packed[6] == header_checksum(LZ4_MAGIC + b"\x60\x40") != header_checksum(b"\x60\x40")
    assert decompress(Codec.LZ4, packed, magic=0) == data
    with pytest.raises(CorruptBatchError, match="checksum"):
        decompress(Codec.LZ4, packed, magic=1)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_lz4_wrong_header_checksum_is_only_accepted_for_magic_0(magic):
    packed = bytearray(compress(Codec.LZ4, b"payload" * 10, magic=2))
    packed[6] ^= 0x55
    if magic == 0:
        assert decompress(Codec.LZ4, packed, magic=0) == b"payload" * 10
    else:
        with pytest.raises(CorruptBatchError) as caught:
            decompress(Codec.LZ4, packed, magic=magic)
        assert caught.value.position == 6


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize(
    "options",
    [
        {},  # python-lz4 stores the content size by default: skipped, and covered by HC
        {"block_checksum": True},
        {"content_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"block_size": lz4.frame.BLOCKSIZE_MAX256KB, "store_size": False},
    ],
)
def test_lz4_reads_independent_frames_from_python_lz4(magic, options):
    data = random.Random(3).randbytes(50_000) + _repeat(b"abc", 300_000)
    assert decompress(Codec.LZ4, lz4.frame.compress(data, block_linked=False, **options), magic=magic) == data


def test_lz4_rejects_linked_blocks():
    # more than one block: liblz4 marks a single-block frame independent even when asked for links
    linked = lz4.frame.compress(b"data" * 100_000, block_linked=True)
    assert not linked[4] & 0x20
    with pytest.raises(CorruptBatchError, match="Dependent block stream is unsupported"):
        decompress(Codec.LZ4, linked)


def test_lz4_checks_block_checksums():
    packed = bytearray(lz4.frame.compress(b"x" * 1000, block_linked=False, block_checksum=True, store_size=False))
    packed[-5] ^= 0x01  # last byte of the only block checksum
    with pytest.raises(CorruptBatchError, match="block checksum"):
        decompress(Codec.LZ4, packed)


def _frame(flg: int, bd: int, body: bytes = bytes(4)) -> bytes:
    descriptor = bytes((flg, bd))
    return LZ4_MAGIC + descriptor + bytes((header_checksum(descriptor),)) + body


@pytest.mark.parametrize(
    "flg,bd,message",
    [
        (0x61, 0x40, "reserved"),
        (0x62, 0x40, "reserved"),
        (0x40, 0x40, "Dependent block stream"),
        (0xA0, 0x40, "version"),
        (0x20, 0x40, "version"),
        (0x60, 0x30, "BD"),
        (0x60, 0x41, "BD"),
        (0x60, 0xC0, "BD"),
    ],
)
def test_lz4_rejects_what_kafka_rejects(flg, bd, message):
    with pytest.raises(CorruptBatchError, match=message):
        decompress(Codec.LZ4, _frame(flg, bd))


def test_lz4_block_sizes_and_end_mark():
    stored_block = struct.pack("<I", 0x80000000 | 3) + b"abc"
    assert decompress(Codec.LZ4, _frame(0x60, 0x70, stored_block + bytes(4))) == b"abc"  # 4 MiB maximum
    assert decompress(Codec.LZ4, _frame(0x60, 0x40) + b"trailing bytes") == b""  # reading stops at EndMark
    too_big = _frame(0x60, 0x40, struct.pack("<I", 0x80000000 | 65537) + bytes(65537) + bytes(4))
    with pytest.raises(CorruptBatchError, match="exceeds") as caught:
        decompress(Codec.LZ4, too_big)
    assert caught.value.position == 7
    with pytest.raises(TruncatedDataError, match="EndMark"):
        decompress(Codec.LZ4, _frame(0x60, 0x40, b""))
    with pytest.raises(TruncatedDataError, match="content checksum"):
        decompress(Codec.LZ4, _frame(0x64, 0x40, bytes(4)))


# --- zstd -----------------------------------------------------------------------------------------


def test_zstd_reads_several_frames_and_skippable_frames():
    cctx = zstandard.ZstdCompressor()
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    stream = cctx.compress(b"one ") + skippable + cctx.compress(b"two" * 10_000)
    assert decompress(Codec.ZSTD, stream) == b"one " + b"two" * 10_000
    assert decompress(Codec.ZSTD, b"") == b""  # zstd-jni reads no input as an empty stream


def test_zstd_reads_streamed_frames_without_content_size():
    data = _repeat(b"streamed", 300_000)
    assert decompress(Codec.ZSTD, _zstd_streamed(data)) == data


def test_zstd_rejects_trailing_garbage_and_truncation():
    packed = zstandard.ZstdCompressor().compress(b"abc" * 1000)
    with pytest.raises(CorruptBatchError):
        decompress(Codec.ZSTD, packed + b"garbage!")
    with pytest.raises(TruncatedDataError):
        decompress(Codec.ZSTD, packed[:-1])


# --- cross-check with kafka-python's codecs -------------------------------------------------------

KAFKA_PYTHON = {
    Codec.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
    Codec.SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
    Codec.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
    Codec.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
}


@pytest.mark.parametrize("codec", COMPRESSED)
@FAST
@given(data=payloads)
def test_kafka_python_reads_ours_and_we_read_theirs(codec, data):
    encode, decode = KAFKA_PYTHON[codec]
    assert decompress(codec, encode(data)) == data
    # kafka-python takes a bare 16-byte xerial header (our empty stream) for a raw block, unlike snappy-java
    if codec != Codec.SNAPPY or data:
        assert decode(compress(codec, data)) == data


@FAST
@given(data=payloads)
def test_kafka_python_old_lz4_framing_matches_magic_0(data):
    assert decompress(Codec.LZ4, kafka_codec.lz4_encode_old_kafka(data), magic=0) == data
    assert kafka_codec.lz4_decode_old_kafka(compress(Codec.LZ4, data, magic=0)) == data


def test_kafka_python_snappy_raw_block():
    data = b"not xerial" * 100
    assert decompress(Codec.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data


# --- decompression limit ---------------------------------------------------------------------------

LIMIT = 1_000_000
ZEROS = bytes(10_000_000)
MiB = 1024 * 1024

# name -> (codec, 10 MB of zeros compressed, memory allowed beyond the limit): zlib may briefly hold its
# output twice, a zstd feed yields up to ~2 MiB, and python-lz4 decompresses a block into a buffer of the
# frame's maximum block size before copying it out, so a 4 MiB-block frame may hold 8 MiB at once
BOMBS = {codec.name: (codec, compress(codec, ZEROS), 2 * MiB) for codec in COMPRESSED}
BOMBS["raw snappy block"] = (Codec.SNAPPY, snappy.compress(ZEROS), 2 * MiB)
BOMBS["zstd streamed"] = (Codec.ZSTD, _zstd_streamed(ZEROS), 2 * MiB)
BOMBS["lz4 4 MiB blocks"] = (
    Codec.LZ4,
    lz4.frame.compress(ZEROS, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB),
    8 * MiB,
)


@pytest.mark.parametrize("codec,packed,overshoot", BOMBS.values(), ids=BOMBS.keys())
def test_limit_stops_a_decompression_bomb_early(codec, packed, overshoot):
    assert len(packed) < LIMIT
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError, match=str(LIMIT)):
            decompress(codec, packed, limit=LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < LIMIT + overshoot < len(ZEROS)


@pytest.mark.parametrize("codec,magic", CODEC_MAGICS)
def test_limit_is_inclusive(codec, magic):
    data = _repeat(b"0123456789", 200_000)
    packed = compress(codec, data, magic=magic)
    assert decompress(codec, packed, magic=magic, limit=len(data)) == data
    with pytest.raises(DecompressionLimitError, match=str(len(data) - 1)):
        decompress(codec, packed, magic=magic, limit=len(data) - 1)


def test_negative_limit_is_a_caller_error():
    with pytest.raises(ValueError):
        decompress(Codec.GZIP, compress(Codec.GZIP, b"x"), limit=-1)


def test_snappy_declared_length_is_refused_before_decompressing():
    with pytest.raises(DecompressionLimitError, match=str(DEFAULT_DECOMPRESSION_LIMIT)):
        decompress(Codec.SNAPPY, b"\xff\xff\xff\xff\x0f\x00")  # a raw block claiming 4 GiB


# --- hostile input ---------------------------------------------------------------------------------

PREFIXES = {  # enough of each format's header that fuzzing reaches the body parsers
    Codec.GZIP: b"\x1f\x8b\x08\x00" + bytes(6),
    Codec.SNAPPY: XERIAL_HEADER,
    Codec.LZ4: LZ4_MAGIC + b"\x60\x40\x82",
    Codec.ZSTD: b"\x28\xb5\x2f\xfd",
}


def _only_kafkalog_errors(codec, data, magic):
    try:
        return decompress(codec, data, magic=magic, limit=LIMIT)
    except KafkaLogError:
        return None


@pytest.mark.parametrize("codec,magic", [(c, m) for c, m in CODEC_MAGICS if c != Codec.NONE])
@settings(max_examples=150, deadline=None)
@given(garbage=st.binary(max_size=200), prefixed=st.booleans())
def test_garbage_raises_only_kafkalog_errors(codec, magic, garbage, prefixed):
    _only_kafkalog_errors(codec, (PREFIXES[codec] if prefixed else b"") + garbage, magic)


@pytest.mark.parametrize("codec,magic", [(c, m) for c, m in CODEC_MAGICS if c != Codec.NONE])
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=3000), cut=st.integers(0, 10_000), flip=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_truncated_or_flipped_frames_raise_only_kafkalog_errors(codec, magic, data, cut, flip, bit):
    packed = compress(codec, data, magic=magic)
    cut %= len(packed)
    truncated = _only_kafkalog_errors(codec, packed[:cut], magic)
    # only the chunked formats can end cleanly early: at a xerial chunk or zstd frame boundary
    assert truncated is None or data.startswith(truncated)
    if codec in (Codec.GZIP, Codec.LZ4) or (codec == Codec.ZSTD and cut > 0):
        assert truncated is None
    flipped = bytearray(packed)
    flipped[flip % len(packed)] ^= 1 << bit
    _only_kafkalog_errors(codec, bytes(flipped), magic)
