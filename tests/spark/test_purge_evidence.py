"""Proof of a purge that anyone can check later: the segments table (hashes, counts, the copy's broker
and directory), `verify_purge` over every copy by fingerprints alone (a key planted afterwards is
found and named; an old ledger still verifies), and the signed evidence report, through the library
and the command line."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkalog.cli import main
from kafkalog.codec.records import Record
from kafkalog.operations.evidence import build_report, sign_report, verify_report
from kafkalog.operations.purge import purge
from kafkalog.operations.purge_verify import verify_purge
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.ledger import LedgerError, fingerprint, read_ledger_table, segments_path
from kafkalog.storage.log_writer import PartitionWriter
from kafkalog.storage.logdir import LogDir
from kafkalog.storage.naming import segment_file_name

NOW = 1_800_000_000_000
SECRET = b"evidence-tests-secret-0123456789"
PURGED = [b"alice", b"bob"]


def _directory_id(n: int) -> str:
    return base64.urlsafe_b64encode(uuid.UUID(int=(n << 64) | 1000).bytes).decode().rstrip("=")


def _write_copy(root: Path, broker: int) -> None:
    """One broker's log dir: users-0 and users-1 (alice and bob in both, over two segments) and
    orders-0 (keyed by order, alice named in a value only), with its meta.properties."""
    root.mkdir(parents=True)
    (root / "meta.properties").write_text(
        f"version=1\nnode.id={broker}\ncluster.id=evidence-test-cluster\ndirectory.id={_directory_id(broker)}\n"
    )
    fs = LogFileSystem.for_path(str(root))[0]
    layout = {
        ("users", 0): [[b"alice", b"carol"], [b"bob", b"alice", b"dave"]],
        ("users", 1): [[b"bob", b"erin"], [b"frank"]],
        ("orders", 0): [[b"order-1", b"order-2"]],
    }
    for (topic, partition), segments in layout.items():
        w = PartitionWriter(fs, str(root), topic, partition, segment_ms=1 << 40, now_ms=NOW - 10_000)
        t = NOW - 9_000
        for i, keys in enumerate(segments):
            if i:
                w.roll()
            for k in keys:
                t += 10
                w.append_records([Record(0, t, k, b"value of " + k)])
        w.close()


def _plant(copy: Path, topic: str, partition: int, key: bytes, value=b"back again", headers=()) -> int:
    """Append a record of `key` to a copy's partition as a new segment at its log end, written by the
    storage writer (as a broker that was not stopped, or a restored backup, would): its offset."""
    part = copy / f"{topic}-{partition}"
    end = LogDir.open(str(copy)).partition(topic, partition).segments[-1].last_offset() + 1
    scratch = copy.parent / f"plant-{uuid.uuid4().hex}"
    fs = LogFileSystem.for_path(str(scratch))[0]
    w = PartitionWriter(fs, str(scratch), topic, partition, log_start_offset=end, now_ms=NOW)
    w.append_records([Record(0, NOW, key, value, headers)])
    w.close()
    for suffix in (".log", ".index", ".timeindex"):
        name = segment_file_name(end, suffix)
        shutil.copy(scratch / f"{topic}-{partition}" / name, part / name)
    shutil.rmtree(scratch)
    return end


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def purged(spark, tmp_path_factory):
    """Two copies (brokers 1 and 2) of the same log, each purged of PURGED into one ledger."""
    tmp = tmp_path_factory.mktemp("evidence")
    copies = [tmp / "broker-1", tmp / "broker-2"]
    for n, copy in enumerate(copies, 1):
        _write_copy(copy, n)
    before = {str(p.relative_to(tmp)): _sha(p) for p in tmp.rglob("*.log")}
    ledger = str(tmp / "ledger")
    results = [purge(spark, str(c), PURGED, ledger=ledger, secret=SECRET, now=NOW) for c in copies]
    return SimpleNamespace(tmp=tmp, copies=copies, ledger=ledger, results=results, before=before)


def test_the_segments_table_holds_each_copys_rewritten_segments_with_hashes_and_counts(purged):
    rows = read_ledger_table(segments_path(purged.ledger)).to_pylist()
    assert sorted((r["broker_id"], r["topic"], r["partition"], r["base_offset"]) for r in rows) == [
        (b, "users", p, base) for b in (1, 2) for p, base in ((0, 0), (0, 2), (1, 0))
    ]
    for r in rows:
        copy = purged.copies[r["broker_id"] - 1]
        log = copy / f"{r['topic']}-{r['partition']}" / segment_file_name(r["base_offset"], ".log")
        assert r["log_dir"] == str(copy) and r["directory_id"] == _directory_id(r["broker_id"])
        assert r["sha256_after"] == _sha(log)  # the file as it is now
        assert r["sha256_before"] == purged.before[str(log.relative_to(purged.tmp))] != r["sha256_after"]
        assert r["bytes_after"] == log.stat().st_size
        assert r["run_id"] == purged.results[r["broker_id"] - 1].run_id
    counts = {(r["broker_id"], r["topic"], r["partition"], r["base_offset"]): r for r in rows}
    assert (counts[(1, "users", 0, 2)]["records_before"], counts[(1, "users", 0, 2)]["records_after"]) == (3, 1)


def test_verify_passes_on_the_purged_copies_and_reports_each_copy_and_partition(spark, purged):
    check = verify_purge(spark, [str(c) for c in purged.copies], purged.ledger, SECRET)
    assert check.clean and check.secret_checked and check.found == []
    assert check.fingerprints == 2 and sorted(check.runs) == sorted(r.run_id for r in purged.results)
    assert sorted((p["broker_id"], p["topic"], p["partition"], p["records"], p["found"]) for p in check.partitions) == [
        (b, t, p, n, 0) for b in (1, 2) for t, p, n in (("orders", 0, 2), ("users", 0, 2), ("users", 1, 2))
    ]


def test_a_key_planted_afterwards_in_one_copy_is_found_and_named(spark, purged, tmp_path):
    copies = [tmp_path / c.name for c in purged.copies]
    for src, dst in zip(purged.copies, copies):
        shutil.copytree(src, dst)
    offset = _plant(copies[1], "users", 1, b"alice")
    check = verify_purge(spark, [str(c) for c in copies], purged.ledger, SECRET)
    assert not check.clean
    assert check.found == [
        {
            "log_dir": str(copies[1]),
            "broker_id": 2,
            "topic": "users",
            "partition": 1,
            "offset": offset,
            "fingerprint": fingerprint(SECRET, b"alice"),
        }
    ]
    bad = [p for p in check.partitions if p["found"]]
    assert [(p["broker_id"], p["topic"], p["partition"], p["found"], p["first_offset"]) for p in bad] == [
        (2, "users", 1, 1, offset)
    ]
    assert "FOUND 1 records of purged keys in 1 partitions" in check.summary()


def test_an_old_ledger_without_the_segments_table_still_verifies_and_says_it_cannot_check_the_secret(
    spark, purged, tmp_path
):
    old = tmp_path / "old-ledger"
    shutil.copytree(purged.ledger, old)
    shutil.copytree(purged.ledger + "_runs", str(old) + "_runs")
    check = verify_purge(spark, [str(c) for c in purged.copies], str(old), SECRET)
    assert check.clean and not check.secret_checked
    assert "the secret could not be checked" in check.summary()
    wrong = verify_purge(spark, [str(purged.copies[0])], str(old), b"another-secret-0123456789")
    assert wrong.clean  # what the warning is about: nothing matches under another secret


def test_a_wrong_secret_is_refused_where_the_ledger_can_tell(spark, purged):
    with pytest.raises(LedgerError, match="the secret is not this ledger's"):
        verify_purge(spark, [str(purged.copies[0])], purged.ledger, b"another-secret-0123456789")


def test_verify_purge_command_exits_0_when_clean_and_1_naming_the_offending_record(
    purged, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KAFKALOG_PURGE_SECRET", SECRET.decode())
    dirs = [str(c) for c in purged.copies]
    assert main(["verify-purge", *dirs, "--ledger", purged.ledger, "--quiet"]) == 0
    assert "no record of a purged key" in capsys.readouterr().out
    copy = tmp_path / "broker-1"
    shutil.copytree(purged.copies[0], copy)
    offset = _plant(copy, "users", 0, b"bob")
    assert main(["verify-purge", str(copy), "--ledger", purged.ledger, "--quiet"]) == 1
    assert f"found: {copy} (broker 1) users-0 offset {offset}: a record of purged key " in capsys.readouterr().err
    assert main(["verify-purge", str(copy), "--ledger", purged.ledger, "--run", "nope", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the ledger has no run nope" in err


def test_evidence_build_signs_a_report_that_evidence_verify_accepts(purged, tmp_path, monkeypatch, capsys):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    (tmp_path / "k.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (tmp_path / "k.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    monkeypatch.setenv("KAFKALOG_PURGE_SECRET", SECRET.decode())
    out, md = tmp_path / "evidence.json", tmp_path / "evidence.md"
    args = ["evidence", "build", "--ledger", purged.ledger, "--signing-key", str(tmp_path / "k.pem")]
    args += ["--output", str(out), "--markdown", str(md), "--quiet", "--verify", *map(str, purged.copies)]
    assert main(args) == 0
    signed = json.loads(out.read_text())
    report = signed["report"]
    assert report["run"]["runId"] == purged.results[1].run_id  # the latest run
    assert [c["brokerId"] for c in report["copies"]] == [2]  # that run purged broker 2's copy
    assert report["verification"]["clean"] and len(report["verification"]["partitions"]) == 6
    assert report["byTopic"] == [{"topic": "users", "removed": 4, "tombstoned": 0, "redacted": 0}]
    assert "no record of a purged key was found" in md.read_text()
    capsys.readouterr()
    assert main(["evidence", "verify", str(out), "--public-key", str(tmp_path / "k.pub")]) == 0
    assert capsys.readouterr().out.startswith("the signature holds: run ")
    report["byTopic"][0]["removed"] = 3
    out.write_text(json.dumps(signed))
    assert main(["evidence", "verify", str(out), "--public-key", str(tmp_path / "k.pub")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the signature does not hold" in err
    # the library builds the same report of the first run, with no verification in it
    first = verify_report(
        sign_report(build_report(purged.ledger, purged.results[0].run_id), (tmp_path / "k.pem").read_bytes()),
        (tmp_path / "k.pub").read_bytes(),
    )
    assert first["verification"] is None and [c["brokerId"] for c in first["copies"]] == [1]


def test_a_tombstone_a_purge_kept_passes_and_one_with_headers_planted_afterwards_is_found(spark, tmp_path):
    from kafkalog.config import resolver_from

    root, ledger = tmp_path / "log", str(tmp_path / "ledger")
    root.mkdir()
    fs = LogFileSystem.for_path(str(root))[0]
    w = PartitionWriter(fs, str(root), "profiles", 0, segment_ms=1 << 40, now_ms=NOW - 10_000)
    for i, k in enumerate([b"alice", b"carol", b"alice"]):
        w.append_records([Record(0, NOW - 9_000 + i, k, b"v")])
    w.close()
    config = resolver_from(settings=["cleanup.policy=compact"])
    purge(spark, str(root), [b"alice"], tombstone=True, ledger=ledger, secret=SECRET, config=config, now=NOW)
    check = verify_purge(spark, str(root), ledger, SECRET)
    assert check.clean and [(p["records"], p["found"], p["tombstones"]) for p in check.partitions] == [(2, 0, 1)]
    assert "1 tombstones of purged keys kept (--tombstone)" in check.summary()
    end = _plant(root, "profiles", 0, b"alice", None, (("email", b"alice@example.com"),))
    check = verify_purge(spark, str(root), ledger, SECRET)
    assert [(f["offset"], p["found"], p["tombstones"]) for f in check.found for p in check.partitions] == [(end, 1, 1)]
