"""operations/purge_tables.py without Spark: verify-purge's check of tables by fingerprint, which
finds a purged key in a Delta log's statistics as well as in the data, and the checks before a run."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from kafkalog.errors import ConfigError
from kafkalog.operations.purge_tables import check_tables, verify_tables
from kafkalog.storage import tables
from kafkalog.storage.ledger import fingerprint
from kafkalog.storage.tables.erase import check_table, erase

SECRET = b"purge-tables-tests-secret-012345"


def _table(path: str) -> str:
    """A Delta table with string keys (whose statistics, min and max, hold keys) of two versions."""
    rows = pa.table(
        {
            "key": ["aaron@example.com", "bob@example.com", "zed@example.com"],
            "topic": ["users"] * 3,
            "partition": pa.array([0, 0, 0], pa.int32()),
            "offset": [0, 1, 2],
        }
    )
    note = json.dumps(
        {tables.NOTE_KEY: {"topic": "users", "mode": "latest", "endOffsets": {"0": 3}, "keyFormat": "string"}}
    )
    tables.write_table(path, rows.slice(0, 2), "delta", note=note)
    tables.write_table(path, rows, "delta", note=note)
    return path


def test_verify_tables_finds_a_key_in_the_delta_logs_statistics_until_the_erase(tmp_path):
    path = _table(str(tmp_path / "t"))
    scopes = {fingerprint(SECRET, b"aaron@example.com"): (False, {"users"})}
    (before,) = verify_tables([path], scopes, SECRET)
    assert before["found"] and any(f.startswith("_delta_log") for f in before["files_found"])
    assert any(f.endswith(".parquet") and "_delta_log" not in f for f in before["files_found"])
    erase(check_table(path), {}, [b"aaron@example.com"])
    (after,) = verify_tables([path], scopes, SECRET)
    assert after["found"] == 0 and after["files"] >= 2 and after["values"] > 0
    # a key purged from another topic is not looked for in this topic's table
    other = {fingerprint(SECRET, b"bob@example.com"): (False, {"orders"})}
    assert verify_tables([path], other, SECRET)[0]["found"] == 0
    assert verify_tables([path], {fingerprint(SECRET, b"bob@example.com"): (True, set())}, SECRET)[0]["found"]


def test_the_checks_before_a_run(tmp_path):
    path = _table(str(tmp_path / "t"))
    with pytest.raises(ConfigError, match="given twice"):
        check_tables([path, path + "/"])
    with pytest.raises(ConfigError, match="--key-column names the key column of a --table"):
        check_tables([], "id")
    with pytest.raises(ConfigError, match="--output purges a copy"):
        check_tables([path], output=str(tmp_path / "out"))
    assert [t.topic for t in check_tables([path])] == ["users"]
