"""A control batch without the transactional flag (issue 26): kafkalog compact does with it what
Kafka's cleaner does (CleanedTransactionMetadata.onControlBatchRead reads the first record's type
whatever the flags say): a COMMIT of no transaction is stamped with a delete horizon in one pass and
removed in the next, any other type is kept byte for byte."""

from __future__ import annotations

import pytest

from kafkalog.codec.reader import iter_batches
from kafkalog.config import ConfigResolver
from kafkalog.operations.compact import compact

from ..storage.test_input_hygiene import COMMIT_KEY, write_control_flag_log

pytestmark = pytest.mark.spark

NOW = 1_700_100_000_000


def _control_batches(log_file):
    data = log_file.read_bytes()
    return [(b, data[b.position : b.position + b.size]) for b in iter_batches(data) if b.is_control]


@pytest.mark.parametrize("control_key", [b"key-3", COMMIT_KEY], ids=["unknown", "commit"])
def test_compaction_treats_a_non_transactional_control_batch_as_kafkas_cleaner_does(spark, tmp_path, control_key):
    from kafka.record import MemoryRecords

    write_control_flag_log(tmp_path / "in", control_key=control_key)
    [(_, original)] = _control_batches(tmp_path / "in" / "t-0" / "00000000000000000000.log")
    resolver = ConfigResolver(topics_default={"cleanup.policy": "compact", "delete.retention.ms": "0"})
    compact(spark, str(tmp_path / "in"), resolver, NOW, force=True, output=str(tmp_path / "one"))
    compact(spark, str(tmp_path / "one"), resolver, NOW + 1, force=True, output=str(tmp_path / "two"))
    first, second = (_control_batches(tmp_path / d / "t-0" / "00000000000000000000.log") for d in ("one", "two"))
    if control_key == COMMIT_KEY:
        assert [b.delete_horizon_ms for b, _ in first] == [NOW]  # a marker of no transaction: discardable
        assert second == []
        records = MemoryRecords((tmp_path / "one" / "t-0" / "00000000000000000000.log").read_bytes())
        while (batch := records.next_batch()) is not None:  # kafka-python reads the output
            list(batch)
    else:  # a type the cleaner does not know: kept as it is (kafka-python reads neither input nor output)
        assert [raw for _, raw in first] == [original] and [raw for _, raw in second] == [original]
