"""Splicing filtered batches (`filter.splice_batches`, `splice.splice`) against decoding and re-encoding them.

Kafka's cleaner writes every retained record again; the splice reuses a record's bytes when they
are what that re-encoding writes. The reference is `filter_batch` over the decoded records: on any
batch the splice must give exactly its bytes, or decline (None) and leave the batch to it. It may
decline only for a reason: a small batch, a record not written as Kafka writes one, a section
that is not well-formed, or a timestamp delta past int64.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.codec.batch import RecordBatch, build_batch
from kafkalog.codec.columnar import GiveUp, _starts, known_starts
from kafkalog.codec.compression import Codec
from kafkalog.codec.filter import (
    SPLICE_THRESHOLD,
    BatchRetention,
    Offsets,
    Outcome,
    SpliceJob,
    filter_batch,
    splice_batches,
)
from kafkalog.codec.records import Record, encode_record
from kafkalog.codec.splice import read_spans
from kafkalog.errors import KafkaLogError
from tests.codec.test_columnar import batch_fields, batch_of, record_specs, section_of

SETTINGS = settings(max_examples=80, deadline=None)
INT64_SAFE = 1 << 62
choices = st.fixed_dictionaries(
    {
        "retention": st.sampled_from(list(BatchRetention)),
        "delete_horizon_ms": st.integers(0, 2**42),
        "contains_marker_for_empty_txn": st.booleans(),
    }
)


def splice_batch(batch, removed, *, retention, contains_marker_for_empty_txn=False, **kw):
    """One batch spliced on its own."""
    return splice_batches([SpliceJob(batch, removed, retention, contains_marker_for_empty_txn)], **kw)[0]


def expected(batch, removed, **kw):
    retained = [r for r in batch.records() if r.offset not in removed]
    return filter_batch(batch, retained, **kw)


def written_by_kafka(spec: dict) -> dict:
    """The spec with attributes 0, nulls as -1, minimal varints and an int32 offset delta."""

    def null(field):
        return None if isinstance(field, int) else field

    return {
        "attributes": 0,
        "ts": spec["ts"],
        "od": spec["od"] % (1 << 31),
        "key": null(spec["key"]),
        "value": null(spec["value"]),
        "headers": spec["headers"],
    }


def written_as_kafka_writes(batch, records) -> bool:
    """Whether re-encoding the records against the batch's own bases gives its section back."""
    section = bytearray()
    for r in records:
        encode_record(section, r, batch.base_offset, batch.base_timestamp)
    return bytes(section) == batch.records_section()


@SETTINGS
@given(data=st.data(), n=st.integers(1, 60), fields=batch_fields, kw=choices)
def test_splice_equals_decode_and_reencode_on_any_section(data, n, fields, kw):
    specs = data.draw(record_specs(n))
    if data.draw(st.booleans()):  # records as Kafka writes them, so that these batches splice
        specs = [written_by_kafka(spec) for spec in specs]
    section, _, _ = section_of(specs)
    batch = batch_of(section, n, **fields)
    try:
        records = batch.records()
    except KafkaLogError:  # malformed: left to the decoder to say why, unless the batch goes unread
        got = splice_batch(batch, set(), **kw)
        assert got is None if kw["retention"] is not BatchRetention.DELETE else got.outcome is Outcome.DROPPED
        return
    removed = {r.offset for r in records if data.draw(st.booleans())}
    got = splice_batch(batch, removed, **kw)
    if got is not None:
        assert got == expected(batch, removed, **kw)
    elif n >= SPLICE_THRESHOLD and fields["log_append_time"] is None and written_as_kafka_writes(batch, records):
        extremes = [r.timestamp for r in records] + [batch.base_timestamp, kw["delete_horizon_ms"], batch.base_offset]
        extremes += [r.timestamp - batch.base_timestamp for r in records]  # the deltas, as stored
        assert max(map(abs, extremes)) >= INT64_SAFE  # only an overflow (of a timestamp or an offset) may stop it


@SETTINGS
@given(
    data=st.data(),
    n=st.integers(SPLICE_THRESHOLD, 80),
    codec=st.sampled_from(list(Codec)),
    log_append=st.booleans(),
    horizon=st.one_of(st.none(), st.integers(0, 2**42)),
    kw=choices,
)
def test_builder_batches_always_splice(data, n, codec, log_append, horizon, kw):
    """Batches as Kafka's builder (and ours) writes them: spliced, and equal to the re-encoding."""
    base = data.draw(st.integers(0, 2**40))
    offsets = sorted(data.draw(st.sets(st.integers(base, base + 5000), min_size=n, max_size=n)))
    ts = data.draw(st.integers(0, 2**41))
    headers = st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=9))), max_size=2)
    records = [
        Record(
            o,
            ts + data.draw(st.integers(-(10**6), 10**6)),
            data.draw(st.one_of(st.none(), st.binary(max_size=20))),
            data.draw(st.one_of(st.none(), st.binary(max_size=200))),
            tuple(data.draw(headers)),
        )
        for o in offsets
    ]
    batch = RecordBatch(
        build_batch(
            records,
            codec=codec,
            delete_horizon_ms=horizon,
            producer_id=4,
            producer_epoch=1,
            base_sequence=0,
            timestamp_type=int(log_append),
            log_append_time=ts if log_append else None,
        )
    )
    removed = {o for o in offsets if data.draw(st.booleans())}
    got = splice_batch(batch, removed, **kw)
    assert got is not None and got == expected(batch, removed, **kw)


def _batch(n, **kw):
    return RecordBatch(
        build_batch([Record(100 + i, 5_000 + i, b"k%d" % i, b"v" * i, (("h", b"x"),)) for i in range(n)], **kw)
    )


def _record_bytes(record, base_offset, base_timestamp) -> bytes:
    out = bytearray()
    encode_record(out, record, base_offset, base_timestamp)
    return bytes(out)


def test_unchanged_deltas_copy_the_records_and_changed_ones_rewrite_them():
    batch = _batch(40, codec=Codec.LZ4)
    records = batch.records()
    keep_first = RecordBatch(
        splice_batch(batch, {101, 102, 139}, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0).data
    )
    # the first record stays, so the base timestamp does and every retained record is its own bytes
    assert keep_first.base_timestamp == batch.base_timestamp
    assert keep_first.records_section() == b"".join(
        _record_bytes(r, 100, 5_000) for r in records if r.offset not in (101, 102, 139)
    )
    drop_first = RecordBatch(
        splice_batch(batch, {100}, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0).data
    )
    assert drop_first.base_timestamp == 5_001
    assert drop_first.records() == records[1:]
    assert (drop_first.base_offset, drop_first.last_offset, drop_first.codec) == (100, 139, Codec.LZ4)


def test_outcomes_verbatim_empty_dropped_and_horizon():
    batch = _batch(20)
    every = set(range(100, 120))
    assert splice_batch(batch, set(), retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=7) == (
        Outcome.VERBATIM,
        batch.data,
        False,
    )
    empty = splice_batch(batch, every, retention=BatchRetention.RETAIN_EMPTY, delete_horizon_ms=7)
    assert empty.outcome is Outcome.EMPTY and RecordBatch(empty.data).size == 61
    assert (
        splice_batch(batch, every, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=7).outcome
        is Outcome.DROPPED
    )
    marked = splice_batch(
        batch, set(), retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=7, contains_marker_for_empty_txn=True
    )
    assert marked.horizon_set and RecordBatch(marked.data).delete_horizon_ms == 7


def test_declines_small_batches_and_records_kafka_would_rewrite():
    assert (
        splice_batch(_batch(SPLICE_THRESHOLD - 1), {100}, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0)
        is None
    )
    specs = [{"ts": i, "od": i, "key": b"k", "value": b"v", "headers": ()} for i in range(20)]
    for odd in ({"attributes": 1}, {"ts_pad": 1}, {"length_pad": 1}, {"key": -3}):
        section, _, _ = section_of([{**specs[0], **odd}] + specs[1:])
        batch = batch_of(section, 20)
        assert splice_batch(batch, {1000}, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0) is None
        # the re-encoding writes it as Kafka does
        out = RecordBatch(expected(batch, {1000}, retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0).data)
        assert written_as_kafka_writes(out, out.records())


def test_offsets_are_matched_exactly():
    batch = _batch(30)
    removed = np.array([100, 117, 129])
    out = RecordBatch(
        splice_batch(batch, set(removed.tolist()), retention=BatchRetention.DELETE_EMPTY, delete_horizon_ms=0).data
    )
    assert [r.offset for r in out.records()] == [o for o in range(100, 130) if o not in (100, 117, 129)]


@given(st.lists(st.integers(0, 300), unique=True), st.integers(-1, 301))
def test_offsets_held_as_an_array_are_the_set_of_their_offsets(offsets, probe):
    held = Offsets(np.array(sorted(offsets), np.int64))
    assert held == frozenset(offsets) and len(held) == len(offsets) and bool(held) == bool(offsets)
    assert (probe in held) == (probe in offsets)
    assert sorted(held) == sorted(offsets)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), kw=choices)
def test_a_window_of_batches_splices_as_each_alone(data, kw):
    """Batches spliced together (one read of all their records) give what each gives alone; a
    batch that cannot be spliced (small, or not written as Kafka writes it) leaves the others be."""
    retention, marker = kw.pop("retention"), kw.pop("contains_marker_for_empty_txn")
    jobs, offset = [], 0
    for _ in range(data.draw(st.integers(1, 8))):
        n = data.draw(st.integers(1, 40))
        records = [
            Record(
                offset + i,
                1_000 + data.draw(st.integers(0, 10**6)),
                data.draw(st.binary(max_size=8)),
                data.draw(st.one_of(st.none(), st.binary(max_size=50))),
                (),
            )
            for i in range(n)
        ]
        batch = RecordBatch(
            build_batch(
                records,
                codec=data.draw(st.sampled_from(list(Codec))),
                timestamp_type=data.draw(st.integers(0, 1)),
                log_append_time=77,
            )
        )
        if data.draw(st.integers(0, 5)) == 0:  # a record Kafka would write differently: attributes 1
            section, _, _ = section_of(
                [{"attributes": 1, "ts": 0, "od": i, "key": b"k", "value": b"v"} for i in range(n)]
            )
            batch = batch_of(section, n, base_offset=offset)
        removed = frozenset(offset + i for i in range(n) if data.draw(st.booleans()))
        if data.draw(st.booleans()):  # as partition_outcome gives them
            removed = Offsets(np.array(sorted(removed), np.int64))
        jobs.append(SpliceJob(batch, removed, retention, marker and data.draw(st.booleans())))
        offset += n + data.draw(st.integers(0, 3))
    together = splice_batches(jobs, **kw)
    assert together == [splice_batches([job], **kw)[0] for job in jobs]
    for job, got in zip(jobs, together):
        if got is not None:
            assert got == expected(
                job.batch,
                job.removed,
                retention=job.retention,
                contains_marker_for_empty_txn=job.contains_marker_for_empty_txn,
                **kw,
            )
        elif job.retention is not BatchRetention.DELETE and job.batch.records_count >= SPLICE_THRESHOLD:
            assert job.batch.records()[0].timestamp == 1_700_000_000_000  # only the odd batches are declined


def test_a_count_that_does_not_fit_its_section_is_not_read_into_the_next():
    """Two sections whose records fill them both, but the first holds one record more than it
    declares and the second one fewer: read together, the records would fill all the bytes, so
    each section's start is checked too, and the window is declined (each batch then fails alone)."""

    def section(offsets):
        out = bytearray()
        for o in offsets:
            encode_record(out, Record(o, 1_000, b"k%d" % o, b"v", ()), 0, 1_000)
        return bytes(out)

    first, second = section(range(31)), section(range(31, 60))
    assert read_spans([first, second], [30, 30], [0, 0], [1_000, 1_000], [None, None]) is None
    assert read_spans([first, second], [31, 29], [0, 0], [1_000, 1_000], [None, None]) is not None


@SETTINGS
@given(data=st.data(), n=st.integers(1, 40))
def test_known_spans_give_the_starts_the_walk_finds(data, n):
    """The rewrite's hint (columnar.known_starts): from the record spans the read that decided
    found, or from wrong ones, the record starts `_starts` finds, or its giving up; never its own."""
    section, starts, _ = section_of(data.draw(record_specs(n)))
    spans = np.diff(np.append(starts, len(section)))
    if n > 1 and data.draw(st.booleans()):  # a record boundary moved
        i, shift = data.draw(st.integers(0, n - 2)), data.draw(st.integers(1, 3))
        spans[i] += shift
        spans[i + 1] -= shift

    def found(starts_of):
        try:
            return starts_of().tolist()
        except GiveUp:
            return "gives up"

    assert found(lambda: known_starts(section, n, spans)) == found(lambda: _starts(section, n))
