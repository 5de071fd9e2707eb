"""kafkalog on a Spark Connect session (Databricks serverless and shared clusters, any Spark 4 session
from `SparkSession.builder.remote(...)`): no SparkContext, no RDDs, no accumulators, no JVM gateway.

A real Spark Connect server (the installed pyspark's `SparkConnectServer`, through spark-submit, with
delta-spark's jars as `delta_conf` names them) runs on 127.0.0.1 for this module, and a separate Python
process is its client, as a user's notebook is: it gets its session from `local_session(delta=True)`
with `SPARK_REMOTE` set, and runs compact, purge (its ledger through delta-spark on the server), the
`kafkalog` data source, a scan with `ScanMetrics`, `committed_offsets_df` and `validate_frame` once.
Each test compares what it wrote with the same call on the suite's classic session: every output file
byte for byte, the ledger row for row, DataFrames row for row. (`retain` uses no Spark: nothing to
compare.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyspark
import pytest
from deltalake import DeltaTable

from tests.ports import free_port

from ..conftest import REPO

pytestmark = pytest.mark.spark

NOW = 1_700_100_000_000
SECRET = b"connect-tests-secret-0123456789abcdef"
KEYS = [b"key-000005", b"customer-000002", b"account-000007"]
WHERE = "topic = 'clicks' AND CAST(value AS STRING) LIKE '0:42 %'"
SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


# -- the client: what a user's notebook on a Spark Connect session runs (in its own process) -----------


def client(log_dir: str, config: str, work: str) -> None:
    """Run every Spark-using public function on the Spark Connect session `SPARK_REMOTE` names."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from kafkalog.config import resolver_from
    from kafkalog.operations.compact import compact
    from kafkalog.operations.purge import purge
    from kafkalog.operations.validate import validate_frame
    from kafkalog.spark import ScanMetrics, narrow_scan
    from kafkalog.spark.session import delta_unavailable, local_session
    from kafkalog.storage.logdir import parse_properties

    spark = local_session(delta=True)
    assert isinstance(spark, ConnectSession), f"not a Spark Connect session: {type(spark)}"
    resolver = resolver_from(parse_properties(config))
    out = Path(work)
    compact(spark, log_dir, resolver, NOW, force=True, output=str(out / "compact"))
    purge(spark, log_dir, KEYS, **_purge_options(resolver, out))
    for name, df in _frames(spark, log_dir).items():
        _write_arrow(out / f"{name}.arrow", df)
    _write_arrow(out / "findings.arrow", validate_frame(spark, [log_dir]))  # the indexes' infos
    metrics = ScanMetrics()
    narrow_scan(spark, log_dir, topics=["orders"], partitions=[1], metrics=metrics).count()
    summary = {"scanned": sorted(metrics.executor.files(".log")), "delta_unavailable": delta_unavailable(spark)}
    summary["fresh"] = _fresh_session(log_dir)
    (out / "summary.json").write_text(json.dumps(summary))


def _fresh_session(log_dir: str) -> dict:
    """A new session on the same server, as Databricks gives a notebook (no local_session, no register):
    what `format("kafkalog")` says there, then what `kafkalog.read` reads."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import kafkalog

    fresh = ConnectSession.builder.remote(os.environ["SPARK_REMOTE"]).create()
    try:
        fresh.read.format("kafkalog").load(log_dir).count()
        unregistered = "read"
    except Exception as err:  # Spark's AnalysisException, through the Connect client
        unregistered = str(err)
    return {"unregistered": unregistered, "records": kafkalog.read(fresh, log_dir).count()}


def _purge_options(resolver, out: Path) -> dict:
    return {
        "ledger": str(out / "ledger"),
        "secret": SECRET,
        "where": WHERE,
        "config": resolver,
        "now": NOW,
        "output": str(out / "purge"),
    }


def _frames(spark, log_dir: str) -> dict:
    """The DataFrames both kinds of session must give alike, each in one order."""
    from kafkalog.spark import committed_offsets_df

    records = spark.read.format("kafkalog").load(log_dir)
    return {
        "records": records.orderBy("topic", "partition", "offset"),
        "filtered": records.filter("topic = 'orders' AND offset >= 100").orderBy("partition", "offset"),
        "batches": spark.read.format("kafkalog")
        .option("view", "batches")
        .load(log_dir)
        .orderBy("topic", "partition", "baseOffset"),
        "committed": committed_offsets_df(spark, log_dir).orderBy("group", "topic", "partition"),
    }


def _write_arrow(path: Path, df) -> None:
    table = df.toArrow()
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


# -- the server and one client run for the module ---------------------------------------------------------


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _start_server(work: Path) -> tuple[subprocess.Popen, str, Path]:
    """spark-submit of Spark's Connect server in local[2] mode with delta-spark, in its own process group."""
    from kafkalog.spark.session import DELTA_LOCAL_DEFAULTS, LOCAL_DEFAULTS, delta_conf

    port = free_port()
    conf = {
        **LOCAL_DEFAULTS,
        **delta_conf(),
        **DELTA_LOCAL_DEFAULTS,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }
    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    command = [str(submit), "--master", "local[2]", "--class", SERVER]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    log = work / "server.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("SPARK_REMOTE", None)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            command, cwd=work, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + 300  # the first start fetches delta-spark through Ivy
    while "Spark Connect server started" not in log.read_text(errors="replace"):
        if server.poll() is not None or time.monotonic() > deadline:
            _stop(server)
            raise RuntimeError(f"the Spark Connect server did not start ({' '.join(command)}):\n{_tail(log)}")
        time.sleep(0.5)
    return server, f"sc://127.0.0.1:{port}", log


def _stop(server: subprocess.Popen) -> None:
    """The server's whole process group: the JVM and its Python workers."""
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_on_spark_connect(small_log, work: Path) -> Path:
    """`client` run once on `small_log` against a server started and stopped here; `work`, where it
    wrote. tests/conftest.py's `connect_started_early` calls it in the background from the run's first test."""
    server, url, log = _start_server(work)
    try:
        run = subprocess.run(
            [sys.executable, "-c", "import sys; from tests.spark.test_connect import client; client(*sys.argv[1:])"]
            + [str(small_log.path), small_log.summary.config_properties(), str(work)],
            cwd=REPO,
            env=dict(os.environ, SPARK_REMOTE=url),
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        _stop(server)
    assert run.returncode == 0, f"the Spark Connect client failed:\n{run.stderr[-6000:]}\nserver:\n{_tail(log)}"
    return work


@pytest.fixture(scope="module")
def connect(connect_started_early) -> Path:
    """What the Spark Connect client wrote (`run_on_spark_connect`, started at the run's first test)."""
    return connect_started_early.result()


# -- the same calls on the classic session ----------------------------------------------------------------


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _resolver(small_log):
    from kafkalog.config import resolver_from
    from kafkalog.storage.logdir import parse_properties

    return resolver_from(parse_properties(small_log.summary.config_properties()))


def test_compaction_on_spark_connect_writes_the_bytes_of_a_classic_session(spark, connect, small_log, tmp_path):
    from kafkalog.operations.compact import compact

    classic = tmp_path / "compact"
    result = compact(spark, str(small_log.path), _resolver(small_log), NOW, force=True, output=str(classic))
    assert any(s["records_out"] < s["records_in"] for s in result.segments)  # it did clean
    assert _tree(connect / "compact") == _tree(classic)


def test_purge_and_its_delta_ledger_on_spark_connect_are_those_of_a_classic_session(
    spark, connect, small_log, tmp_path
):
    from kafkalog.operations.purge import purge
    from kafkalog.storage.ledger import runs_path

    purge(spark, str(small_log.path), KEYS, **_purge_options(_resolver(small_log), tmp_path))
    assert _tree(connect / "purge") == _tree(tmp_path / "purge") != _tree(small_log.path)
    ledger = tmp_path / "ledger"

    def rows(path: str, drop: tuple) -> list:
        """The table's rows but `drop`, and but `log_dir`, which names the run's own output."""
        table = DeltaTable(path).to_pyarrow_table()
        assert {Path(d).name for d in table.column("log_dir").to_pylist()} == {"purge"}
        table = table.drop_columns(["log_dir", *drop])
        return sorted(json.dumps(row, default=str, sort_keys=True) for row in table.to_pylist())

    records = rows(str(connect / "ledger"), ("run_id",))
    assert len(records) > len(KEYS) and records == rows(str(ledger), ("run_id",))
    run_columns = ("run_id", "started_at", "finished_at", "log_dirs")  # log_dirs: as log_dir, the run's own output
    assert rows(runs_path(str(connect / "ledger")), run_columns) == rows(runs_path(str(ledger)), run_columns)
    # the server wrote it: delta-spark's commits name Spark, the deltalake package's name delta-rs
    summary = json.loads((connect / "summary.json").read_text())
    assert summary["delta_unavailable"] is None
    log = sorted((connect / "ledger" / "_delta_log").glob("*.json"))
    commits = [json.loads(line) for f in log for line in f.read_text().splitlines()]
    engines = {c["commitInfo"].get("engineInfo", "") for c in commits if "commitInfo" in c}
    assert engines and all("Delta-Lake" in e for e in engines), engines


def test_data_source_scans_and_committed_offsets_on_spark_connect_equal_a_classic_session(spark, connect, small_log):
    from kafkalog.spark import ScanMetrics, narrow_scan

    for name, df in _frames(spark, str(small_log.path)).items():
        with pa.OSFile(str(connect / f"{name}.arrow"), "rb") as source:
            remote = pa.ipc.open_file(source).read_all()
        local = df.toArrow()
        assert remote.num_rows > 0, name
        assert remote.schema == local.schema and remote.equals(local), name
    metrics = ScanMetrics()
    narrow_scan(spark, str(small_log.path), topics=["orders"], partitions=[1], metrics=metrics).count()
    scanned = json.loads((connect / "summary.json").read_text())["scanned"]
    assert scanned and scanned == sorted(metrics.executor.files(".log"))


def test_kafkalog_read_registers_the_format_in_a_fresh_spark_connect_session(spark, connect, small_log):
    fresh = json.loads((connect / "summary.json").read_text())["fresh"]
    assert "DATA_SOURCE_NOT_FOUND" in fresh["unregistered"]  # why the README says to register first
    assert fresh["records"] == spark.read.format("kafkalog").load(str(small_log.path)).count() > 0


def test_validate_frame_on_spark_connect_is_a_classic_sessions(spark, connect, small_log):
    from kafkalog.operations.validate import validate_frame

    with pa.OSFile(str(connect / "findings.arrow"), "rb") as source:
        remote = pa.ipc.open_file(source).read_all()
    assert remote.num_rows > 0 and remote.equals(validate_frame(spark, [str(small_log.path)]).toArrow())
