"""The command line as users meet it: exit codes and output forms."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from kafkalog.cli import main

from .conftest import REAL_FIXTURES


def test_validate_exit_codes(capsys, tmp_path):
    assert main(["validate", str(REAL_FIXTURES / "broker-dirs" / "kafka-gzip-idempotent")]) == 0
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", str(bad)]) == 1
    assert main(["validate", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_validate_json_names_file_position_offset(capsys):
    bad = next((REAL_FIXTURES / "captured" / "kafka-rust").glob("*invalid_crc*"))
    assert main(["validate", "--json", str(bad)]) == 1
    report = json.loads(capsys.readouterr().out)
    (problem,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert (problem["check"], problem["position"], problem["offset"]) == ("batch.crc", 12, 0)
    assert problem["file"].endswith(bad.name)


def test_bad_config_is_refused_with_kafkas_rule(capsys):
    code = main(["validate", "--config", "index.interval.bytes=-1", str(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0")])
    assert code == 2 and "Value must be at least 0" in capsys.readouterr().err


def test_python_dash_m_runs():
    out = subprocess.run([sys.executable, "-m", "kafkalog", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("kafkalog ")


def test_kafkalog_alone_says_what_it_is_and_lists_every_command(capsys):
    from kafkalog.cli import ABOUT, EXAMPLES

    assert main([]) == 2
    out = capsys.readouterr().out
    assert ABOUT.splitlines()[0] in out
    for command in EXAMPLES:
        assert f"    {command}" in out  # each command, with its one-line summary


@pytest.mark.parametrize(
    "command",
    [
        "generate",
        "dump",
        "validate",
        "plan",
        "compact",
        "retain",
        "purge",
        "verify-purge",
        "evidence",
        "txn-report",
        "export",
        "repartition",
    ],
)
def test_every_commands_help_ends_with_examples(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    lines = capsys.readouterr().out.rstrip().splitlines()
    examples = lines[lines.index("examples:") + 1 :]
    assert len(examples) >= 2 and all(line.strip().startswith(f"kafkalog {command} ") for line in examples)


def test_the_parser_of_one_command_is_that_of_the_whole_and_imports_no_other_command(monkeypatch):
    from kafkalog import cli

    def commands(parser):
        return next(action for action in parser._actions if action.dest == "command").choices

    whole = commands(cli.build_parser())
    assert set(whole) == cli._NAMES
    for name in cli._NAMES:
        alone = commands(cli.build_parser(name))
        assert list(alone) == [name] or name in ("log-dirs", "get-offsets", "configs")
        assert alone[name].format_help() == whole[name].format_help()
    code = "import sys, kafkalog.cli as c; c.build_parser('compact'); print(sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kafkalog.operations.export" not in loaded and "kafkalog.operations.purge" not in loaded
    assert "kafkalog.operations.generate" not in loaded, loaded


def _run_cli(*args, cwd=None):
    import subprocess
    import time

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kafkalog", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )
    return done, time.perf_counter() - start


@pytest.mark.parametrize("case", ["missing", "output-inside", "output-exists", "locked", "illegal-topic"])
def test_what_can_be_checked_without_spark_fails_before_the_jvm_starts(tmp_path, case):
    """One line, exit 2, and no JVM: the command returns in a fraction of what starting Spark takes
    (and Spark's JVM would print its warning on stderr)."""
    import fcntl

    log = tmp_path / "log"
    (log / "t-0").mkdir(parents=True)
    args = ["compact", str(log), "--config", "cleanup.policy=compact"]
    holder = None
    if case == "missing":
        args[1] = str(tmp_path / "nope")
    elif case == "output-inside":
        args += ["--output", str(log / "out")]
    elif case == "output-exists":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "x").write_text("x")
        args += ["--output", str(tmp_path / "out")]
    elif case == "locked":
        holder = open(log / ".lock", "w")
        fcntl.flock(holder, fcntl.LOCK_EX)  # held by this test process: another process is refused
    else:
        (log / "bad topic-0").mkdir()
    try:
        done, seconds = _run_cli(*args)
    finally:
        if holder is not None:
            holder.close()
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog compact: "), done.stderr
    assert seconds < 3, f"{seconds:.1f} s: did Spark start?"


# -- nothing silent: a run that would do nothing says why --------------------------------------------------


def _log_dir(root, *partitions):
    """A log directory of empty partitions, each with one empty segment."""
    for name in partitions:
        (root / name).mkdir(parents=True)
        (root / name / "00000000000000000000.log").write_bytes(b"")
    return root


@pytest.mark.parametrize("command", ["compact", "plan"])
def test_no_compacted_topic_says_why_and_how_to_give_the_config_without_spark(tmp_path, command):
    log = _log_dir(tmp_path / "log", "orders-0", "orders-1", "clicks-0")
    done, seconds = _run_cli(command, str(log), "--now", "0")
    assert done.returncode == 0, done.stderr
    assert "0 of 0 compacted partitions chosen" in done.stdout
    assert "nothing to compact in" in done.stderr and "none of its 2 topics has cleanup.policy=compact" in done.stderr
    for option in ("--config-file", "--topic-config-dir", "--topic-config", "--config"):
        assert option in done.stderr
    assert "jdk.incubator" not in done.stderr and seconds < 3, f"{seconds:.1f} s: did Spark start?"


def test_no_compacted_topic_with_output_still_writes_the_copy(tmp_path, caplog):
    log = _log_dir(tmp_path / "log", "orders-0")
    assert main(["compact", str(log), "--now", "0", "--output", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "orders-0" / "00000000000000000000.log").exists()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"nothing to compact in {log}: topic orders does not have cleanup.policy=compact" in warning


@pytest.mark.parametrize("output", [None, "out"])
def test_compact_checks_the_log_dir_once_a_command(tmp_path, monkeypatch, output):
    """The command line's check before Spark, the plan and the run's destination share one check
    (storage/destination.Checked): one preflight and, in place, one lock probe, not three of each."""
    from kafkalog.storage import destination
    from kafkalog.storage.logdir import LogDir

    checks, probes = [], []
    preflight, probe = destination.preflight, LogDir.ensure_unlocked
    monkeypatch.setattr(destination, "preflight", lambda *a, **k: checks.append(a) or preflight(*a, **k))
    monkeypatch.setattr(LogDir, "ensure_unlocked", lambda self: probes.append(self) or probe(self))
    log = _log_dir(tmp_path / "log", "orders-0")  # no compacted topic: the run needs no Spark
    extra = [] if output is None else ["--output", str(tmp_path / output)]
    assert main(["compact", str(log), "--now", "0", "--quiet", *extra]) == 0
    assert (len(checks), len(probes)) == (1, 1 if output is None else 0)


@pytest.mark.parametrize(
    "command, extra",
    [
        ("compact", ["--dry-run"]),
        ("compact", []),
        ("plan", []),
        ("retain", ["--dry-run"]),
        ("retain", []),
        ("purge", ["--dry-run", "--keys", "keys.txt"]),
        ("txn-report", []),
    ],
)
def test_a_partition_directory_as_log_dir_is_refused_naming_its_parent(tmp_path, capsys, command, extra):
    partition = _log_dir(tmp_path / "log", "orders-0") / "orders-0"
    before = sorted(p.name for p in partition.iterdir())
    (tmp_path / "keys.txt").write_text("k\n")
    extra = [str(tmp_path / arg) if arg == "keys.txt" else arg for arg in extra]
    assert main([command, str(partition), "--now", "0", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kafkalog {command}: {partition}: "), err
    assert "directory of partition orders-0, not a log directory: pass its parent" in err[0]
    assert sorted(p.name for p in partition.iterdir()) == before


def test_validate_and_dump_still_take_a_partition_directory(capsys):
    partition = REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0" / "cities-0"
    assert main(["validate", str(partition)]) == 0
    assert main(["dump", str(partition)]) == 0
    assert '"baseOffset"' in capsys.readouterr().out


@pytest.mark.parametrize("command, plan", [("validate", "plan_validate"), ("dump", "plan_dump")])
def test_validate_and_dump_plan_once_in_preflight_and_the_run_takes_that_plan(capsys, monkeypatch, command, plan):
    """What a spark-submit job does (kafkalog/jobs): preflight builds the plan before Spark starts, and
    the command run with those arguments takes it rather than planning again."""
    from kafkalog.cli import build_parser, preflight

    args = build_parser().parse_args([command, str(REAL_FIXTURES / "broker-dirs" / "kafka-3.1.0")])
    preflight(args)
    planned = args.planned
    assert type(planned).__name__ == {"validate": "ValidatePlan", "dump": "DumpPlan"}[command]

    def again(*_args, **_kwargs):
        raise AssertionError("planned twice")

    monkeypatch.setattr(f"kafkalog.operations.{command}.{plan}", again)
    assert main(args=args) == 0 and args.planned is planned
    assert capsys.readouterr().out


def test_a_log_dir_named_like_a_partition_is_still_a_log_dir(tmp_path, capsys):
    """`kafka-logs-1` is a common log.dirs name: it holds partition directories, so it is one."""
    log = _log_dir(tmp_path / "kafka-logs-1", "orders-0")
    assert main(["retain", str(log), "--now", "0", "--dry-run"]) == 0


@pytest.mark.parametrize("command", ["compact", "plan", "retain", "purge", "txn-report"])
def test_a_topic_that_is_not_there_is_refused_with_the_closest(tmp_path, capsys, command):
    log = _log_dir(tmp_path / "log", "orders-0", "clicks-0")
    (tmp_path / "keys.txt").write_text("k\n")
    extra = ["--keys", str(tmp_path / "keys.txt"), "--dry-run"] if command == "purge" else []
    assert main([command, str(log), "--now", "0", "--topic", "ordres", *extra]) == 2
    err = capsys.readouterr().err
    assert "no partition of topic 'ordres' in this log directory; did you mean 'orders'?" in err


def test_topic_config_for_a_topic_that_is_not_there_is_refused_when_typed_and_a_warning_in_a_file(
    tmp_path, capsys, caplog
):
    log = _log_dir(tmp_path / "log", "orders-0", "clicks-0")
    code = main(["retain", str(log), "--now", "0", "--dry-run", "--topic-config", "ordres:retention.ms=1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--topic-config ordres:...: no partition of topic 'ordres' in this log directory" in err
    assert err.rstrip().endswith("did you mean 'orders'?")
    topics = tmp_path / "topics"
    topics.mkdir()
    (topics / "ordres.properties").write_text("retention.ms=1\n")
    (topics / "__consumer_offsets.properties").write_text("cleanup.policy=compact\n")  # a cluster's usual: not named
    caplog.set_level("WARNING", "kafkalog")
    assert main(["retain", str(log), "--now", "0", "--dry-run", "--topic-config-dir", str(topics)]) == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "1 topic(s) with no partition" in warning and "'ordres' (did you mean 'orders'?)" in warning


def test_a_confluent_server_properties_is_read_with_a_warning(tmp_path, capsys, caplog):
    log = _log_dir(tmp_path / "log", "orders-0")
    server = tmp_path / "server.properties"
    server.write_text("log.retention.hours=1\nconfluent.support.metrics.enable=false\n")
    caplog.set_level("WARNING", "kafkalog")
    assert main(["retain", str(log), "--now", "0", "--dry-run", "--config-file", str(server)]) == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "'confluent.support.metrics.enable'" in warning and str(server) in warning
    assert main(["retain", str(log), "--now", "0", "--config", "confluent.support.metrics.enable=false"]) == 2
    assert "defines no such topic or broker configuration" in capsys.readouterr().err


# -- the clock ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["compact", "plan", "retain", "txn-report"])
def test_the_wall_clock_is_said_as_a_date(tmp_path, capsys, command):
    log = _log_dir(tmp_path / "log", "orders-0")
    extra = ["--dry-run"] if command in ("compact", "retain") else []
    assert main([command, str(log), *extra]) == 0
    err = capsys.readouterr().err
    date = r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ"
    assert re.search(rf"kafkalog {command}: now={date} \(\d{{13}}\), the wall clock", err)


def test_compact_shows_its_now_as_a_date(tmp_path, capsys):
    log = _log_dir(tmp_path / "log", "orders-0")
    assert main(["plan", str(log), "--now", "1700000400332"]) == 0
    captured = capsys.readouterr()
    assert "chosen at now=2023-11-14T22:20:00.332Z (1700000400332)" in captured.out
    assert "the wall clock" not in captured.err  # --now given: nothing read from the clock


def test_generate_prints_a_summary_and_writes_the_manifest_on_request(capsys, tmp_path):
    log_dir, manifest = tmp_path / "log", tmp_path / "manifest.json"
    assert main(["generate", str(log_dir), "--preset", "small", "--seed", "7", "--manifest", str(manifest)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) < 15  # a screen, not the manifest (some 900 lines of JSON for the demo preset)
    assert lines[0].startswith(f"generated {log_dir} (seed 7): 7 topics, 11 partitions, 2,795 records in ")
    assert "  customers: 1 partition, 400 records in 7 segments, cleanup.policy=compact" in lines
    assert lines[-1] == f"manifest: {manifest}"
    written = json.loads(manifest.read_text())
    assert written["logDir"] == str(log_dir) and len(written["partitions"]) == 11


@pytest.mark.spark
def test_a_spark_command_prints_neither_the_jdks_incubator_warning_nor_ivys_report_nor_class_data(tmp_path):
    """Spark's launcher gives the driver JVM `--add-modules=jdk.incubator.vector`, and the JDK says so on
    stderr at every start; kafkalog starts the JVM with its stderr filtered (kafkalog/spark/context.py).
    delta-spark's jars: the first start resolves them through Ivy, whose report is left out, and keeps
    their list (kafkalog/spark/jars.py); the second is told to look there only (`KAFKALOG_JARS_DIR`: a
    list not found would be a warning, and Ivy never runs), names them by path, and delta-spark writes."""
    from kafkalog.spark.context import FETCHING

    assert main(["generate", str(tmp_path / "log"), "--preset", "small", "--seed", "7"]) == 0
    env = {**os.environ, "KAFKALOG_CACHE": str(tmp_path / "cache")}
    env.pop("KAFKALOG_JARS_DIR", None)
    for run_number in (1, 2):
        table = tmp_path / f"customers-{run_number}"
        run = subprocess.run(
            [sys.executable, "-m", "kafkalog", "export", str(tmp_path / "log"), "--topic", "customers",
             "--output", str(table), "--config", "cleanup.policy=compact", "--quiet"],
            capture_output=True, text=True, timeout=600, check=False, env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        # with --quiet: no incubator warning, no Ivy (but the line saying it downloads, on a first run ever)
        assert run.stderr.replace(FETCHING.decode(), "", 1 if run_number == 1 else 0) == "", run.stderr
        assert "[warning]" not in run.stdout, run.stdout  # the JVM's own log (class data sharing's) is off
        commit = (table / "_delta_log" / "00000000000000000000.json").read_text()
        assert '"engineInfo":"Apache-Spark/' in commit and "Delta-Lake/" in commit  # delta-spark wrote it
        assert list((tmp_path / "cache" / "jars").glob("spark-*/io.delta_delta-spark_*.json"))
        # the first run's JVM wrote the class-data archive as it exited (nothing on stdout or stderr); the
        # second mapped it
        assert [p.suffix for p in (tmp_path / "cache" / "class-data").iterdir()] == [".jsa"]
        env["KAFKALOG_JARS_DIR"] = str(tmp_path / "cache" / "jars")


def test_the_jvms_stderr_passes_but_for_the_incubator_warning(capfd):
    import io

    from kafkalog.spark.context import _pass_stderr

    _pass_stderr(io.BytesIO(b"WARNING: Using incubator modules: jdk.incubator.vector\nERROR Executor: lost\nlast"))
    assert capfd.readouterr().err == "ERROR Executor: lost\nlast"


# Ivy's report as Spark 4.2 prints it when delta-spark's jars are in the cache (shortened: 88 lines)
IVY_CACHED = b"""\
:: loading settings :: url = jar:file:/venv/pyspark/jars/ivy-2.5.3.jar!/org/apache/ivy/core/settings/ivysettings.xml
Ivy Default Cache set to: /root/.ivy2.5.2/cache
The jars for the packages stored in: /root/.ivy2.5.2/jars
io.delta#delta-spark_4.2_2.13 added as a dependency
:: resolving dependencies :: org.apache.spark#spark-submit-parent-d03901bb;1.0
\tconfs: [default]
\tfound io.delta#delta-spark_4.2_2.13;4.4.0 in central
:: resolution report :: resolve 1705ms :: artifacts dl 105ms
\t:: modules in use:
\tio.delta#delta-spark_4.2_2.13;4.4.0 from central in [default]
\t---------------------------------------------------------------------
\t|      default     |   37  |   0   |   0   |   4   ||   33  |   0   |
:: retrieving :: org.apache.spark#spark-submit-parent-d03901bb
\tconfs: [default]
\t0 artifacts copied, 33 already retrieved (0kB/29ms)
"""


def test_the_jvms_stderr_leaves_out_ivys_report_but_says_when_it_downloads_and_passes_its_problems(capfd):
    import io

    from kafkalog.spark.context import FETCHING, _pass_stderr

    _pass_stderr(io.BytesIO(b"before\n" + IVY_CACHED + b"ERROR SparkContext: after\n"))
    assert capfd.readouterr().err == "before\nERROR SparkContext: after\n"
    first = IVY_CACHED.replace(
        b"\tfound io.delta",
        b"downloading https://repo1.maven.org/maven2/io/delta/a.jar ...\n\t[SUCCESSFUL ] io.delta#a (9ms)\n"
        b"downloading https://repo1.maven.org/maven2/io/delta/b.jar ...\n\tfound io.delta",
    )
    _pass_stderr(io.BytesIO(first))
    assert capfd.readouterr().err == FETCHING.decode()  # once, however many jars
    failed = IVY_CACHED.split(b":: resolution report")[0] + (
        b":: problems summary ::\n:::: WARNINGS\n\t\tmodule not found: io.delta#delta-spark_4.2_2.13;4.4.0\n"
        b'Exception in thread "main" java.lang.RuntimeException: [unresolved dependency]\n'
    )
    _pass_stderr(io.BytesIO(failed))
    assert capfd.readouterr().err.startswith(":: problems summary ::\n:::: WARNINGS\n\t\tmodule not found")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--latest-by", "header"], "--latest-by header: expected offset, timestamp or header:NAME"),
        (["--latest-by", "timestamp", "--mode", "changelog"], "--mode changelog has none"),
        (["--config", "compaction.strategy=version"], "String must be one of: offset, timestamp, header"),
    ],
)
def test_export_latest_by_is_checked_before_the_jvm_starts(tmp_path, extra, message):
    (tmp_path / "log" / "t-0").mkdir(parents=True)
    done, _ = _run_cli("export", str(tmp_path / "log"), "--topic", "t", "--output", str(tmp_path / "out"), *extra)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
