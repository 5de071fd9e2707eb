"""Hypothesis strategies for records and batches, shared by the codec tests."""

from __future__ import annotations

from hypothesis import strategies as st

from kafkalog.codec.records import Record

timestamps = st.one_of(st.just(-1), st.integers(0, 2**53))
maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw, min_size=1, max_size=20, with_headers=True):
    """Records with strictly increasing offsets (gaps allowed, as after compaction)."""
    n = draw(st.integers(min_size, max_size))
    base = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    ts = draw(st.integers(0, 2**41))
    out = []
    offset = base
    for i in range(n):
        if i:
            offset += gaps[i]
        out.append(
            Record(
                offset,
                ts + draw(st.integers(-10_000, 10_000)),
                draw(maybe_bytes),
                draw(maybe_bytes),
                draw(headers) if with_headers else (),
            )
        )
    return out
