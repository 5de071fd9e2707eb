"""A purge and the replicas the KRaft metadata names (operations/replicas.py wired into purge): a replica
not given is refused before anything is written, or, with allow_missing_replicas, purged around and
recorded in the result and the run table; without metadata the summary says it cannot know."""

from __future__ import annotations

import shutil

import pytest
from deltalake import DeltaTable

from kafkalog.errors import ConfigError
from kafkalog.operations.purge import purge
from kafkalog.operations.replicas import MissingReplica
from kafkalog.storage.ledger import runs_path

from ..operations.test_replicas import tree_digest
from ..storage.test_kraft_metadata import FAR_FUTURE, kraft_log_dir
from ..storage.test_metadata_records import batch, metadata

SECRET = b"replica-tests-secret-0123456789abcdef"
ORDERS_ID, DIRECTORY = "WBvXqWGWSEWViPkqsHADUQ", "CKCcG0CzPP3oP8f46qNcqQ"  # the real metadata log's
OTHER = "ZGlyZWN0b3J5LTIAAAAAAA"
NOW = 1_800_000_000_000  # a clock the ledger's timestamps hold


def test_a_missing_replica_is_refused_before_anything_is_written_or_recorded_when_allowed(spark, tmp_path):
    log_dir = kraft_log_dir(tmp_path)
    change = dict(partitionId=0, topicId=ORDERS_ID, replicas=[1, 2], directories=[DIRECTORY, OTHER])
    with open(log_dir / "__cluster_metadata-0" / "00000000000000000012.log", "ab") as log:
        log.write(batch(22, metadata("PartitionChangeRecord", 1, **change)))
    ledger = str(tmp_path / "ledger")
    before = tree_digest(log_dir)
    args = dict(topics=["orders"], where="true", ledger=ledger, secret=SECRET, now=NOW)
    with pytest.raises(ConfigError, match=f"the replica of orders-0 on broker 2 \\(directory {OTHER}\\) is not among"):
        purge(spark, str(log_dir), [], **args)
    assert tree_digest(log_dir) == before and not (tmp_path / "ledger").exists()

    result = purge(spark, str(log_dir), [], allow_missing_replicas=True, **args)
    assert result.total("removed") == 300
    assert result.replicas.missing == [MissingReplica("orders", 0, 2, OTHER)]
    assert result.summary().endswith(
        f"; WARNING: 1 replicas were not given and are not purged: orders-0 on broker 2 (directory {OTHER})"
    )
    missing = [{"topic": "orders", "partition": 0, "broker": 2, "directory": OTHER}]
    assert result.to_dict()["missingReplicas"] == missing
    (run,) = DeltaTable(runs_path(ledger)).to_pyarrow_table().to_pylist()
    assert run["missing_replicas"] == missing


def test_without_metadata_the_summary_says_it_cannot_know_about_other_copies(spark, tmp_path):
    log_dir = kraft_log_dir(tmp_path)
    shutil.rmtree(log_dir / "__cluster_metadata-0")
    result = purge(spark, str(log_dir), [b"key-000003"], topics=["orders"], now=FAR_FUTURE, dry_run=True)
    assert result.summary().endswith(
        "; WARNING: no KRaft metadata log among the log dirs (--metadata DIR names one): kafkalog cannot know "
        "whether other copies of these partitions exist, on other brokers or in other log dirs"
    )
    assert result.to_dict()["missingReplicas"] is None
