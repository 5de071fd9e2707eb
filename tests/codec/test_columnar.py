"""The vectorised readers (`decode.decode_section`, `scan.scan_section`, `scan.scan_sections`, built on
`kafkalog.codec.columnar`) against the scalar decoder they speed up.

The scalar path (`decode_record` one record at a time, `scan._scan_v2`) is the reference: on any
section, well-formed or not, `RecordBatch.records()` and `scan_keys` must give exactly what they
give with the vectorised path switched off -- the same records, or the same KafkaLogError subclass
with the same message -- and nothing else may escape (no IndexError, no numpy error).

Sections are built here byte by byte, so every field can take varints of every length (up to 5
bytes, 10 for the timestamp delta, including values no int64 holds), non-minimal encodings, null
lengths other than -1, and the defects the readers must catch.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.codec import batch as batch_module
from kafkalog.codec import decode as decode_module
from kafkalog.codec import scan as scan_module
from kafkalog.codec.batch import RecordBatch, TimestampType, _assemble, build_batch
from kafkalog.codec.compression import Codec, compress
from kafkalog.codec.decode import RecordColumns
from kafkalog.codec.legacy import LegacyBatch
from kafkalog.codec.reader import BatchReader
from kafkalog.codec.records import Record, decode_record
from kafkalog.codec.scan import KeyColumns, scan_keys
from kafkalog.errors import CorruptBatchError, KafkaLogError

REAL_FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real"
LOG_FILES = sorted(REAL_FIXTURES.rglob("*.log"))
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


# -- building sections byte by byte ---------------------------------------------------------------
def zigzag(n: int) -> int:
    """The unsigned form of any Python int, the inverse of the readers' (z >> 1) ^ -(z & 1)."""
    return 2 * n if n >= 0 else -2 * n - 1


def uvarint(z: int, pad: int = 0) -> bytes:
    """LEB128 of the unsigned z, with `pad` extra zero groups (a non-minimal encoding)."""
    groups = []
    while True:
        groups.append(z & 0x7F)
        z >>= 7
        if not z:
            break
    groups += [0] * pad
    return bytes(g | (0x80 if i < len(groups) - 1 else 0) for i, g in enumerate(groups))


def varint(n: int, pad: int = 0) -> bytes:
    return uvarint(zigzag(n), pad)


def field(data: bytes | int | None) -> bytes:
    """A length-prefixed field; None is a -1 length, an int any other (negative) null length."""
    if data is None:
        return varint(-1)
    if isinstance(data, int):
        return varint(data)
    return varint(len(data)) + data


def encode(spec: dict) -> tuple[bytes, dict]:
    """One record from its fields; also where each field starts, relative to the record."""
    body = bytearray([spec.get("attributes", 0)])
    where = {}
    where["ts"] = len(body)
    body += varint(spec["ts"], spec.get("ts_pad", 0))
    where["od"] = len(body)
    body += varint(spec["od"])
    where["key"] = len(body)
    body += field(spec["key"])
    where["value"] = len(body)
    body += field(spec["value"])
    where["count"] = len(body)
    headers = spec.get("headers", ())
    if "tail" in spec:  # raw bytes in place of the header count and headers
        body += spec["tail"]
    else:
        body += varint(len(headers))
        for hkey, hvalue in headers:
            body += field(hkey) + field(hvalue)
    body += spec.get("slack", b"")  # bytes the record declares but no field uses: corrupt
    length = varint(len(body), spec.get("length_pad", 0))
    return length + body, {name: pos + len(length) for name, pos in where.items()}


def section_of(specs) -> tuple[bytes, list[int], list[dict]]:
    out, starts, fields = bytearray(), [], []
    for spec in specs:
        record, where = encode(spec)
        starts.append(len(out))
        fields.append({name: pos + len(out) for name, pos in where.items()})
        out += record
    return bytes(out), starts, fields


def batch_of(
    section: bytes,
    count: int,
    *,
    base_offset=1000,
    base_timestamp=1_700_000_000_000,
    log_append_time=None,
    codec=Codec.NONE,
) -> RecordBatch:
    attributes = codec | (0x08 if log_append_time is not None else 0)
    max_timestamp = log_append_time if log_append_time is not None else base_timestamp
    data = _assemble(
        base_offset,
        -1,
        attributes,
        max(count - 1, 0),
        base_timestamp,
        max_timestamp,
        -1,
        -1,
        -1,
        count,
        compress(codec, section),
    )
    return RecordBatch(data)


# -- the reference: the same calls with the vectorised path switched off --------------------------
def outcome(fn):
    """('ok', result) or ('error', class, message); anything but a KafkaLogError propagates."""
    try:
        return ("ok", fn())
    except KafkaLogError as err:
        return ("error", type(err), err.message)


def scalar_records(batch):
    with mock.patch.object(batch_module, "decode_section", lambda *args, **kwargs: None):
        return batch.records()


def rows(cols: KeyColumns) -> list[tuple]:
    return list(
        zip(
            cols.offset.tolist(),
            cols.timestamp.tolist(),
            cols.key,
            cols.value_size.tolist(),
            cols.span_start.tolist(),
            cols.span_size.tolist(),
        )
    )


def scan(batch, vectorised: bool = True):
    cols = KeyColumns()
    if vectorised:
        scan_keys(batch, cols)
    else:
        with mock.patch.object(scan_module, "scan_section", lambda *args, **kwargs: None):
            scan_keys(batch, cols)
    return rows(cols)


def forced_decode(batch):
    lat = batch.max_timestamp if batch.attributes & 0x08 else None
    return decode_module.decode_section(
        batch.records_section(), batch.records_count, batch.base_offset, batch.base_timestamp, lat, force=True
    )


def forced_scan(batch):
    lat = batch.max_timestamp if batch.attributes & 0x08 else None
    return scan_module.scan_section(
        batch.records_section(), batch.records_count, batch.base_offset, batch.base_timestamp, lat, force=True
    )


def as_records(decoded) -> list[Record]:
    """`record_columns()`'s result as `records()` gives it."""
    if not isinstance(decoded, RecordColumns):
        return decoded
    assert decoded.offsets.dtype == decoded.timestamps.dtype == np.int64
    assert decoded.keys.type == decoded.values.type == pa.binary()
    headers = decoded.headers or [None] * len(decoded.offsets)
    columns = (
        decoded.offsets.tolist(),
        decoded.timestamps.tolist(),
        decoded.keys.to_pylist(),
        decoded.values.to_pylist(),
    )
    return [Record(o, t, k, v, tuple(h) if h else ()) for o, t, k, v, h in zip(*columns, headers)]


def assert_same_as_scalar(batch):
    """records(), record_columns() and scan_keys() agree with their scalar selves; forced vectorised
    reads either give up (None) or agree too. Returns the scalar records outcome."""
    expected = outcome(lambda: scalar_records(batch))
    assert outcome(batch.records) == expected
    assert outcome(lambda: as_records(batch.record_columns())) == expected
    forced = outcome(lambda: forced_decode(batch))
    if expected[0] == "ok":
        for record in expected[1]:
            assert type(record) is Record and type(record.headers) is tuple
        assert forced[0] == "ok"  # the vectorised reader itself never raises
        assert forced[1] is None or forced[1] == expected[1]
    elif batch.records_count > 0:  # it gives up where the scalar reader fails (past decompression)
        assert forced == ("ok", None) or forced == expected
    expected_scan = outcome(lambda: scan(batch, vectorised=False))
    assert outcome(lambda: scan(batch)) == expected_scan
    forced = outcome(lambda: forced_scan(batch))
    if expected_scan[0] == "error":
        assert forced == ("ok", None) or forced[0] == "error"
        return expected
    assert forced[0] == "ok"
    if forced[1] is not None:
        keys, *numeric = forced[1]
        assert all(isinstance(column, np.ndarray) and column.dtype == np.int64 for column in numeric)
        got = list(
            zip(
                *(column.tolist() for column in numeric[:2]),
                keys.tolist(),
                *(column.tolist() for column in numeric[2:]),
            )
        )
        assert expected_scan == ("ok", got)
    return expected


# -- strategies ----------------------------------------------------------------------------------
def zigzag_values(max_bytes: int):
    """Integers whose zig-zag form takes 1..max_bytes varint bytes, each length equally likely."""

    def of_length(k):
        low = 0 if k == 1 else 1 << (7 * (k - 1))
        return st.integers(low, (1 << (7 * k)) - 1).map(lambda z: (z >> 1) ^ -(z & 1))

    return st.integers(1, max_bytes).flatmap(of_length)


payloads = st.one_of(
    st.none(),
    st.integers(-5, -2),  # a null written with a length other than -1
    st.binary(max_size=20),
    st.binary(min_size=60, max_size=200),  # two-byte lengths
    st.sampled_from([8200, 20_000]).map(lambda n: b"\x5a" * n),  # three-byte lengths
)


def rarely(common, rare, one_in: int = 20):
    """`rare` once in `one_in` draws, else `common`."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else common)


header_keys = rarely(
    st.text(max_size=8).map(str.encode), st.one_of(st.just(b"\xff\xfe"), st.integers(-3, -1)), 40
)  # not UTF-8, negative
header_lists = st.lists(
    st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=12), st.binary(min_size=70, max_size=90))),
    max_size=4,
)


@st.composite
def record_specs(draw, n):
    """n records; per batch, keys and headers are free, of one length, or shared, as in real topics."""
    key_style = draw(st.sampled_from(["free", "fixed", "null"]))
    header_style = draw(st.sampled_from(["free", "pool", "none"]))
    pool = draw(st.lists(header_lists, min_size=1, max_size=2))
    fixed = draw(st.integers(1, 70))
    small_ts = draw(st.booleans())
    fits = draw(st.integers(0, 9)) > 0  # else some timestamp deltas take 10 bytes, past int64
    padded = draw(st.integers(0, 9)) == 0  # some varints in non-minimal encodings
    specs = []
    for _ in range(n):
        if key_style == "fixed":
            key = draw(st.binary(min_size=fixed, max_size=fixed))
        elif key_style == "null":
            key = None
        else:
            key = draw(payloads)
        spec = {
            "attributes": draw(st.integers(0, 255)),
            "ts": draw(st.integers(-60, 60) if small_ts else zigzag_values(9) if fits else zigzag_values(10)),
            "od": draw(zigzag_values(5)),
            "key": key,
            "value": draw(payloads),
            "headers": (
                draw(header_lists)
                if header_style == "free"
                else draw(st.sampled_from(pool))
                if header_style == "pool"
                else ()
            ),
        }
        if padded and draw(st.integers(0, 4)) == 0:
            spec[draw(st.sampled_from(["ts_pad", "length_pad"]))] = 1  # non-minimal, still valid
        specs.append(spec)
    return specs


batch_fields = st.fixed_dictionaries(
    {
        "base_offset": rarely(st.integers(0, 2**40), st.sampled_from([2**63 - 1, -(2**63), 2**63 - 2**20]), 10),
        "base_timestamp": rarely(
            st.one_of(st.just(-1), st.integers(0, 2**41)), st.sampled_from([2**63 - 1, -(2**63)]), 10
        ),
        "log_append_time": st.one_of(st.none(), st.integers(0, 2**41)),
        "codec": st.sampled_from([Codec.NONE, Codec.NONE, Codec.NONE, Codec.LZ4, Codec.GZIP]),
    }
)
sizes = st.one_of(st.integers(1, 13), st.integers(14, 70))  # below and above the thresholds


# -- well-formed sections ------------------------------------------------------------------------
@SETTINGS
@given(data=st.data(), n=sizes, fields=batch_fields)
def test_vectorised_equals_scalar_on_random_records(data, n, fields):
    specs = data.draw(record_specs(n))
    section, _, _ = section_of(specs)
    assert_same_as_scalar(batch_of(section, n, **fields))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(14, 60), fields=batch_fields, data=st.data())
def test_round_trip_through_build_batch(n, fields, data):
    """Records as the builder writes them: the vectorised reader returns exactly them."""
    base = data.draw(st.integers(0, 2**40))
    offsets = sorted(data.draw(st.sets(st.integers(base, base + 2**20), min_size=n, max_size=n)))
    ts = data.draw(st.integers(0, 2**41))
    headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2)
    records = [
        Record(
            o,
            ts + data.draw(st.integers(-(10**7), 10**7)),
            data.draw(st.one_of(st.none(), st.binary(max_size=30))),
            data.draw(st.one_of(st.none(), st.binary(max_size=300))),
            tuple(data.draw(headers)),
        )
        for o in offsets
    ]
    batch = RecordBatch(build_batch(records, codec=fields["codec"]))
    assert forced_decode(batch) == records == batch.records()
    assert as_records(batch.record_columns()) == records
    cols = KeyColumns()
    scan_keys(batch, cols)
    assert cols.offset.tolist() == offsets and cols.key == [r.key for r in records]


def test_every_varint_length_of_every_field():
    """Each field at each of its varint lengths, with the rest held small, in one large batch."""
    specs = []
    for k in range(1, 11):
        z = (1 << (7 * (k - 1))) + 5 if k > 1 else 5
        value = (z >> 1) ^ -(z & 1)
        specs.append({"ts": value, "od": 1, "key": b"k", "value": b"v"})
        if k <= 5:
            specs.append({"ts": 1, "od": value, "key": b"k", "value": b"v"})
    specs += [
        {"ts": 0, "od": i, "key": b"x" * n, "value": b"y" * n} for i, n in enumerate([0, 63, 64, 8191, 8192, 70_000])
    ]
    section, _, _ = section_of(specs)
    for base_timestamp in (0, 2**62, -1):
        batch = batch_of(section, len(specs), base_timestamp=base_timestamp)
        records = assert_same_as_scalar(batch)[1]
        assert forced_decode(batch) == records


@pytest.mark.parametrize("huge", [(1 << 69) - 1, -(1 << 69), (1 << 63) + 1, -(1 << 63) - 2, (1 << 63) - 1])
def test_timestamp_deltas_past_int64_fall_back_to_python_integers(huge):
    """A 10-byte varlong can hold 70 bits: the scalar reader keeps them, so does records()."""
    specs = [{"ts": huge if i == 7 else i, "od": i, "key": b"k", "value": b"v"} for i in range(30)]
    section, _, _ = section_of(specs)
    batch = batch_of(section, 30, base_timestamp=5)
    assert batch.records()[7].timestamp == 5 + huge
    if not -(2**63) <= 5 + huge < 2**63:
        with pytest.raises(CorruptBatchError, match="int64"):
            scan_keys(batch, KeyColumns())
    assert_same_as_scalar(batch)


def test_offsets_past_int64():
    specs = [{"ts": 0, "od": i * 1000, "key": b"k", "value": b"v"} for i in range(30)]
    section, _, _ = section_of(specs)
    batch = batch_of(section, 30, base_offset=2**63 - 5000)
    assert batch.records()[-1].offset == 2**63 - 5000 + 29_000
    cols = KeyColumns()
    with pytest.raises(CorruptBatchError, match="int64"):
        scan_keys(batch, cols)
    assert len(cols) == 0


def test_log_append_time_reports_the_batch_max_timestamp():
    specs = [{"ts": -i * 10**6, "od": i, "key": b"k%d" % i, "value": None} for i in range(40)]
    section, _, _ = section_of(specs)
    batch = batch_of(section, 40, log_append_time=777)
    assert [r.timestamp for r in batch.records()] == [777] * 40
    cols = KeyColumns()
    scan_keys(batch, cols)
    assert cols.timestamp.tolist() == [777] * 40
    assert_same_as_scalar(batch)


def test_headers_shared_mixed_and_many():
    """Identical tails (decoded once), rounds of header reads, and records with many headers."""
    shapes = [
        [(("trace", b"abc"),)] * 30,
        [((b"h%d" % (i % 3)).decode(), b"v" * (i % 5)) for i in range(30)],
        [tuple((f"k{j}", None if j % 2 else b"x" * j) for j in range(i % 4)) for i in range(30)],
        [tuple((f"k{j}", b"x") for j in range(40 if i == 3 else 1)) for i in range(30)],
        [tuple((f"k{j}", b"x") for j in range(i)) for i in range(30)],
    ]
    for headers in shapes:
        headers = [h if isinstance(h, tuple) and (not h or isinstance(h[0], tuple)) else (h,) for h in headers]
        specs = [
            {"ts": i, "od": i, "key": b"k", "value": b"v", "headers": tuple((k.encode(), v) for k, v in h)}
            for i, h in enumerate(headers)
        ]
        section, _, _ = section_of(specs)
        batch = batch_of(section, len(specs))
        records = assert_same_as_scalar(batch)[1]
        assert forced_decode(batch) == records
        assert [r.headers for r in records] == [tuple(h) for h in headers]


# -- malformed sections --------------------------------------------------------------------------
DEFECTS = [
    "truncate",
    "too_long",
    "key_past_end",
    "value_past_end",
    "count_more",
    "count_less",
    "trailing",
    "length_short",
    "length_long",
    "negative_length",
    "header_count",
    "flip",
    "slack",
    "header_key_negative",
    "header_key_negative_short",
    "header_key_utf8",
]
SPEC_DEFECTS = {  # defects written into the record itself
    "slack": lambda spec: {**spec, "slack": b"\x00"},
    "header_key_negative": lambda spec: {**spec, "headers": tuple(spec.get("headers", ())) + ((-1, b"x"),)},
    # a negative key length, then nothing: read as a length, its byte would also end the record
    "header_key_negative_short": lambda spec: {**spec, "tail": varint(1) + varint(-1)},
    "header_key_utf8": lambda spec: {**spec, "headers": tuple(spec.get("headers", ())) + ((b"\xc3(", b"x"),)},
}


def damage(section: bytes, starts: list, fields: list, defect: str, i: int, draw_byte: int) -> tuple[bytes, int]:
    """The section with one defect in record i; returns it and the record count to declare."""
    data = bytearray(section)
    n = len(starts)
    f = fields[i]
    if defect in SPEC_DEFECTS:
        return bytes(data), n
    if defect == "truncate":
        return bytes(data[: max(starts[i] + 1, len(data) - 1 - draw_byte)]), n
    if defect == "too_long":  # a varint of 6 (or 11) bytes where 5 (10) are allowed
        where = f[["ts", "od", "key", "value", "count"][draw_byte % 5]]
        data[where:where] = b"\x80" * 10
        return bytes(data), n
    if defect == "key_past_end":
        data[f["key"] : f["key"] + 1] = varint(60_000)
        return bytes(data), n
    if defect == "value_past_end":
        data[f["value"] : f["value"] + 1] = varint(10 + draw_byte)
        return bytes(data), n
    if defect == "count_more":
        return bytes(data), n + 1 + draw_byte % 3
    if defect == "count_less":
        return bytes(data), max(n - 1 - draw_byte % 3, 0)
    if defect == "trailing":
        return bytes(data) + bytes([draw_byte]), n
    if defect in ("length_short", "length_long", "negative_length"):
        end = starts[i + 1] if i + 1 < n else len(data)
        length = end - f["ts"] + 1  # the body: attributes .. headers
        new = {"length_short": length - 1, "length_long": length + 1, "negative_length": -1 - draw_byte}[defect]
        old_size = f["ts"] - 1 - starts[i]
        data[starts[i] : starts[i] + old_size] = varint(new)
        return bytes(data), n
    if defect == "header_count":
        data[f["count"] : f["count"] + 1] = varint([-1, 1, 3, 200][draw_byte % 4])
        return bytes(data), n
    data[draw_byte * 7919 % len(data)] ^= 1 << (draw_byte % 8)
    return bytes(data), n


@SETTINGS
@given(
    data=st.data(),
    n=sizes,
    defect=st.sampled_from(DEFECTS),
    byte=st.integers(0, 255),
    codec=st.sampled_from([Codec.NONE, Codec.NONE, Codec.SNAPPY]),
)
def test_malformed_sections_fail_as_the_scalar_path_fails(data, n, defect, byte, codec):
    specs = data.draw(record_specs(n))
    for spec in specs:  # keep the records small: the defects are the point here
        for name in ("key", "value"):
            if isinstance(spec[name], bytes) and len(spec[name]) > 200:
                spec[name] = spec[name][:50]
    i = data.draw(st.integers(0, n - 1))
    if defect in SPEC_DEFECTS:
        specs[i] = SPEC_DEFECTS[defect](specs[i])
    section, starts, fields = section_of(specs)
    damaged, count = damage(section, starts, fields, defect, i, byte)
    batch = batch_of(damaged, count, codec=codec)
    assert_same_as_scalar(batch)


@pytest.mark.parametrize("defect", DEFECTS)
@pytest.mark.parametrize("n", [5, 40])
@pytest.mark.parametrize("headers", [False, True])
def test_each_defect_in_small_and_large_batches(defect, n, headers):
    specs = [
        {
            "ts": i * 1000,
            "od": i,
            "key": b"key-%03d" % i,
            "value": b"v" * (i * 7 % 100),
            "headers": ((b"h", b"x"), (b"g", None))[: i % 3 if headers else 0],
        }
        for i in range(n)
    ]
    for i in (0, 1, n // 2, n - 2, n - 1):
        damaged_specs = list(specs)
        if defect in SPEC_DEFECTS:
            damaged_specs[i] = SPEC_DEFECTS[defect](specs[i])
        section, starts, fields = section_of(damaged_specs)
        damaged, count = damage(section, starts, fields, defect, i, 3)
        batch = batch_of(damaged, count)
        expected = assert_same_as_scalar(batch)
        if defect not in ("flip",):
            assert expected[0] == "error" and issubclass(expected[1], CorruptBatchError), (defect, i, expected)
        cols = KeyColumns()
        try:
            scan_keys(batch, cols)
        except CorruptBatchError:
            assert len(cols) == 0  # nothing of a failed batch is appended


# -- real data -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: str(p.relative_to(REAL_FIXTURES)))
def test_scan_keys_agrees_with_records_on_real_fixtures(path):
    for batch in BatchReader(path.read_bytes()):
        records = outcome(batch.records)
        cols = KeyColumns()
        scanned = outcome(lambda batch=batch, cols=cols: scan_keys(batch, cols))
        if records[0] == "error":
            assert scanned[0] == "error" and scanned[1] is records[1]
            continue
        records = records[1]
        assert scanned == ("ok", len(records))
        assert cols.offset.tolist() == [r.offset for r in records]
        assert cols.timestamp.tolist() == [r.timestamp for r in records]
        assert cols.key == [r.key for r in records]
        assert cols.value_size.tolist() == [-1 if r.value is None else len(r.value) for r in records]
        if isinstance(batch, LegacyBatch):
            assert set(cols.span_start.tolist()) <= {-1} and set(cols.span_size.tolist()) <= {-1}
            continue
        section = batch.records_section()
        lat = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        for record, start, size in zip(records, cols.span_start.tolist(), cols.span_size.tolist()):
            assert decode_record(section, start, batch.base_offset, batch.base_timestamp, lat) == (record, start + size)
        assert_same_as_scalar(batch)  # and the vectorised path, forced on these mostly small batches
        if records:
            assert forced_decode(batch) == records


# -- the key columns -----------------------------------------------------------------------------
def test_key_columns_keep_batch_order_across_scalar_and_vectorised_batches():
    cols = KeyColumns()
    expected = []
    offset = 0
    for n in (3, 40, 1, 2, 64, 5):  # small batches take the scalar scan, large the vectorised one
        records = [
            Record(offset + i, 10 + i, None if i % 7 == 3 else b"k%d" % i, None if i % 5 == 1 else b"v" * i)
            for i in range(n)
        ]
        offset += n
        scan_keys(RecordBatch(build_batch(records)), cols)
        expected += records
    assert len(cols) == len(expected) == cols.offset.size
    # packed (vectorised) and listed (scalar) keys, as one Arrow array and then as one list
    assert cols.key_array().type == pa.binary() and cols.key_array().to_pylist() == [r.key for r in expected]
    for name in ("offset", "timestamp", "value_size", "span_start", "span_size"):
        column = getattr(cols, name)
        assert isinstance(column, np.ndarray) and column.dtype == np.int64 and len(column) == len(expected)
    assert cols.offset.tolist() == [r.offset for r in expected]
    assert cols.key == [r.key for r in expected]
    assert cols.value_size.tolist() == [-1 if r.value is None else len(r.value) for r in expected]
    table = cols.to_arrow()
    assert table.num_rows == len(expected)
    assert table.schema.names == ["offset", "timestamp", "key", "value_size", "span_start", "span_size"]
    assert table.schema.field("key").type == pa.binary() and table.schema.field("offset").type == pa.int64()
    assert table.column("key").to_pylist() == cols.key
    scan_keys(RecordBatch(build_batch([Record(1000, 1, b"z", b"z")])), cols)  # appends after a read
    assert cols.offset.tolist()[-1] == 1000 and len(cols) == len(expected) + 1
    cols.clear()
    assert len(cols) == 0 and cols.offset.size == 0 and cols.to_arrow().num_rows == 0


def test_thresholds_keep_small_batches_scalar():
    section, _, _ = section_of([{"ts": 0, "od": i, "key": b"k", "value": b"v" * 100} for i in range(3)])
    assert decode_module.decode_section(section, 3, 0, 0, None) is None
    assert scan_module.scan_section(section, 3, 0, 0, None) is None
    assert decode_module.decode_section(section, 3, 0, 0, None, force=True) is not None
    assert decode_module.decode_section(section, 0, 0, 0, None, force=True) is None


# -- windows of batches read as one (scan_batches) -----------------------------------------------
def window_rows(batches) -> tuple:
    """What `scan_keys` batch after batch gives: ('ok', rows) or the first batch's error."""
    got = []
    for i, batch in enumerate(batches):
        scanned = outcome(lambda batch=batch: scan(batch))
        if scanned[0] == "error":
            return ("error", i, *scanned[1:])
        got += scanned[1]
    return ("ok", got)


def assert_window_as_batch_by_batch(batches) -> bool:
    """scan_batches appends exactly the rows of scan_keys batch by batch, or nothing (False); it
    may decline a window only below the threshold or where some batch is not plainly well-formed."""
    expected = window_rows(batches)
    cols = KeyColumns()
    done = scan_module.scan_batches(batches, [b.records_section() for b in batches], cols)
    if done:
        assert expected == ("ok", rows(cols))
    else:
        assert len(cols) == 0
    return done


@SETTINGS
@given(
    data=st.data(),
    sizes_=st.lists(sizes, min_size=1, max_size=6),
    damaged=rarely(st.just(-1), st.integers(0, 5), 2),
    defect=st.sampled_from(DEFECTS),
    byte=st.integers(0, 255),
)
def test_a_window_scans_as_its_batches_one_by_one(data, sizes_, damaged, defect, byte):
    """Random sections (every varint length, LogAppendTime, base offsets and timestamps near int64's
    limits, mixed codecs), at most one of them damaged."""
    batches = []
    for i, n in enumerate(sizes_):
        specs = data.draw(record_specs(n))
        section, starts, fields = section_of(specs)
        count = n
        if i == damaged:
            j = data.draw(st.integers(0, n - 1))
            if defect in SPEC_DEFECTS:
                specs[j] = SPEC_DEFECTS[defect](specs[j])
                section, starts, fields = section_of(specs)
            section, count = damage(section, starts, fields, defect, j, byte)
        if count:  # the window takes batches of at least one record
            batches.append(batch_of(section, count, **data.draw(batch_fields)))
    if batches:
        assert_window_as_batch_by_batch(batches)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 6))
def test_windows_of_builder_batches_are_read_in_one_pass(data, n):
    """Batches as Kafka writes them, any codec and timestamp type, small or large, deltas of every
    size: the window reads them (True) and equals the batch-by-batch scan."""
    batches = []
    offset = data.draw(st.integers(0, 2**40))
    for _ in range(n):
        count = data.draw(st.integers(1, 70))
        ts = data.draw(st.integers(0, 2**41))
        records = [
            Record(
                offset + i,
                ts + data.draw(st.integers(-(10**8), 10**8)),
                data.draw(st.one_of(st.none(), st.binary(max_size=30))),
                data.draw(st.one_of(st.none(), st.binary(max_size=300), st.just(b"x" * 9000))),
                tuple(data.draw(st.lists(st.tuples(st.text(max_size=4), st.binary(max_size=4)), max_size=2))),
            )
            for i in range(count)
        ]
        offset += count + data.draw(st.integers(0, 100))
        log_append = data.draw(st.booleans())
        batches.append(
            RecordBatch(
                build_batch(
                    records,
                    codec=data.draw(st.sampled_from(list(Codec))),
                    timestamp_type=int(log_append),
                    log_append_time=ts + 5 if log_append else None,
                )
            )
        )
    done = assert_window_as_batch_by_batch(batches)
    assert done == (sum(b.records_count for b in batches) >= scan_module.SCAN_THRESHOLD)


def test_a_window_declines_counts_that_do_not_fit_their_sections():
    """Two sections whose records add up but do not split as declared: each batch alone is corrupt."""
    specs = [{"ts": i, "od": i, "key": b"k%d" % i, "value": b"v"} for i in range(60)]
    section, starts, _ = section_of(specs)
    first, second = section[: starts[31]], section[starts[31] :]  # 31 and 29 records
    batches = [batch_of(first, 30), batch_of(second, 30)]
    assert window_rows(batches)[:2] == ("error", 0)
    assert not assert_window_as_batch_by_batch(batches)
    assert assert_window_as_batch_by_batch([batch_of(first, 31), batch_of(second, 29)])


def test_a_window_with_an_offset_or_timestamp_near_int64_limits_is_declined_not_wrapped():
    specs = [{"ts": 10**9 * i, "od": i, "key": b"k", "value": b"v"} for i in range(30)]
    section, _, _ = section_of(specs)
    for fields, fits in (
        ({"base_offset": 2**63 - 10}, False),
        ({"base_timestamp": 2**63 - 10}, False),
        ({"base_offset": 2**63 - 100}, True),
        ({"base_timestamp": -(2**63)}, True),
        ({"base_timestamp": 2**63 - 1, "log_append_time": 5}, True),
    ):
        batches = [batch_of(section, 30), batch_of(section, 30, **fields)]
        assert window_rows(batches)[0] == ("ok" if fits else "error")
        assert not assert_window_as_batch_by_batch(batches)  # declined, then scanned batch by batch


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.integers(0, 120))), max_size=40),
    st.booleans(),
)
def test_binary_column_cuts_every_field(fields, shuffled):
    """`decode.binary_column` against slicing: fields (gap before, length or None for null) of any
    size, in the section's order (Arrow's take over the section) or not (the slices joined)."""
    section, starts, lengths = bytearray(), [], []
    for i, (gap, length) in enumerate(fields):
        section += bytes([i % 251]) * gap
        starts.append(len(section))
        lengths.append(-1 if length is None else length)
        section += bytes((i * 7 + j) % 256 for j in range(length or 0))
    order = list(reversed(range(len(fields)))) if shuffled else list(range(len(fields)))
    start = np.array([starts[i] for i in order], np.int64)
    length = np.array([lengths[i] for i in order], np.int64)
    data = bytes(section)
    got = decode_module.binary_column(data, np.frombuffer(data, np.uint8), start, length)
    got.validate(full=True)
    assert got.to_pylist() == [None if n < 0 else data[s : s + n] for s, n in zip(start.tolist(), length.tolist())]
