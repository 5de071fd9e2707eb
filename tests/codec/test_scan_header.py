"""The key scan's header column (KIP-280's `header` strategy): the scalar scan, the vectorised one per
batch and over several batches all give, per record, the size and value of its last header of the
key asked for, as a model reading the decoded records' headers says (`Record.headers`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.codec import scan as scan_module
from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.records import Record
from kafkalog.codec.scan import ABSENT, KeyColumns, scan_batches, scan_keys

NAMES = ["v", "version", "", "é"]
values = st.one_of(st.none(), st.binary(max_size=10), st.binary(min_size=8, max_size=8))
headers = st.lists(st.tuples(st.sampled_from([*NAMES, "x"]), values), max_size=4).map(tuple)


@st.composite
def batches(draw):
    n = draw(st.integers(1, 60))
    records = [
        Record(100 + i, 1_700_000_000_000 + i, draw(st.binary(max_size=4)), draw(st.binary(max_size=6)), draw(headers))
        for i in range(n)
    ]
    return RecordBatch(build_batch(records)), records


def model(records: list[Record], name: str) -> list[tuple[int, int]]:
    """(size, value) of each record's last header named `name`: ABSENT without one, -1 for null."""
    out = []
    for record in records:
        found = [v for k, v in record.headers if k == name]
        if not found:
            out.append((ABSENT, 0))
        elif found[-1] is None:
            out.append((-1, 0))
        else:
            v = found[-1]
            out.append((len(v), int.from_bytes(v, "big", signed=True) if len(v) == 8 else 0))
    return out


def scanned(cols: KeyColumns) -> list[tuple[int, int]]:
    return list(zip(cols.header_size.tolist(), cols.header_value.tolist()))


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(NAMES))
def test_every_scan_reads_the_last_header_as_the_model(made, name):
    batch, records = made
    header = name.encode()
    expected = model(records, name)
    scalar = KeyColumns(header)
    threshold = scan_module.SCAN_THRESHOLD, scan_module.SCAN_THRESHOLD_SMALL_RECORDS
    scan_module.SCAN_THRESHOLD = scan_module.SCAN_THRESHOLD_SMALL_RECORDS = 10**9
    try:
        scan_keys(batch, scalar)
    finally:
        scan_module.SCAN_THRESHOLD, scan_module.SCAN_THRESHOLD_SMALL_RECORDS = threshold
    assert scanned(scalar) == expected
    section = batch.records_section()
    forced = scan_module.scan_section(
        section, batch.records_count, batch.base_offset, batch.base_timestamp, None, force=True, header=header
    )
    assert forced is not None
    assert list(zip(forced[6].tolist(), forced[7].tolist())) == expected
    joined = KeyColumns(header)
    if scan_batches([batch, batch], [section, section], joined):
        assert scanned(joined) == expected * 2
    # without a header the scan's columns are as before
    plain = KeyColumns()
    scan_keys(batch, plain)
    assert plain.offset.tolist() == scalar.offset.tolist() and plain.key == scalar.key
