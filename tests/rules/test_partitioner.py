"""The repartition rules against independent models: murmur2 as Java computes it with signed ints,
the merge order against a brute-force check of its promises, a group's resume point against the
smallest offset that skips nothing. (tests/kafka/test_repartition.py checks murmur2 against the
Java client's own partitioner.)"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.rules.partitioner import (
    GroupResume,
    murmur2,
    murmur2_many,
    new_partition,
    new_partitions,
    partition_for_key,
    running_max,
)


def _java_int(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def _java_murmur2(data: bytes) -> int:
    """Utils.murmur2 transcribed line by line with Java's int overflow and its >>> and signed bytes."""

    def urshift(x: int, n: int) -> int:
        return _java_int((x & 0xFFFFFFFF) >> n)

    length, seed, m, r = len(data), _java_int(0x9747B28C), 0x5BD1E995, 24
    h = _java_int(seed ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = (
            (data[i4] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = _java_int(k * m)
        k ^= urshift(k, r)
        k = _java_int(k * m)
        h = _java_int(h * m)
        h = _java_int(h ^ k)
    signed = [b - 256 if b > 127 else b for b in data]
    tail = length % 4
    base = length & ~3
    if tail == 3:
        h = _java_int(h ^ ((signed[base + 2] & 0xFF) << 16))
    if tail >= 2:
        h = _java_int(h ^ ((signed[base + 1] & 0xFF) << 8))
    if tail >= 1:
        h = _java_int(h ^ (signed[base] & 0xFF))
        h = _java_int(h * m)
    h = _java_int(h ^ urshift(h, 13))
    h = _java_int(h * m)
    h = _java_int(h ^ urshift(h, 15))
    return h


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_the_java_transcription(data):
    assert murmur2(data) == _java_murmur2(data)


@given(st.binary(max_size=32), st.integers(1, 1000))
def test_partition_for_key_is_in_range_and_uses_the_sign_bit_cleared(data, n):
    p = partition_for_key(data, n)
    assert 0 <= p < n
    assert p == (_java_murmur2(data) & 0x7FFFFFFF) % n  # toPositive, not abs: abs(MIN_VALUE) would be negative


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60), st.integers(1, 50))
def test_the_vectorised_placement_is_the_one_key_at_a_time_rule(keys, n):
    old = np.arange(len(keys), dtype=np.int64)
    assert new_partitions(keys, old, n).tolist() == [new_partition(k, int(p), n) for k, p in zip(keys, old)]
    assert murmur2_many([k for k in keys if k is not None]).tolist() == [murmur2(k) for k in keys if k is not None]


def test_null_keys_keep_their_old_partition_modulo_n():
    assert [new_partition(None, old, 5) for old in range(12)] == [old % 5 for old in range(12)]
    assert new_partition(b"k", 7, 5) == partition_for_key(b"k", 5)


_records = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([None, b"a", b"b", b"c", b"d", b"e"]), st.integers(0, 50)),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(_records, st.integers(1, 6))
def test_merge_order_keeps_each_source_and_each_key_in_order(records, n):
    """Sources are offset-ordered lists of (key, timestamp); the merge sorts each new partition by
    (running max, source, offset). Model: the promises themselves, checked pairwise."""
    by_source: dict[int, list] = {}
    for source, key, ts in records:
        if key is not None:  # as Kafka placed it: a key in one source partition
            source = key[0] % 4
        by_source.setdefault(source, []).append((key, ts))
    placed = []
    for source, recs in by_source.items():
        order = running_max(np.array([ts for _, ts in recs]), -1)
        for offset, ((key, ts), o) in enumerate(zip(recs, order.tolist())):
            placed.append((new_partition(key, source, n), o, source, offset, key, ts))
    for q in range(n):
        merged = sorted(r for r in placed if r[0] == q)
        for i, a in enumerate(merged):
            for b in merged[i + 1 :]:
                if a[2] == b[2]:
                    assert a[3] < b[3]  # one source's records keep their order
                if a[4] is not None and a[4] == b[4]:
                    assert (a[2], a[3]) < (b[2], b[3])  # a key lives in one source: its order is kept
        # where every source's timestamps rise, the merge is by timestamp
        if all(all(x[1] <= y[1] for x, y in zip(recs, recs[1:])) for recs in by_source.values()):
            assert [r[5] for r in merged] == sorted(r[5] for r in merged)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=60, unique=True),
    st.dictionaries(st.integers(0, 4), st.integers(0, 22), max_size=5),
    st.integers(1, 7),
)
def test_group_resume_skips_nothing_and_rereads_least(sources_offsets, committed, chunk):
    """Model: the smallest offset at or below which no unconsumed record lies, found by trying every
    offset; what is read again from it, counted one by one; the streaming rule fed in chunks."""
    recs = sorted(sources_offsets, key=lambda r: (r[1], r[0]))  # some merge order
    src = np.array([s for s, _ in recs], dtype=np.int64)
    off = np.array([o for _, o in recs], dtype=np.int64)
    new = np.arange(len(recs), dtype=np.int64)
    end = len(recs)

    def consumed(i: int) -> bool:
        return recs[i][1] < committed.get(recs[i][0], 0)

    expected = max(x for x in range(end + 1) if all(consumed(i) for i in range(x)))
    reread = sum(1 for i in range(expected, end) if consumed(i))
    resume = GroupResume(committed)
    for start in range(0, end, chunk):
        resume.feed(src[start : start + chunk], off[start : start + chunk], new[start : start + chunk])
    assert resume.result(end) == (expected, reread)


@given(st.integers(0, 5_000), st.integers(0, 5_000), st.integers(1, 700))
def test_blocks_tile_the_range_at_multiples_of_their_size(start, length, size):
    from kafkalog.rules.partitioner import blocks

    cut = blocks(start, start + length, size)
    assert [o for low, high in cut for o in range(low, high)] == list(range(start, start + length))
    assert all(low // size == (high - 1) // size for low, high in cut)  # never across a multiple
    assert all(high % size == 0 for _, high in cut[:-1])  # every cut is at one


@given(st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 6)), st.integers(-1, 100), max_size=15))
def test_block_carries_are_the_greatest_timestamp_of_the_blocks_before(maxima):
    from kafkalog.rules.partitioner import NO_CARRY, block_carries

    carries = block_carries(maxima)
    assert set(carries) == set(maxima)
    for (source, block), carry in carries.items():
        before = [ts for (s, b), ts in maxima.items() if s == source and b < block]
        assert carry == max(before, default=NO_CARRY)
