"""Committed offsets as a DataFrame equal the storage layer's replay of `__consumer_offsets`."""

from __future__ import annotations

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.consumer_offsets import committed_offsets, offset_commit_key, offset_commit_value
from kafkalog.codec.control import ControlType, build_end_txn_marker, control_record
from kafkalog.codec.records import Record
from kafkalog.spark import committed_offsets_df

from . import direct
from .conftest import REAL_BROKER_DIRS

pytestmark = pytest.mark.spark
COLUMNS = ("group", "topic", "partition", "offset", "partitionLeaderEpoch", "metadata", "commitTimestamp")


def replay_directly(log_dir) -> set[tuple]:
    """`committed_offsets` over the records the coordinator applies: control batches dropped, and
    transactional batches kept only when the next marker of their producer is a COMMIT."""
    batches = list(direct.walk(log_dir, {"__consumer_offsets"}))
    applied = []
    for i, (_topic, partition, _, _, batch) in enumerate(batches):
        if batch.is_control:
            continue
        if batch.is_transactional:
            marker = next(
                (
                    control_record(b)
                    for t, p, _, _, b in batches[i + 1 :]
                    if p == partition and b.is_control and b.producer_id == batch.producer_id
                ),
                None,
            )
            if marker is None or marker.type != ControlType.COMMIT:
                continue
        applied += batch.records()
    return {
        (g, t, p, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
        for (g, t, p), v in committed_offsets(applied).items()
    }


def _transactions_log(root):
    """Plain commits, a tombstone, and transactional commits that commit, abort or stay open."""

    def commit(partition, offset):
        return offset_commit_key("g", "t", partition), offset_commit_value(offset, -1, "", 1000 + offset)

    out, offset = bytearray(), 0

    def append(data):
        nonlocal offset
        out.extend(data)
        offset += 1

    for key, value in (commit(0, 5), commit(1, 10)):
        append(build_batch([Record(offset, 1, key, value)]))
    append(build_batch([Record(offset, 2, commit(1, 0)[0], None)]))  # partition 1's commit is deleted
    for pid, partition, value, marker in ((7, 0, 99, False), (8, 2, 30, True), (9, 3, 40, None)):
        key, raw = commit(partition, value)
        append(
            build_batch(
                [Record(offset, 3, key, raw)], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
            )
        )
        if pid == 8:  # a plain commit for another key between the transactional one and its marker
            append(build_batch([Record(offset, 4, *commit(4, 1))]))
        if marker is not None:
            append(build_end_txn_marker(offset=offset, timestamp=5, producer_id=pid, producer_epoch=0, commit=marker))
    (root / "__consumer_offsets-0").mkdir(parents=True)
    (root / "__consumer_offsets-0" / "00000000000000000000.log").write_bytes(bytes(out))
    return root


@pytest.mark.parametrize("case", ["kafka-2.7.1-zk", "confluent-5.1.2-lz4", "generated", "transactions"])
def test_committed_offsets_equal_the_direct_replay(spark, case, small_log, tmp_path):
    if case == "generated":
        log_dir = small_log.path
    elif case == "transactions":
        log_dir = _transactions_log(tmp_path / "log")
    else:
        log_dir = REAL_BROKER_DIRS / case
    got = {tuple(row) for row in committed_offsets_df(spark, str(log_dir)).collect()}
    expected = replay_directly(log_dir)
    assert got == expected
    if case == "confluent-5.1.2-lz4":
        assert len(got) == 18
    elif case == "kafka-2.7.1-zk":
        assert got == set()  # its only commit was deleted by a tombstone
    elif case == "generated":
        assert got == {
            (g, t, p, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
            for (g, t, p), v in small_log.summary.commits.items()
        }
    else:  # aborted (7) and open (9) transactions do not count; the committed one (8) does
        assert {(r[2], r[3]) for r in got} == {(0, 5), (2, 30), (4, 1)}
