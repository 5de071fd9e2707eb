"""The evidence report below Spark: its canonical form, Ed25519 signing and verification (a changed
report or another key fails), independent tools agreeing on the signed bytes, the report built from a
ledger written with deltalake (an old ledger without the segments table included), and the segments
table's helpers."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kafkalog.cli import main
from kafkalog.operations.evidence import (
    EvidenceError,
    SignatureMismatch,
    build_report,
    canonical_json,
    render_markdown,
    sign_report,
    verify_report,
)
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.ledger import (
    SEGMENTS_SCHEMA,
    LedgerError,
    copy_identity,
    file_sha256,
    records_table,
    secret_check,
    segments_table,
    write_records,
    write_run,
    write_segments,
)

SECRET = b"evidence-unit-secret-0123456789ab"
NOW = 1_800_000_000_000


def _pem_pair(key=None) -> tuple[bytes, bytes]:
    key = key or Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


REPORT = {"run": {"runId": "r1", "keys": 2, "topics": ["ünïcode", "b"]}, "byTopic": [], "clean": True, "x": None}


def test_canonical_json_sorts_keys_has_no_whitespace_and_keeps_non_ascii_as_utf8():
    assert canonical_json(REPORT) == (
        '{"byTopic":[],"clean":true,"run":{"keys":2,"runId":"r1","topics":["ünïcode","b"]},"x":null}'.encode()
    )
    with pytest.raises(EvidenceError, match="no floating-point numbers"):
        canonical_json({"ratio": 0.5})


def test_a_signed_report_verifies_and_a_changed_one_or_another_key_does_not():
    private, public = _pem_pair()
    signed = sign_report(REPORT, private)
    assert verify_report(signed, public) == REPORT
    assert verify_report(json.loads(json.dumps(signed, indent=2)), public) == REPORT  # layout is not signed
    changed = json.loads(json.dumps(signed))
    changed["report"]["run"]["keys"] = 1
    with pytest.raises(SignatureMismatch, match="the report was changed after it was signed"):
        verify_report(changed, public)
    other_private, other_public = _pem_pair()
    with pytest.raises(SignatureMismatch, match="signed with another key"):
        verify_report(signed, other_public)
    # a forger who re-signs with their own key and names it still fails against the trusted key
    with pytest.raises(SignatureMismatch, match="signed with another key"):
        verify_report(sign_report(changed["report"], other_private), public)


def test_keys_that_are_not_ed25519_or_not_pem_are_refused_in_one_line():
    ec = generate_private_key(SECP256R1())
    ec_pem = ec.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(EvidenceError, match="not an Ed25519 key but"):
        sign_report(REPORT, ec_pem)
    with pytest.raises(EvidenceError, match="not a PEM private key") as err:
        sign_report(REPORT, b"garbage")
    assert "\n" not in str(err.value)
    with pytest.raises(EvidenceError, match="no Ed25519 `signature`"):
        verify_report({"report": REPORT}, _pem_pair()[1])


def test_the_signature_checks_with_the_raw_public_key_over_the_canonical_bytes_alone():
    """What an auditor with any Ed25519 tool does: the 32-byte key and the canonical bytes, nothing of kafkalog."""
    private, _ = _pem_pair()
    signed = sign_report(REPORT, private)
    raw = Ed25519PublicKey.from_public_bytes(base64.b64decode(signed["signature"]["publicKey"]))
    payload = json.dumps(signed["report"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    raw.verify(base64.b64decode(signed["signature"]["value"]), payload)  # raises if it does not hold


@pytest.mark.skipif(not (shutil.which("jq") and shutil.which("openssl")), reason="needs the jq and openssl tools")
def test_jq_and_openssl_verify_the_signature_as_docs_operations_says(tmp_path):
    private, public = _pem_pair()
    (tmp_path / "pub.pem").write_bytes(public)
    (tmp_path / "report.json").write_text(json.dumps(sign_report(REPORT, private), indent=2))
    script = (
        "jq -cjS .report report.json > report.canonical && "
        "jq -r .signature.value report.json | base64 -d > report.sig && "
        "openssl pkeyutl -verify -pubin -inkey pub.pem -rawin -in report.canonical -sigfile report.sig"
    )
    done = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "Signature Verified Successfully" in done.stdout, done.stderr
    assert (tmp_path / "report.canonical").read_bytes() == canonical_json(REPORT)


def _ledger(tmp_path, *, segments: bool):
    """A ledger of one run over two copies, written with deltalake as a purge without Spark would."""
    import pyarrow as pa

    ledger = str(tmp_path / "ledger")
    purged = pa.table(
        {
            "topic": ["users", "users", "orders"],
            "partition": [0, 0, 1],
            "offset": [3, 5, 7],
            "timestamp": [NOW - 3, NOW - 2, NOW - 1],
            "key": [b"alice", b"bob", b"alice"],
            "action": ["removed", "removed", "tombstoned"],
            "matched_by": ["key"] * 3,
            "reason": ["gdpr"] * 3,
        }
    )
    write_records(ledger, records_table(purged, secret=SECRET, run_id="run-1", purged_at_ms=NOW, log_dir="/b1"))
    run = {"run_id": "run-1", "started_at": NOW - 100, "finished_at": NOW + 100, "purged_at": NOW}
    run |= {"log_dirs": ["/b1", "/b2"] if segments else None}  # None: a run row from before log_dirs
    run |= {"log_dir": "/b1", "topics": None, "keys": 2, "where": False, "tombstone": True, "partitions": 2}
    run |= {"segments": 2, "records_removed": 2, "records_tombstoned": 1, "records_redacted": 0}
    write_run(ledger, run | {"ledger_rows": 3, "remaining": 0, "kafkalog_version": "test"})
    if segments:
        seg = {"topic": "users", "partition": 0, "base_offset": 0, "records_before": 6, "records_after": 4}
        seg |= {"bytes_before": 600, "bytes_after": 400, "sha256_before": "a" * 64, "sha256_after": "b" * 64}
        rows = [seg | {"log_dir": f"/b{b}", "broker_id": b, "directory_id": f"dir-{b}"} for b in (1, 2)]
        write_segments(ledger, segments_table(rows, run_id="run-1", purged_at_ms=NOW, secret=SECRET))
    return ledger


def test_the_report_is_built_from_the_ledger_alone_and_holds_no_key(tmp_path):
    report = build_report(_ledger(tmp_path, segments=True))
    assert report["run"]["runId"] == "run-1" and report["run"]["keys"] == 2 and report["run"]["topics"] is None
    assert report["run"]["purgedAt"] == "2027-01-15T08:00:00.000Z"
    assert report["byTopic"] == [
        {"topic": "orders", "removed": 0, "tombstoned": 1, "redacted": 0},
        {"topic": "users", "removed": 2, "tombstoned": 0, "redacted": 0},
    ]
    assert [(c["brokerId"], c["directoryId"], c["segments"], c["recordsBefore"]) for c in report["copies"]] == [
        (1, "dir-1", 1, 6),
        (2, "dir-2", 1, 6),
    ]
    assert report["segments"][0]["sha256Before"] == "a" * 64 and report["verification"] is None
    text = canonical_json(report)
    assert b"alice" not in text and b"bob" not in text
    private, public = _pem_pair()
    md = render_markdown(sign_report(report, private))
    assert "| /b2 | 2 | dir-2 | 1 | 1 | 6 | 4 |" in md and "Not verified" in md
    assert report["run"]["logDirs"] == ["/b1", "/b2"] and "- log directories: /b1, /b2\n" in md  # every copy


def test_an_old_ledger_without_the_segments_table_gives_a_report_that_says_so(tmp_path):
    report = build_report(_ledger(tmp_path, segments=False))
    assert report["copies"] == [] and report["segments"] == [] and report["segmentsRecorded"] is False
    md = render_markdown({"report": report})
    assert "the ledger predates its segments table" in md
    assert report["run"]["logDirs"] == ["/b1"] and "- log directories: /b1\n" in md  # a run row without log_dirs
    with pytest.raises(LedgerError, match="no completed run nope"):
        build_report(_ledger(tmp_path / "again", segments=False), "nope")


def test_evidence_commands_fail_in_one_line_before_starting_spark(tmp_path, capsys):
    ledger = _ledger(tmp_path, segments=True)
    private, public = _pem_pair()
    (tmp_path / "k.pem").write_bytes(private)
    (tmp_path / "k.pub").write_bytes(public)
    out = str(tmp_path / "e.json")
    base = ["evidence", "build", "--ledger", ledger, "--output", out]
    assert main([*base, "--signing-key", str(tmp_path / "missing.pem")]) == 2
    assert main([*base, "--signing-key", str(tmp_path / "k.pub")]) == 2
    assert main([*base, "--signing-key", str(tmp_path / "k.pem"), "--run", "nope"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert [e.split(": ", 1)[0] for e in errors] == ["kafkalog evidence"] * 3
    assert "no such file (--signing-key)" in errors[0] and "not a PEM private key" in errors[1] and "nope" in errors[2]
    assert main([*base, "--signing-key", str(tmp_path / "k.pem"), "--quiet"]) == 0  # without --verify: no Spark
    assert "; not verified" in capsys.readouterr().out
    assert main(["evidence", "verify", out, "--public-key", str(tmp_path / "k.pub"), "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("# Purge evidence: run run-1")
    (tmp_path / "bad.json").write_text("{")
    assert main(["evidence", "verify", str(tmp_path / "bad.json"), "--public-key", str(tmp_path / "k.pub")]) == 2
    assert "not a JSON evidence report" in capsys.readouterr().err


def test_segment_helpers(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 3_000_000)
    fs, path = LogFileSystem.for_path(str(tmp_path / "f"))
    assert file_sha256(fs, path, chunk=1 << 16) == hashlib.sha256(b"x" * 3_000_000).hexdigest()
    assert copy_identity({"node.id": "3", "directory.id": "abc"}) == (3, "abc")
    assert copy_identity({"broker.id": "7"}) == (7, None) and copy_identity({}) == (None, None)
    assert copy_identity({"node.id": "x"}) == (None, None)
    assert secret_check(SECRET) != secret_check(SECRET + b"!") and len(secret_check(SECRET)) == 64
    assert segments_table([], run_id="r", purged_at_ms=NOW, secret=SECRET).schema == SEGMENTS_SCHEMA


def test_verification_looks_for_each_purged_key_in_the_topics_its_run_purged(tmp_path):
    """The scope `verify_purge` gives each fingerprint, from the ledger alone: its run's topics (every
    non-internal topic when the run named none, the topics of its rows when the run has no run row),
    keys a `where` matched left out, and which keys may stay as tombstones."""
    import pyarrow as pa

    from kafkalog.operations.purge_verify import _scopes

    ledger = _ledger(tmp_path, segments=False)  # run-1: every topic, --tombstone
    purged = pa.table(
        {
            "topic": ["users", "users", "orders"],
            "partition": [0, 0, 0],
            "offset": [10, 11, 12],
            "timestamp": [NOW] * 3,
            "key": [b"erin", b"frank", b"gina"],
            "action": ["removed"] * 3,
            "matched_by": ["key", "where", "key"],
            "reason": ["gdpr"] * 3,
        }
    )
    write_records(
        ledger, records_table(purged.slice(0, 2), secret=SECRET, run_id="run-2", purged_at_ms=NOW, log_dir="/b1")
    )
    write_records(
        ledger, records_table(purged.slice(2), secret=SECRET, run_id="run-3", purged_at_ms=NOW, log_dir="/b1")
    )
    run = {"run_id": "run-2", "started_at": NOW, "finished_at": NOW, "purged_at": NOW, "log_dir": "/b1"}
    run |= {"topics": ["users", "payments"], "keys": 1, "where": True, "tombstone": False, "partitions": 1}
    run |= {"segments": 1, "records_removed": 2, "records_tombstoned": 0, "records_redacted": 0}
    write_run(ledger, run | {"ledger_rows": 2, "remaining": 0, "kafkalog_version": "test"})  # run-3 has none

    from kafkalog.storage.ledger import fingerprint

    def fp(key: bytes) -> str:
        return fingerprint(SECRET, key)

    scopes, tombstoned, runs = _scopes(ledger, None)
    assert scopes == {
        fp(b"alice"): (True, set()),
        fp(b"bob"): (True, set()),
        fp(b"erin"): (False, {"users", "payments"}),
        fp(b"gina"): (False, {"orders"}),
    }  # frank, whom only a --where matched, is not looked for
    assert tombstoned == {fp(b"alice"), fp(b"bob")} and runs == ["run-1", "run-2", "run-3"]
    assert set(_scopes(ledger, "run-2")[0]) == {fp(b"erin")}
    with pytest.raises(LedgerError, match="no run run-9"):
        _scopes(ledger, "run-9")


def test_a_ledger_of_where_matches_only_has_nothing_to_verify_and_says_so(tmp_path):
    import pyarrow as pa

    from kafkalog.operations.purge_verify import _scopes

    ledger = str(tmp_path / "ledger")
    purged = pa.table(
        {"topic": ["t"], "partition": [0], "offset": [1], "timestamp": [NOW], "key": [b"k"]}
        | {"action": ["removed"], "matched_by": ["where"], "reason": ["gdpr"]}
    )
    write_records(ledger, records_table(purged, secret=SECRET, run_id="r", purged_at_ms=NOW, log_dir="/b1"))
    with pytest.raises(LedgerError, match="lists no purged key to look for"):
        _scopes(ledger, None)
    with pytest.raises(LedgerError, match="no purge ledger"):
        _scopes(str(tmp_path / "nothing"), None)


def test_verify_refuses_unsigned_content_and_duplicate_keys_and_accepts_a_clean_report(tmp_path, capsys):
    """The signature covers `report` alone: a field beside it (or beside the signature's three), and a
    key twice in one object (JSON readers differ on which value counts), are refused (exit 1, one
    line) and the report is never printed; the file as signed still verifies."""
    private, public = _pem_pair()
    (tmp_path / "k.pub").write_bytes(public)
    report = build_report(_ledger(tmp_path, segments=True))  # users: 2 removed
    text = json.dumps(sign_report(report, private), indent=2)
    forged = json.dumps(report).replace('"removed": 2', '"removed": 0')
    cases = {
        "clean": text,
        "extra": text.replace("{", '{"extra": 1, ', 1),
        "signature.note": text.replace('"algorithm"', '"note": "ok", "algorithm"', 1),
        "removed": text.replace('"removed": 2', '"removed": 0, "removed": 2', 1),
        "report": text.replace('"report": ', f'"report": {forged}, "report": ', 1),
    }
    for name, content in cases.items():
        (tmp_path / f"{name}.json").write_text(content)
        args = ["evidence", "verify", str(tmp_path / f"{name}.json"), "--public-key", str(tmp_path / "k.pub")]
        code = main([*args, "--markdown"])
        out, err = capsys.readouterr()
        if name == "clean":
            assert code == 0 and "| users | 2 | 0 | 0 |" in out, err
            continue
        assert content != text and json.loads(content)  # still JSON, which Python's reader would take
        assert code == 1 and out == "", (name, out)
        assert len(err.splitlines()) == 1 and f"`{name}`" in err and "not verified" in err, (name, err)


def test_evidence_build_reports_the_latest_run_by_default_as_its_help_says(tmp_path, capsys):
    ledger = _ledger(tmp_path, segments=False)
    run = {"run_id": "run-2", "started_at": NOW + 200, "finished_at": NOW + 300, "purged_at": NOW + 200}
    write_run(ledger, run | {"log_dir": "/b1", "keys": 1, "where": False, "tombstone": False, "partitions": 0})
    assert build_report(ledger)["run"]["runId"] == "run-2"
    assert build_report(ledger, "run-1")["run"]["runId"] == "run-1"
    with pytest.raises(SystemExit):
        main(["evidence", "build", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "the run to report (default: the latest)" in help_text and "(default: every run)" not in help_text


def test_the_report_lists_the_tables_a_run_erased_from_with_their_files_hashes(tmp_path):
    from kafkalog.storage.ledger import write_tables

    ledger = _ledger(tmp_path, segments=True)
    assert build_report(ledger)["tables"] == []
    erased = {"table_path": "/lake/users", "format": "delta", "topic": "users", "rows_removed": 2}
    erased |= {"files_written": [{"path": "part-1.parquet", "sha256": "c" * 64, "bytes": 10}]}
    erased |= {"files_deleted": [{"path": "part-0.parquet", "sha256": "d" * 64, "bytes": 12}]}
    write_tables(ledger, [erased], run_id="run-1", purged_at_ms=NOW, secret=SECRET)
    write_tables(ledger, [{**erased, "table_path": "/lake/other"}], run_id="run-0", purged_at_ms=NOW, secret=SECRET)
    (table,) = build_report(ledger)["tables"]
    assert table == {
        "table": "/lake/users",
        "format": "delta",
        "topic": "users",
        "rowsRemoved": 2,
        "filesWritten": [{"path": "part-1.parquet", "sha256": "c" * 64, "bytes": 10}],
        "filesDeleted": [{"path": "part-0.parquet", "sha256": "d" * 64, "bytes": 12}],
    }
    md = render_markdown({"report": build_report(ledger)})
    assert "| /lake/users | delta | users | 2 | 1 | 1 |" in md
