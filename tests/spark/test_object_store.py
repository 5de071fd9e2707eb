"""kafkalog against a real S3 API (moto's server on 127.0.0.1, `s3_server` in tests/conftest.py), configured
as an operator configures it: `s3://` URIs and the standard AWS environment variables.

Each command reads the log directory from the bucket and gives what it gives on the same files on
local disk: `dump`, `validate` and `plan` the same output, the data source the same records, and
`compact`, `retain` and `purge` with `--output s3://...` the same bytes in every file. Consumed
retention reads its committed offsets from a Parquet table in the bucket, and the purge ledger is
written there. An in-place rewrite of an object-store path is refused: a rename there is a copy and a
delete, which Kafka's swap protocol cannot make crash-safe.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from kafkalog import tuning
from kafkalog.cli import main
from kafkalog.config import resolver_from
from kafkalog.operations.compact import compact
from kafkalog.operations.purge import purge
from kafkalog.operations.retain import retain
from kafkalog.scan.inventory import list_segments
from kafkalog.scan.scan_plan import plan_scan
from kafkalog.spark import narrow_scan
from kafkalog.storage.logdir import copy_log_dir

pytestmark = pytest.mark.spark

BUCKET = "kafkalog-archive"
NOW = 1_700_100_000_000
SECRET = b"object-store-test-secret"


def files(root: str) -> dict[str, str]:
    """relative path -> sha256 of every file under `root` (a local path or s3:// URI)."""
    fs, path = pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)
    out = {}
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type == pafs.FileType.File:
            with fs.open_input_file(info.path) as f:
                out[info.path[len(path) :].lstrip("/")] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def archive(s3_server, small_log, tmp_path_factory):
    """The small generated log directory, locally and in the bucket (without the broker's `.lock`)."""
    s3_server.create_bucket(BUCKET)
    local = tmp_path_factory.mktemp("s3-local") / "log"
    shutil.copytree(small_log.path, local, ignore=shutil.ignore_patterns(".lock"))
    copy_log_dir(str(local), f"s3://{BUCKET}/log")
    assert files(f"s3://{BUCKET}/log") == files(str(local))
    return local, f"s3://{BUCKET}/log"


def test_reading_commands_give_what_they_give_on_local_disk(archive, capsys):
    local, remote = archive
    outputs = {}
    for where in (str(local), remote):
        for command in (["dump", where, "--records"], ["validate", where, "--json"], ["plan", where, "--force"]):
            code = main(
                command + (["--config", "cleanup.policy=compact", "--now", str(NOW)] if command[0] == "plan" else [])
            )
            assert code in (0, 1)
            out = capsys.readouterr().out
            outputs[(command[0], where)] = (
                out.replace(remote, "<root>").replace(remote.split("://")[1], "<root>").replace(str(local), "<root>")
            )
    for command in ("dump", "validate", "plan"):
        assert outputs[(command, remote)] == outputs[(command, str(local))], command
    assert json.loads(outputs[("validate", remote)])["severities"]["error"] == 0


def test_the_data_source_reads_the_bucket(spark, archive):
    local, remote = archive
    from pyspark.sql import functions as F

    def digest(path):
        df = spark.read.format("kafkalog").load(path)
        return df.select(F.count("*"), F.bit_xor(F.xxhash64("topic", "partition", "offset", "key", "value"))).first()

    assert digest(remote) == digest(str(local))


def test_rewrites_write_the_same_bytes_to_the_bucket(spark, archive, tmp_path):
    local, remote = archive
    resolver = resolver_from(settings=["cleanup.policy=compact"])
    compact(spark, str(local), resolver, NOW, force=True, output=str(tmp_path / "compacted"))
    compact(spark, remote, resolver, NOW, force=True, output=f"s3://{BUCKET}/compacted")
    assert files(f"s3://{BUCKET}/compacted") == files(str(tmp_path / "compacted"))

    # consumed retention, with the committed offsets in a Parquet table in the bucket
    offsets = pa.table({"group": ["g"], "topic": ["orders"], "partition": [0], "offset": [40]})
    s3, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}/x")
    pq.write_table(offsets, f"{BUCKET}/offsets.parquet", filesystem=s3)
    pq.write_table(offsets, tmp_path / "offsets.parquet")
    config = {"retention.ms": "1000", "retention.commitoffset.enable": "true", "retention.commitoffset.ms": "1000"}
    # not legacy-v0: without timestamps, time retention reads a segment's mtime, and an object store's is
    # the upload time (docs/semantics.md)
    topics = ["orders", "payments", "customers", "clicks", "legacy-v1"]
    reports = [
        retain(src, config=config, now_ms=NOW, committed_offsets=offs, output=out, topics=topics).to_dict()
        for src, offs, out in (
            (str(local), str(tmp_path / "offsets.parquet"), str(tmp_path / "retained")),
            (remote, f"s3://{BUCKET}/offsets.parquet", f"s3://{BUCKET}/retained"),
        )
    ]
    assert reports[0]["totals"] == reports[1]["totals"] and reports[0]["totals"]["segmentsDeleted"] > 0
    assert files(f"s3://{BUCKET}/retained") == files(str(tmp_path / "retained"))

    # purge, its ledger in the bucket: the session has delta-spark but no S3 filesystem, so deltalake writes it
    runs = [
        purge(spark, src, [b"key-000001"], topics=["orders"], ledger=ledger, secret=SECRET, now=NOW, output=out)
        for src, ledger, out in (
            (str(local), str(tmp_path / "ledger"), str(tmp_path / "purged")),
            (remote, f"s3://{BUCKET}/ledger", f"s3://{BUCKET}/purged"),
        )
    ]
    assert runs[0].total("removed") == runs[1].total("removed") > 0 and runs[1].remaining == 0
    assert files(f"s3://{BUCKET}/purged") == files(str(tmp_path / "purged"))
    from deltalake import DeltaTable

    assert DeltaTable(f"s3://{BUCKET}/ledger").to_pyarrow_table().num_rows == runs[1].ledger_rows > 0


def test_an_in_place_rewrite_of_a_bucket_is_refused(archive, capsys):
    _, remote = archive
    before = files(remote)
    for command in (
        ["compact", remote, "--config", "cleanup.policy=compact"],
        ["retain", remote, "--config", "retention.ms=1"],
    ):
        assert main(command + ["--now", str(NOW)]) == 2
        err = capsys.readouterr().err
        assert "no atomic rename" in err and "--output" in err and len(err.strip().splitlines()) == 1
    assert files(remote) == before


def test_a_scan_reads_each_segment_in_large_ranged_reads(spark, archive, s3_server):
    """No request per batch: a scan reads each work unit of a `.log` in ranged GETs of up to
    tuning.READ_CHUNK_BYTES bytes (and one more where a batch straddles a chunk's end)."""
    local, remote = archive
    allowed: Counter = Counter()
    for unit in plan_scan(remote, min_tasks=1).units:
        allowed[unit.path] += 2 * -(-unit.nbytes // tuning.READ_CHUNK_BYTES)
    batches = sum(1 for segment in list_segments(str(local)) for _ in segment.batches())
    before = len(s3_server.requests())
    assert narrow_scan(spark, remote, min_tasks=1).count() > 0
    reads = [r for r in s3_server.requests()[before:] if r.method == "GET" and r.path.endswith(".log")]
    per_file = Counter(r.path.removeprefix("/") for r in reads)
    assert set(per_file) == set(allowed)
    assert all(per_file[path] <= allowed[path] for path in allowed), (per_file, allowed)
    assert all(r.status == 206 for r in reads)  # ranged: Partial Content
    assert batches >= 5 * len(reads), (batches, len(reads))
