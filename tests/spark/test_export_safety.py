"""`kafkalog export` as a user runs it, failing mid-way: a segment that cannot be read (a record
whose bytes changed on disk, found by the executors' CRC check while the table is being written)
leaves a new table's output absent and an existing table byte for byte as it was (Delta through
delta-spark: overwrite and MERGE; Parquet replaced), in one line naming the segment, exit 2. A few
whole exports on the shared session: every step of the table writers is drawn below Spark
(tests/storage/test_table_output.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kafkalog import tuning
from kafkalog.cli import main
from kafkalog.storage.logdir import LogDir
from tests.export_scenario import TOPIC, write_topic


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """The scenario's topic with a byte of partition 1's last segment changed inside a record (the
    driver reads batch headers only: the executors' CRC check finds it), past offset 40."""
    root = tmp_path_factory.mktemp("damaged")
    write_topic(str(root))
    last = LogDir.open(str(root)).partition(TOPIC, 1).segments[-1]
    assert last.base_offset > 40
    path = Path(last.log_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    return root, str(path)


def run(capsys, *args) -> tuple[int, str]:
    code = main(["export", *args])
    return code, capsys.readouterr().err


def one_line(err: str, names: str) -> None:
    lines = [line for line in err.strip().splitlines() if line.startswith("kafkalog export:")]
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in err, err


def test_a_failed_export_leaves_its_output_as_it_was(spark, damaged, tmp_path, capsys, monkeypatch, caplog):
    root, segment = damaged
    out = tmp_path / "table"
    base = [str(root), "--topic", TOPIC, "--output", str(out)]

    # a new table: nothing at the output, no staging directory beside it
    code, err = run(capsys, *base)
    assert code == 2
    one_line(err, segment)
    assert "CRC" in err and sorted(p.name for p in tmp_path.iterdir()) == []

    caplog.set_level(logging.INFO, logger="kafkalog.progress")
    assert run(capsys, *base, "--as-of-offset", "40")[0] == 0  # reads below the damaged segment
    phases = {r.getMessage().split(":")[0] for r in caplog.records if r.name == "kafkalog.progress"}
    assert {"export plan", "export write"} <= phases
    before = tree(tmp_path)

    # a second plain export is refused before Spark works: the table stays
    code, err = run(capsys, *base, "--as-of-offset", "41")
    assert code == 2 and tree(tmp_path) == before
    one_line(err, str(out))
    assert "--overwrite replaces it" in err

    # an overwrite and a MERGE (delta-spark's) that fail mid-way: the table byte for byte as it was
    monkeypatch.setattr(tuning, "DRIVER_MERGE_BYTES", -1)
    for again in ("--overwrite", "--incremental"):
        code, err = run(capsys, *base, again)
        assert code == 2, again
        one_line(err, segment)
        assert tree(tmp_path) == before, again


def test_parquet_is_written_once_unless_overwrite_and_a_failed_overwrite_keeps_it(spark, damaged, tmp_path, capsys):
    root, segment = damaged
    out = tmp_path / "snapshot"
    args = [str(root), "--topic", TOPIC, "--output", str(out), "--format", "parquet"]
    # partition 0 to its end (an as-of offset past it is said), partition 1 below its damaged segment
    with pytest.warns(UserWarning, match=f"as-of offset 1000000 of {TOPIC}-0 lies past its end"):
        assert main(["export", *args, "--as-of-offset", '{"0": 1000000, "1": 30}']) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["asOfPastEnd"] == {"0": {"asOf": 1000000, "end": report["endOffsets"]["0"]}}
    before = tree(tmp_path)
    code, err = run(capsys, *args)
    assert code == 2 and tree(tmp_path) == before
    one_line(err, str(out))
    code, err = run(capsys, *args, "--overwrite")
    assert code == 2 and tree(tmp_path) == before
    one_line(err, segment)
