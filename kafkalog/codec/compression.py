"""Compression codecs of the records section (attribute bits 0-2: none, gzip, snappy, lz4, zstd).

`compress` writes what Kafka's Java producer writes; `decompress` accepts what Kafka's readers accept
and never lets the output grow past a limit, so a small hostile batch cannot exhaust memory.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import lz4.block
import pyarrow
import snappy
import xxhash
import zstandard

from ..errors import CorruptBatchError, DecompressionLimitError, TruncatedDataError, UnsupportedFormatError


class Codec(enum.IntEnum):
    """Codec ids of attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_DECOMPRESSION_LIMIT = 256 * 1024 * 1024

# The records of one batch that kafkalog decodes at once (v2 batches and legacy wrappers alike). Kafka
# reads a batch's records lazily, one at a time (DefaultRecordBatch.RecordIterator checks only that
# the int32 count is not negative), so a broker has no cap but the bytes. kafkalog decodes a batch
# whole (a list of records, or numpy columns), at some 0.5 KB and 7 µs a record on the driver: a
# 35 MB gzip batch of 25 million null records (7 bytes each: well under the decompression limit)
# took `validate` and `dump --records` past 300 s and 1.3 GB. So a batch is refused beyond 2^20
# records (about 0.5 GB and 7 s to validate, 20 s to dump), as one is beyond the decompression
# limit. Producers write far fewer: a batch is at most message.max.bytes (1 MiB by default)
# compressed, and producers fill batch.size (16 KiB by default) before sending.
MAX_RECORDS_PER_BATCH = 1 << 20

_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # format version 1, minimum compatible version 1
_XERIAL_BLOCK = 32 * 1024  # uncompressed bytes per chunk, as snappy-java 1.1.x writes

_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_DESCRIPTOR = b"\x60\x40"  # FLG: version 1, independent blocks, nothing optional; BD: 64 KiB blocks
_LZ4_BLOCK = 64 * 1024
_LZ4_STORED = 0x80000000  # block-size high bit: the block is stored uncompressed

# Compressed bytes fed to zstd per call. zstd expands at most ~32 KiB per input byte, so feeding
# (room left under the limit) / 32 KiB bytes keeps one call's output within the limit; never less
# than 64 bytes (progress) nor more than 64 KiB (calls stay short).
_ZSTD_MAX_EXPANSION = 32 * 1024
_ZSTD_FEED_MIN, _ZSTD_FEED_MAX = 64, 64 * 1024

# gzip is inflated in steps of at most this many output bytes, from at most this many input bytes:
# one step asking zlib for everything up to the limit would build (and then copy) an output as large
# as the limit before the limit could refuse it, and zlib's leftover input is copied at every step.
_GZIP_OUT_STEP = 1 << 20
_GZIP_IN_STEP = 1 << 20


def compress(codec: int, data: bytes | memoryview, *, magic: int = 2) -> bytes:
    """`data` compressed with `codec` as Kafka's Java producer writes it for message format `magic`."""
    return _CODECS[_codec(codec, magic)][0](data, magic)


def decompress(codec: int, data, *, magic: int = 2, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> bytes:
    """`data` (any bytes-like object) decompressed as Kafka reads a `codec` payload of format `magic`.

    Raises DecompressionLimitError once the output would exceed `limit` bytes, CorruptBatchError or
    TruncatedDataError for bad data (positions relative to the start of `data`) and
    UnsupportedFormatError for an unknown codec.
    """
    if limit < 0:
        raise ValueError(f"the decompression limit must not be negative, got {limit}")
    out = _Decompressed(limit)
    _CODECS[_codec(codec, magic)][1](memoryview(data), magic, out)
    return out.result()


def _codec(codec: int, magic: int) -> Codec:
    try:
        codec = Codec(codec)
    except ValueError:
        raise UnsupportedFormatError(f"Unknown compression type id {codec}") from None
    if codec is Codec.ZSTD and magic < 2:
        # the v0/v1 builder refuses zstd and the legacy deep iterator rejects a zstd wrapper
        raise UnsupportedFormatError(f"zstd compression requires magic 2, not magic {magic}")
    return codec


class _Decompressed:
    """Decompressed chunks that refuse to grow past the limit. The codecs add chunks of bounded
    size, so a payload that expands past the limit is refused holding about `limit` bytes; a result
    within the limit costs twice its size while the chunks are joined."""

    def __init__(self, limit: int):
        self.limit = limit
        self.size = 0
        self.chunks: list[bytes] = []

    def room(self) -> int:
        return self.limit - self.size

    def expect(self, size: int) -> None:
        """Refuse `size` more bytes before anything is allocated for them."""
        if size > self.room():
            raise DecompressionLimitError(f"decompressed data exceeds the limit of {self.limit} bytes")

    def add(self, chunk: bytes) -> None:
        self.expect(len(chunk))
        self.size += len(chunk)
        self.chunks.append(chunk)

    def result(self) -> bytes:
        if len(self.chunks) == 1:
            return self.chunks.pop()
        joined = b"".join(self.chunks)
        self.chunks.clear()
        return joined


def _none_compress(data, magic: int) -> bytes:
    return bytes(data)


def _none_decompress(view: memoryview, magic: int, out: _Decompressed) -> None:
    out.add(bytes(view))


def _gzip_compress(data, magic: int) -> bytes:
    # GZIPOutputStream writes one member at Deflater's default level (zlib 6) with mtime 0 and, since
    # JDK 16 (Kafka 4.x runs on 17+), the header's OS byte 255 "unknown" where zlib writes 3 "Unix":
    # set so, the bytes are the broker's own (checked against Kafka's cleaner in tests/kafka)
    out = bytearray(gzip.compress(data, compresslevel=6, mtime=0))
    out[9] = 0xFF
    return bytes(out)


def _gzip_decompress(view: memoryview, magic: int, out: _Decompressed) -> None:
    start = 0
    while True:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip wrapper only, like GZIPInputStream
        pos = start  # input handed to zlib so far
        tail = b""  # input zlib left over from the last step
        full = False  # the last step filled its output: zlib may hold more without new input
        data: bytes | memoryview
        while not member.eof:
            if tail:
                data = tail
            elif pos < len(view):
                data = view[pos : pos + _GZIP_IN_STEP]
                pos += len(data)
            elif full:
                data = b""
            else:
                raise TruncatedDataError("gzip data ends inside a member", position=start)
            step = min(out.room() + 1, _GZIP_OUT_STEP)
            try:
                chunk = member.decompress(data, step)
            except zlib.error as e:
                raise CorruptBatchError(f"invalid gzip data: {e}", position=start) from None
            full = len(chunk) == step
            out.add(chunk)
            tail = member.unconsumed_tail
        start = pos - len(member.unused_data)
        # GZIPInputStream reads on when another member header follows and silently ignores any
        # other trailing bytes, so concatenated members are read and padding is not an error
        if view[start : start + 3] != b"\x1f\x8b\x08":
            return


def _snappy_compress(data, magic: int) -> bytes:
    # SnappyOutputStream: the xerial header, then [int32 BE length, raw snappy block] per 32 KiB of input
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = snappy.compress(view[start : start + _XERIAL_BLOCK])
        parts += (_INT32.pack(len(block)), block)
    return b"".join(parts)


def _snappy_decompress(view: memoryview, magic: int, out: _Decompressed) -> None:
    if not _xerial_header_at(view, 0):
        # SnappyInputStream reads anything that does not open with a full xerial header as one raw block
        # (so the Google framing format, which has no such header, fails as a raw block)
        _snappy_block(view, 0, out)
        return
    if _INT32.unpack_from(view, 8)[0] < 1:
        raise CorruptBatchError("xerial snappy stream version must be at least 1", position=8)
    pos = len(_XERIAL_HEADER)
    while len(view) - pos >= 4:  # SnappyInputStream ends the stream where fewer than 4 bytes remain
        if _xerial_header_at(view, pos):  # concatenated streams: snappy-java skips the next header
            pos += len(_XERIAL_HEADER)
            continue
        (length,) = _INT32.unpack_from(view, pos)
        start = pos + 4
        if length < 0:
            raise CorruptBatchError(f"negative xerial snappy chunk length {length}", position=pos)
        if length > len(view) - start:
            raise TruncatedDataError(f"xerial snappy chunk of {length} bytes runs past the end", position=pos)
        pos = start + length
        _snappy_block(view[start:pos], start, out)


def _xerial_header_at(view: memoryview, pos: int) -> bool:
    return len(view) - pos >= len(_XERIAL_HEADER) and view[pos : pos + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC


def _snappy_block(block: memoryview, position: int, out: _Decompressed) -> None:
    # a raw block opens with its uncompressed length: refuse it before snappy allocates that much
    length = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            break
    else:
        raise CorruptBatchError("snappy block does not start with a valid length", position=position)
    out.expect(length)
    try:
        out.add(snappy.decompress(block))
    except snappy.UncompressError:
        raise CorruptBatchError("invalid snappy block", position=position) from None


# Kafka's Lz4BlockOutputStream compresses each block with lz4-java's fastCompressor, which is
# LZ4_compress_default; so does Arrow's raw lz4 codec. python-lz4's block.compress runs LZ4's
# streaming compressor, which finds other matches: a valid frame, but not the bytes Kafka writes.
_LZ4_RAW = pyarrow.Codec("lz4_raw")


def _lz4_header_checksum(descriptor) -> int:
    return (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF


def _lz4_compress(data, magic: int) -> bytes:
    # Before KIP-57 Kafka also hashed the frame magic into HC (KAFKA-3160); magic-0 wrappers keep
    # that broken byte because the old clients reading them verify it
    hashed = _LZ4_MAGIC + _LZ4_DESCRIPTOR if magic == 0 else _LZ4_DESCRIPTOR
    parts: list[bytes | memoryview] = [_LZ4_MAGIC, _LZ4_DESCRIPTOR, bytes((_lz4_header_checksum(hashed),))]
    view = memoryview(data)
    for start in range(0, len(view), _LZ4_BLOCK):
        block = view[start : start + _LZ4_BLOCK]
        packed = _LZ4_RAW.compress(block, asbytes=True)
        # Lz4BlockOutputStream stores a block that compression did not shrink as it is
        if len(packed) >= len(block):
            parts += (_UINT32_LE.pack(len(block) | _LZ4_STORED), block)
        else:
            parts += (_UINT32_LE.pack(len(packed)), packed)
    parts.append(bytes(4))  # EndMark; Kafka writes no content checksum
    return b"".join(parts)


def _lz4_decompress(view: memoryview, magic: int, out: _Decompressed) -> None:
    # Kafka's KafkaLZ4BlockInputStream reads only a restricted LZ4 frame: the checks below are its
    if len(view) < 6:
        raise TruncatedDataError("lz4 frame header is truncated", position=0)
    if view[:4] != _LZ4_MAGIC:
        raise CorruptBatchError("not an lz4 frame: bad magic number", position=0)
    flg, bd = view[4], view[5]
    if flg & 0x03:
        raise CorruptBatchError("lz4 FLG reserved bits must be 0", position=4)
    if not flg & 0x20:
        raise CorruptBatchError("Dependent block stream is unsupported", position=4)
    if flg >> 6 != 1:
        raise CorruptBatchError(f"lz4 frame version {flg >> 6} is unsupported", position=4)
    size_code = (bd >> 4) & 0x07
    if bd & 0x8F or size_code < 4:
        raise CorruptBatchError(f"invalid lz4 BD byte 0x{bd:02x}", position=5)
    block_max = 1 << (2 * size_code + 8)
    pos = 14 if flg & 0x08 else 6  # an optional content size is skipped, but HC covers it
    if len(view) <= pos:
        raise TruncatedDataError("lz4 frame header is truncated", position=0)
    # magic-0 data may carry the broken HC of KAFKA-3160, so Kafka only checks HC from magic 1 on
    if magic >= 1 and view[pos] != _lz4_header_checksum(view[4:pos]):
        raise CorruptBatchError("lz4 frame descriptor checksum mismatch", position=pos)
    pos += 1
    checksum_size = 4 if flg & 0x10 else 0
    while True:
        if len(view) - pos < 4:
            raise TruncatedDataError("lz4 frame ends without an EndMark", position=pos)
        (size,) = _UINT32_LE.unpack_from(view, pos)
        stored, size = size & _LZ4_STORED, size & ~_LZ4_STORED
        start = pos + 4
        if size == 0:
            # EndMark: Kafka stops reading here; a content checksum is read but not verified
            if flg & 0x04 and len(view) - start < 4:
                raise TruncatedDataError("lz4 content checksum is missing", position=start)
            return
        if size > block_max:
            raise CorruptBatchError(f"lz4 block size {size} exceeds the frame maximum {block_max}", position=pos)
        end = start + size
        if end + checksum_size > len(view):
            raise TruncatedDataError(f"lz4 block of {size} bytes runs past the end", position=pos)
        block = view[start:end]
        if checksum_size and xxhash.xxh32_intdigest(block) != _UINT32_LE.unpack_from(view, end)[0]:
            raise CorruptBatchError("lz4 block checksum mismatch", position=end)
        if stored:
            out.add(bytes(block))
        else:
            try:
                chunk = lz4.block.decompress(block, uncompressed_size=block_max)
            except lz4.block.LZ4BlockError:
                raise CorruptBatchError("invalid lz4 block", position=start) from None
            out.add(chunk)
        pos = end + checksum_size


def _zstd_compress(data, magic: int) -> bytes:
    # as Kafka's ZstdCompression writes through zstd-jni's stream at level 3: a frame without the
    # content size, its data block, then an empty last block (the broker's own bytes, checked
    # against Kafka's cleaner in tests/kafka)
    stream = _ZSTD_STREAM.compressobj()
    return stream.compress(data) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + stream.flush()


_ZSTD_STREAM = zstandard.ZstdCompressor(level=3, write_content_size=False)


def _zstd_decompress(view: memoryview, magic: int, out: _Decompressed) -> None:
    # zstd-jni reads frame after frame until the input ends, and fails if it ends inside a frame
    dctx = zstandard.ZstdDecompressor()
    start = 0
    while start < len(view):
        frame = dctx.decompressobj()  # one frame each: its eof tells a complete frame from a truncated one
        pos = start
        while not frame.eof:
            if pos >= len(view):
                raise TruncatedDataError("zstd data ends inside a frame", position=start)
            feed = min(max(out.room() // _ZSTD_MAX_EXPANSION, _ZSTD_FEED_MIN), _ZSTD_FEED_MAX)
            try:
                chunk = frame.decompress(view[pos : pos + feed])
            except zstandard.ZstdError as e:
                raise CorruptBatchError(f"invalid zstd data: {e}", position=start) from None
            out.add(chunk)
            pos += feed
        start = min(pos, len(view)) - len(frame.unused_data)


_CODECS = {
    Codec.NONE: (_none_compress, _none_decompress),
    Codec.GZIP: (_gzip_compress, _gzip_decompress),
    Codec.SNAPPY: (_snappy_compress, _snappy_decompress),
    Codec.LZ4: (_lz4_compress, _lz4_decompress),
    Codec.ZSTD: (_zstd_compress, _zstd_decompress),
}
