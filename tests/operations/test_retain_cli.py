"""`kafkalog retain` as users meet it: options, output forms, exit codes, reports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from kafkalog.cli import main

NOW = 1_700_000_400_332  # the generated data's end (the small preset, seed 0)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    base = tmp_path_factory.mktemp("retain-cli")
    log_dir, props = base / "log", base / "topics.properties"
    assert main(["generate", str(log_dir), "--preset", "small", "--config-out", str(props)]) == 0
    return log_dir, props


@pytest.fixture
def copy(generated, tmp_path):
    log_dir, props = generated
    target = tmp_path / "log"
    shutil.copytree(log_dir, target)
    return target, props


def snapshot(root):
    return {p.relative_to(root): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_dry_run_reports_and_changes_nothing(generated, tmp_path, capsys):
    log_dir, props = generated
    before = snapshot(log_dir)
    report_path = tmp_path / "report.json"
    code = main(
        [
            "retain",
            str(log_dir),
            "--config-file",
            str(props),
            "--config",
            "retention.ms=200000",
            "--now",
            str(NOW),
            "--dry-run",
            "--report",
            str(report_path),
        ]
    )
    assert code == 0 and snapshot(log_dir) == before
    out = capsys.readouterr().out
    assert "dry run" in out and "by retention.ms" in out
    report = json.loads(report_path.read_text())
    assert report["dryRun"] and report["nowMs"] == NOW and report["totals"]["segmentsDeleted"] > 0
    assert {p["topic"] for p in report["partitions"]} >= {"orders", "__consumer_offsets"}
    offsets = next(p for p in report["partitions"] if p["topic"] == "__consumer_offsets")
    assert offsets["cleanupPolicy"] == "compact" and not offsets["changed"]


def test_in_place_with_topic_changes_only_that_topic(copy, capsys):
    log_dir, props = copy
    before = snapshot(log_dir)
    code = main(
        [
            "retain",
            str(log_dir),
            "--config-file",
            str(props),
            "--config",
            "retention.ms=200000",
            "--now",
            str(NOW),
            "--topic",
            "orders",
        ]
    )
    assert code == 0 and "2 of 2 partitions change" in capsys.readouterr().out
    changed = {path.parts[0] for path, content in snapshot(log_dir).items() if before.get(path) != content}
    changed |= {path.parts[0] for path in before if not (log_dir / path).exists()}
    assert {name for name in changed if (log_dir / name).is_dir()} == {"orders-0", "orders-1"}


def test_delete_records_prints_the_tools_lines_and_exits_1_when_a_partition_is_refused(copy, tmp_path, capsys):
    log_dir, props = copy
    request = tmp_path / "delete.json"
    request.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "orders", "partition": 0, "offset": 100},
                    {"topic": "orders", "partition": 1, "offset": -1},
                    {"topic": "clicks", "partition": 0, "offset": 5000},
                ],
            }
        )
    )
    code = main(
        [
            "retain",
            str(log_dir),
            "--config-file",
            str(props),
            "--now",
            str(NOW),
            "--delete-records",
            str(request),
            "--truncate-below-start",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "partition: orders-0\tlow_watermark: 100" in out
    assert "partition: orders-1\tlow_watermark: 400" in out
    assert (
        "partition: clicks-0\terror: Cannot increment the log start offset to 5000 of partition clicks-0 since "
        "it is larger than the high watermark 300"
    ) in out
    assert main(["validate", str(log_dir)]) == 0


def test_a_bad_delete_records_file_fails_with_the_tools_message(copy, tmp_path, capsys):
    log_dir, props = copy
    request = tmp_path / "delete.json"
    request.write_text('{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,"offset":2}]}')
    assert main(["retain", str(log_dir), "--delete-records", str(request)]) == 2
    assert "Offset json file contains duplicate topic partitions: t-0" in capsys.readouterr().err


def test_output_writes_a_new_valid_log_dir_and_leaves_the_input(generated, tmp_path, capsys):
    log_dir, props = generated
    before = snapshot(log_dir)
    out = tmp_path / "out"
    code = main(
        [
            "retain",
            str(log_dir),
            "--config-file",
            str(props),
            "--now",
            str(NOW),
            "--output",
            str(out),
            "--config",
            "retention.ms=100000",
            "--json",
        ]
    )
    assert code == 0 and snapshot(log_dir) == before
    report = json.loads(capsys.readouterr().out)
    assert report["output"] == str(out) and report["totals"]["segmentsRolled"] > 0
    assert main(["validate", str(out)]) == 0
    capsys.readouterr()
    # a second run on the output does nothing
    assert (
        main(
            [
                "retain",
                str(out),
                "--config-file",
                str(props),
                "--now",
                str(NOW),
                "--config",
                "retention.ms=100000",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["totals"]["partitionsChanged"] == 0


def test_consumed_retention_from_a_file_with_group_filters(copy, tmp_path, capsys):
    log_dir, props = copy
    offsets = tmp_path / "offsets.csv"
    offsets.write_text(
        "group,topic,partition,offset\nbilling,orders,0,300\nbilling,orders,1,300\naudit,orders,0,10\naudit,orders,1,\n"
    )
    args = [
        "retain",
        str(log_dir),
        "--config-file",
        str(props),
        "--now",
        str(NOW),
        "--topic",
        "orders",
        "--json",
        "--dry-run",
        "--config",
        "retention.commitoffset.enable=true",
        "--config",
        "retention.commitoffset.ms=1000",
        "--committed-offsets",
        str(offsets),
    ]
    assert main(args) == 0
    parts = {p["partition"]: p for p in json.loads(capsys.readouterr().out)["partitions"]}
    assert parts[0]["consumedRetention"]["minCommittedOffset"] == 10
    assert parts[1]["consumedRetention"]["unknownGroups"] == ["audit"] and not parts[1]["deletedSegments"]
    assert main(args + ["--exclude-groups", "aud*"]) == 0
    parts = {p["partition"]: p for p in json.loads(capsys.readouterr().out)["partitions"]}
    for p in (0, 1):
        assert parts[p]["consumedRetention"]["minCommittedOffset"] == 300
        assert {d["reason"] for d in parts[p]["deletedSegments"]} == {"retention.commitoffset.ms"}


def test_consumed_retention_longer_than_retention_ms_is_refused(copy, capsys):
    log_dir, _ = copy
    code = main(
        [
            "retain",
            str(log_dir),
            "--config",
            "retention.ms=1000",
            "--config",
            "retention.commitoffset.enable=true",
            "--config",
            "retention.commitoffset.ms=2000",
        ]
    )
    assert code == 2 and "must not exceed retention.ms" in capsys.readouterr().err


HOLD_LOCK = """
import fcntl, sys
f = open(sys.argv[1], "rb+")
fcntl.lockf(f, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_locked_log_dir_is_refused(copy, capsys):
    log_dir, _ = copy
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(log_dir / ".lock")],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["retain", str(log_dir), "--now", str(NOW)]) == 2
        assert "locked by another process (a running broker or another kafkalog run)" in capsys.readouterr().err
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


HOLD_FLOCK = """
import fcntl, sys
f = open(sys.argv[1], "rb")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""

TRY_LOCK = """
import fcntl, sys
f = open(sys.argv[1], "a+")
for lock in (fcntl.lockf, fcntl.flock):
    try:
        lock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("acquired")
        lock(f, fcntl.LOCK_UN)
    except OSError:
        print("refused")
"""


def test_a_log_dir_under_flock_is_refused_and_left_as_it_was(copy, capsys):
    log_dir, props = copy
    before = snapshot(log_dir)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_FLOCK, str(log_dir / ".lock")],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert (
            main(
                [
                    "retain",
                    str(log_dir),
                    "--config-file",
                    str(props),
                    "--config",
                    "retention.ms=200000",
                    "--now",
                    str(NOW),
                ]
            )
            == 2
        )
        assert "locked by another process" in capsys.readouterr().err
        assert snapshot(log_dir) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_an_in_place_rewrite_holds_both_locks_until_it_ends(copy, monkeypatch, capsys):
    log_dir, props = copy
    seen = []
    from kafkalog.operations import retain

    def fault(step, name):  # called at each commit step of the swap, in the middle of the rewrite
        if not seen:
            out = subprocess.run(
                [sys.executable, "-c", TRY_LOCK, str(log_dir / ".lock")],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.split()
            seen.append(out)

    run = retain.run_retain
    monkeypatch.setattr(retain, "run_retain", lambda plan: run(plan, fault=fault))
    assert (
        main(
            ["retain", str(log_dir), "--config-file", str(props), "--config", "retention.ms=200000", "--now", str(NOW)]
        )
        == 0
    )
    assert seen == [["refused", "refused"]]  # a broker's tryLock (lockf) and flock(1) both fail meanwhile
    after = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(log_dir / ".lock")], capture_output=True, text=True, timeout=10, check=True
    ).stdout.split()
    assert after == ["acquired", "acquired"]


@pytest.mark.parametrize("output", [False, True])
def test_an_illegal_partition_dir_stops_a_rewrite_before_anything_is_written(copy, tmp_path, capsys, output):
    log_dir, props = copy
    shutil.copytree(log_dir / "orders-0", log_dir / "my orders-0")
    before = snapshot(log_dir)
    extra = ["--output", str(tmp_path / "out")] if output else []
    assert (
        main(
            [
                "retain",
                str(log_dir),
                "--config-file",
                str(props),
                "--config",
                "retention.ms=200000",
                "--now",
                str(NOW),
                *extra,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{log_dir / 'my orders-0'}: not a partition directory Kafka could have made" in err
    assert err.count("\n") == 1  # one line
    assert snapshot(log_dir) == before
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("out*"))


def test_an_interrupted_swap_is_recovered_first(copy, capsys):
    log_dir, props = copy
    partition = log_dir / "orders-0"
    first = sorted(partition.glob("*.log"))[0]
    (partition / (first.name + ".cleaned")).write_bytes(first.read_bytes())
    assert main(["validate", str(log_dir)]) == 1
    capsys.readouterr()
    assert main(["retain", str(log_dir), "--config-file", str(props), "--now", str(NOW), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    orders = next(p for p in report["partitions"] if p["topic"] == "orders" and p["partition"] == 0)
    assert orders["recovered"] == [f"deleted {first.name}.cleaned"]
    assert main(["validate", str(log_dir)]) == 0


def test_a_partition_losing_every_segment_is_said_in_the_dry_run_and_before_the_run_deletes(copy, capsys, caplog):
    log_dir, props = copy
    args = ["retain", str(log_dir), "--config-file", str(props), "--config", "retention.ms=1", "--now", str(NOW)]
    before = snapshot(log_dir)
    assert main([*args, "--topic", "orders", "--dry-run"]) == 0 and snapshot(log_dir) == before
    out = capsys.readouterr().out
    segments = len(list((log_dir / "orders-0").glob("*.log")))
    size = sum(p.stat().st_size for p in (log_dir / "orders-0").glob("*.log"))
    assert (
        f"WARNING: orders-0: every segment ({segments} segments, {size} bytes) would be deleted by "
        "retention.ms=1, now=2023-11-14T22:20:00.332Z (1700000400332)"
    ) in out
    assert "orders-1: every segment" in out and "clicks-0" not in out  # only the chosen topic's
    caplog.set_level("INFO", "kafkalog")
    assert main([*args, "--topic", "orders"]) == 0
    messages = [r.getMessage() for r in caplog.records]
    warned = next(i for i, m in enumerate(messages) if m.startswith("retain: orders-0: every segment"))
    applying = next(i for i, m in enumerate(messages) if "retain apply: started" in m)
    assert warned < applying and "is deleted by retention.ms=1" in messages[warned]
    assert "WARNING: orders-0: every segment" in capsys.readouterr().out


def test_only_the_partitions_that_keep_no_data_are_said_to_lose_everything(generated, capsys):
    log_dir, props = generated
    args = ["--config-file", str(props), "--config", "retention.ms=200000", "--now", str(NOW), "--dry-run"]
    assert main(["retain", str(log_dir), *args]) == 0
    out = capsys.readouterr().out
    warned = set(re.findall(r"^WARNING: (\S+): every segment", out, re.M))
    partial = set(re.findall(r"^  (\S+): log start \d+ -> \d+, (\d+) of (?!\2 )\d+ segments deleted", out, re.M))
    everything = set(re.findall(r"^  (\S+): log start \d+ -> \d+, (\d+) of \2 segments deleted", out, re.M))
    assert warned == {p for p, _ in everything} == {"legacy-v0-0", "legacy-v1-0"}  # their data is oldest
    assert partial and not warned & {p for p, _ in partial}
