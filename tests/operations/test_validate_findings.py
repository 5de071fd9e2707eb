"""`validate`'s findings as a table: `ValidationReport.findings_table`, `--findings` (Parquet, Delta)
and `validate_frame` on Spark, each holding the report's findings, those of the partitions and those
checked on the driver, and the counts of the findings the per-file cap left out."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from kafkalog import cli
from kafkalog.operations.generate import generate, small_preset
from kafkalog.operations.validate import validate_frame, validate_paths
from kafkalog.operations.validate_report import FINDINGS_SCHEMA, ValidationReport

SPEC = small_preset(seed=7)
INTERVALS = {t.name: t.index_interval_bytes for t in SPEC.topics}  # the indexes as written: no infos


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """The small preset, and its configuration beside it (`config.properties`)."""
    path = tmp_path_factory.mktemp("findings") / "clean"
    (path.parent / "config.properties").write_text(generate(str(path), SPEC).config_properties())
    return path


@pytest.fixture(scope="module")
def damaged(clean) -> Path:
    """Findings of every origin: two bad batches in one segment (one kept, one over the cap of 1;
    checked with its partition), and, checked on the driver, a meta.properties Kafka refuses, a high
    watermark above its partition's log end and a checkpoint entry for a partition not there."""
    path = clean.parent / "damaged"
    shutil.copytree(clean, path)
    segment = sorted((path / "orders-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[200] ^= 0xFF  # in the first batch's records
    data[-50] ^= 0xFF  # in the last batch's records
    segment.write_bytes(bytes(data))
    checkpoint = path / "replication-offset-checkpoint"
    entries = [line for line in checkpoint.read_text().splitlines()[2:] if not line.startswith("orders 0 ")]
    entries += ["orders 0 999999", "gone 0 5"]
    checkpoint.write_text("\n".join(["0", str(len(entries)), *entries]) + "\n")
    (path / "meta.properties").write_text("version=7\n")
    return path


def assert_rows(table, report: ValidationReport) -> None:
    """`table` holds the report's findings, in order, then a row for each of its suppressed counts."""
    got = [tuple(row.values()) for row in table.to_pylist()]
    kept = len(report.findings)
    assert got[:kept] == [(p.check, p.severity, p.file, p.position, p.offset, p.message, 1) for p in report.findings]
    left_out = sorted(
        (c, s, f, n) for c, s, f, position, offset, _, n in got[kept:] if position is None and offset is None
    )
    assert len(left_out) == len(got) - kept
    assert left_out == sorted((c, s, f, n) for (c, f, s), n in report.suppressed.items())


def test_the_table_holds_every_finding_and_what_the_cap_left_out(damaged):
    report = validate_paths([str(damaged)], index_interval_bytes=INTERVALS, max_findings_per_check=1)
    # from the partitions, and from the driver's checks of the log dir
    assert {"batch.crc", "meta_properties.parse", "checkpoint.range", "checkpoint.unknown_partition"} <= {
        p.check for p in report.findings
    }
    assert sum(report.suppressed.values()) > 0
    table = report.findings_table()
    assert table.schema == FINDINGS_SCHEMA
    assert_rows(table, report)
    totals: Counter = Counter()
    for row in table.to_pylist():
        totals[row["severity"]] += row["count"]
    assert {s: totals[s] for s in ("error", "warning", "info")} == report.severity_counts()


def test_the_command_writes_the_findings_as_parquet_or_delta_with_its_exit_code(damaged, clean, tmp_path, capsys):
    report = validate_paths([str(damaged)], index_interval_bytes=INTERVALS)
    args = ["--config-file", str(clean.parent / "config.properties"), "--quiet"]
    parquet, delta = tmp_path / "findings.parquet", tmp_path / "findings"
    assert cli.main(["validate", str(damaged), *args, "--json", "--findings", str(parquet)]) == 1
    assert capsys.readouterr().out.strip() == report.to_json()  # the report, as without --findings
    written = pq.read_table(parquet)
    assert written.schema == FINDINGS_SCHEMA
    assert_rows(written, report)

    assert cli.main(["validate", str(damaged), *args, "--findings", str(delta), "--findings-format", "delta"]) == 1
    assert DeltaTable(str(delta)).to_pyarrow_table() == written
    # a clean run replaces the table's rows with none; Delta's history keeps the earlier run's
    assert cli.main(["validate", str(clean), *args, "--findings", str(delta), "--findings-format", "delta"]) == 0
    now, before = DeltaTable(str(delta)), DeltaTable(str(delta), version=0)
    assert now.to_pyarrow_table().num_rows == 0 and now.schema().to_arrow().names == FINDINGS_SCHEMA.names
    assert before.to_pyarrow_table() == written

    assert cli.main(["validate", str(damaged), *args, "--findings", str(tmp_path / "no" / "f.parquet")]) == 2
    assert "cannot write the findings" in capsys.readouterr().err


@pytest.mark.spark
def test_validate_frame_holds_the_reports_findings(spark, damaged, clean):
    from kafkalog.spark.scan import spark_schema

    options = {"index_interval_bytes": INTERVALS, "max_findings_per_check": 1}
    frame = validate_frame(spark, [str(damaged)], **options)
    assert frame.schema == spark_schema(FINDINGS_SCHEMA)
    # the findings the driver alone finds, of the executors' checks and the driver's alike
    assert_rows(frame.toArrow(), validate_paths([str(damaged)], **options))
    empty = validate_frame(spark, [str(clean)], index_interval_bytes=INTERVALS)
    assert empty.schema == spark_schema(FINDINGS_SCHEMA) and empty.count() == 0
