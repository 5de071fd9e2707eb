"""The evidence report of a purge run: what was asked, which copies were purged, what changed,
whether it held, as JSON signed with the operator's Ed25519 key, and as Markdown for people.

    from kafkalog.operations.evidence import build_report, sign_report, verify_report, render_markdown

    report = build_report("/audit/purges", check=verify_purge(spark, dirs, "/audit/purges", secret))
    signed = sign_report(report, open("evidence.key", "rb").read())
    verify_report(signed, open("evidence.pub", "rb").read())  # EvidenceError when it does not hold

The report is built from the ledger alone (its records, run, segments and tables tables), so it can be
built again from the ledger at any time; it holds no key, only counts, hashes and names.

The signed file is `{"report": {...}, "signature": {"algorithm": "Ed25519", "publicKey": B64,
"value": B64}}`; the signature is over the canonical form of `report`: its JSON with the keys of
every object sorted, no whitespace, UTF-8, non-ASCII characters as themselves. The report holds
strings, integers, booleans, nulls, lists and objects only (no floating-point numbers), and for
such values this is RFC 8785's JSON Canonicalization Scheme: any JCS library, or
`jq -cjS .report REPORT`, gives the same bytes, which any Ed25519 tool verifies (docs/operations.md).
`publicKey` says which key signed; trust comes from checking against a public key you hold.
Verifying refuses anything the signature does not cover: a field beside `report` and the signature's
three, and a key twice in one object (`read_signed`).
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone

from .. import __version__
from ..errors import KafkaLogError
from ..extras import require
from ..storage.ledger import LedgerError, read_ledger_table, runs_path, segments_path, tables_path
from .files import camel_keys

FORMAT = "kafkalog-purge-evidence/1"
ALGORITHM = "Ed25519"


class EvidenceError(KafkaLogError):
    """A report, key or signature that cannot be used."""


class SignatureMismatch(EvidenceError):
    """A well-formed report whose signature does not hold under the key given."""


def canonical_json(value) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, UTF-8 (RFC 8785 for values without
    floating-point numbers, which the report never holds)."""
    if _has_float(value):
        raise EvidenceError("an evidence report holds no floating-point numbers (their canonical forms differ)")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, Mapping):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_float(v) for v in value)
    return False


# -- building ----------------------------------------------------------------------------------------


def build_report(ledger: str, run_id: str | None = None, *, check=None) -> dict:
    """The report of run `run_id` (default: the ledger's latest run) of `ledger`: the run as asked and
    done, its copies and segments with their hashes, its purged records by topic and action, and
    `check` (a purge_verify.PurgeCheck, the verification of the copies as they are now), if given."""
    runs = read_ledger_table(runs_path(ledger))
    if runs is None or runs.num_rows == 0:
        raise LedgerError("the ledger has no run table (or no completed run) to report on", file=runs_path(ledger))
    rows = sorted(runs.to_pylist(), key=lambda r: r["finished_at"])
    chosen = [r for r in rows if run_id is None or r["run_id"] == run_id]
    if not chosen:
        raise LedgerError(f"the ledger has no completed run {run_id}", file=runs_path(ledger))
    run = chosen[-1]
    # the run's rows, and those of the interrupted runs it completed (written under their ids)
    ids = {run["run_id"], *(run.get("resumes") or ())}
    records = read_ledger_table(ledger, ["run_id", "topic", "action"])
    counts = Counter(
        (r["topic"], r["action"]) for r in ([] if records is None else records.to_pylist()) if r["run_id"] in ids
    )
    segments = read_ledger_table(segments_path(ledger))
    segment_rows = [] if segments is None else [s for s in segments.to_pylist() if s["run_id"] in ids]
    erased = read_ledger_table(tables_path(ledger))
    table_rows = [] if erased is None else [t for t in erased.to_pylist() if t["run_id"] in ids]
    return {
        "format": FORMAT,
        "kafkalogVersion": __version__,
        "createdAt": _stamp(int(time.time() * 1000)),
        "ledger": ledger,
        "run": _run(run),
        "byTopic": [
            {"topic": t, **{a: counts[(t, a)] for a in ("removed", "tombstoned", "redacted")}}
            for t in sorted({t for t, _ in counts})
        ],
        "copies": _copies(segment_rows),
        "segments": [_segment(s) for s in sorted(segment_rows, key=_segment_order)],
        "segmentsRecorded": segments is not None,
        "tables": [_table(t) for t in table_rows],
        "verification": None if check is None else check.to_dict(),
    }


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _iso(value) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _run(run: dict) -> dict:
    """What was asked (key count, topics, whether a where expression, tombstones: never a key nor the
    expression, which may name one) and what the run's own rescan found."""
    return {
        "runId": run["run_id"],
        "startedAt": _iso(run["started_at"]),
        "finishedAt": _iso(run["finished_at"]),
        "purgedAt": _iso(run["purged_at"]),
        "logDir": run["log_dir"],
        "logDirs": run.get("log_dirs") or [run["log_dir"]],  # a ledger older than `log_dirs`: its first
        "topics": run["topics"],
        "keys": run["keys"],
        "where": run["where"],
        "tombstone": run["tombstone"],
        "partitions": run["partitions"],
        "segments": run["segments"],
        "recordsRemoved": run["records_removed"],
        "recordsTombstoned": run["records_tombstoned"],
        "recordsRedacted": run["records_redacted"],
        "ledgerRows": run["ledger_rows"],
        "remainingAfterRescan": run["remaining"],
        "kafkalogVersion": run["kafkalog_version"],
        "resumes": run.get("resumes") or [],
        "replicaDifferences": [camel_keys(d) for d in run.get("replica_differences") or ()],
    }


def _segment_order(s: dict) -> tuple:
    return (s["log_dir"], s["topic"], s["partition"], s["base_offset"])


def _segment(s: dict) -> dict:
    return {
        "runId": s["run_id"],  # the run that staged it: this one, or an interrupted one it completed
        "logDir": s["log_dir"],
        "brokerId": s["broker_id"],
        "directoryId": s["directory_id"],
        "topic": s["topic"],
        "partition": s["partition"],
        "baseOffset": s["base_offset"],
        "recordsBefore": s["records_before"],
        "recordsAfter": s["records_after"],
        "bytesBefore": s["bytes_before"],
        "bytesAfter": s["bytes_after"],
        "sha256Before": s["sha256_before"],
        "sha256After": s["sha256_after"],
    }


def _table(t: dict) -> dict:
    """A table the run erased from (`purge --table`): its rows removed and its files, each with its SHA-256."""
    return {
        "table": t["table_path"],
        "format": t["format"],
        "topic": t["topic"],
        "rowsRemoved": t["rows_removed"],
        "filesWritten": [dict(f) for f in t["files_written"]],
        "filesDeleted": [dict(f) for f in t["files_deleted"]],
    }


def _copies(segments: list[dict]) -> list[dict]:
    """One entry per copy (log directory) the run rewrote segments in, with its totals."""
    by_copy: dict = {}
    for s in segments:
        c = by_copy.setdefault(
            s["log_dir"],
            {
                "logDir": s["log_dir"],
                "brokerId": s["broker_id"],
                "directoryId": s["directory_id"],
                "partitions": set(),
                "segments": 0,
                "recordsBefore": 0,
                "recordsAfter": 0,
            },
        )
        c["partitions"].add((s["topic"], s["partition"]))
        c["segments"] += 1
        c["recordsBefore"] += s["records_before"]
        c["recordsAfter"] += s["records_after"]
    return [{**c, "partitions": len(c["partitions"])} for _, c in sorted(by_copy.items())]


# -- signing ------------------------------------------------------------------------------------------


def signing_key(pem: bytes):
    """The Ed25519 private key of `pem` (PKCS#8, unencrypted, as `openssl genpkey -algorithm ed25519`
    writes); EvidenceError for anything else."""
    require("cryptography", "signing and verifying evidence")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = _load_key(pem, private=True)
    if not isinstance(key, Ed25519PrivateKey):
        raise EvidenceError(f"the signing key is not an Ed25519 key but {type(key).__name__}")
    return key


def sign_report(report: dict, private_key: bytes) -> dict:
    """`report` signed with `private_key` (PEM, see `signing_key`)."""
    key = signing_key(private_key)
    return {
        "report": report,
        "signature": {
            "algorithm": ALGORITHM,
            "publicKey": _b64(_raw_public(key.public_key())),
            "value": _b64(key.sign(canonical_json(report))),
        },
    }


def verify_report(signed: dict, public_key: bytes) -> dict:
    """The report of `signed` when its signature holds under `public_key` (PEM, as `openssl pkey
    -pubout` writes); SignatureMismatch when the signature does not hold, EvidenceError when the
    report or key cannot be read."""
    require("cryptography", "signing and verifying evidence")
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key = _load_key(public_key, private=False)
    if not isinstance(key, Ed25519PublicKey):
        raise EvidenceError(f"the public key is not an Ed25519 key but {type(key).__name__}")
    if not isinstance(signed, dict) or not isinstance(signed.get("report"), dict):
        raise EvidenceError("not a signed evidence report: no `report` object")
    signature = signed.get("signature")
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        raise EvidenceError(f"not a signed evidence report: no {ALGORITHM} `signature`")
    _only_signed(signed, signature)
    if signature.get("publicKey") != _b64(_raw_public(key)):
        raise SignatureMismatch("the report was signed with another key than the one given")
    try:
        key.verify(base64.b64decode(signature.get("value", ""), validate=True), canonical_json(signed["report"]))
    except (InvalidSignature, ValueError):
        raise SignatureMismatch("the signature does not hold: the report was changed after it was signed") from None
    return signed["report"]


def _only_signed(signed: dict, signature: dict) -> None:
    """Refuse (SignatureMismatch) a field beside `report` and `signature`, or in `signature` beside
    its three: the signature covers `report` alone, and a reader must never be shown unsigned text
    as verified."""
    extra = [f"`{k}`" for k in signed if k not in ("report", "signature")]
    extra += [f"`signature.{k}`" for k in signature if k not in ("algorithm", "publicKey", "value")]
    if extra:
        raise SignatureMismatch(
            f"the file holds {', '.join(extra)} beside the signed report: unsigned content, so it is not verified"
        )


def read_signed(data: bytes, file: str | None = None) -> dict:
    """The signed report in `data`, JSON; SignatureMismatch for a key twice in one object (readers
    disagree on which value counts: one could be shown a value that was never signed)."""
    try:
        return json.loads(data, object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise EvidenceError(f"not a JSON evidence report: {err}", file=file) from None
    except _DuplicateKey as err:
        raise SignatureMismatch(
            f"the key `{err}` appears twice in one object: JSON readers differ on which value counts, "
            "so the report is not verified",
            file=file,
        ) from None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _load_key(data: bytes, *, private: bool):
    from cryptography.hazmat.primitives import serialization

    try:
        if private:
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as err:
        what = "private" if private else "public"
        raise EvidenceError(f"not a PEM {what} key (unencrypted): {str(err).splitlines()[0]}") from None


def _raw_public(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# -- for people -----------------------------------------------------------------------------------------


def render_markdown(signed: dict) -> str:
    """The report as Markdown; the JSON is what is signed and what an auditor checks."""
    r, sig = signed["report"], signed.get("signature") or {}
    run = r["run"]
    lines = [
        f"# Purge evidence: run {run['runId']}",
        "",
        f"Ledger `{r['ledger']}`, report created {r['createdAt']} by kafkalog {r['kafkalogVersion']}.",
        f"Signed ({sig.get('algorithm', 'unsigned')}) by public key `{sig.get('publicKey', '-')}`; "
        f"check with `kafkalog evidence verify REPORT.json --public-key KEY.pem`.",
        "",
        "## What was asked",
        "",
        f"- keys: {run['keys']} (listed in the ledger only as fingerprints)",
        f"- topics: {', '.join(run['topics']) if run['topics'] else 'every topic but internal ones'}",
        f"- a where expression: {_yes(run['where'])}; tombstones kept: {_yes(run['tombstone'])}",
        f"- purged at {run['purgedAt']} (started {run['startedAt']}, finished {run['finishedAt']})",
        f"- log directories: {', '.join(run.get('logDirs') or [run['logDir']])}",
        "",
        "## What was done",
        "",
        f"{run['recordsRemoved']} records removed, {run['recordsTombstoned']} tombstoned, {run['recordsRedacted']} "
        f"redacted in {run['partitions']} partitions, {run['segments']} segments rewritten; the run's own rescan "
        f"found {run['remainingAfterRescan']} left."
        + (
            f" It completed the interrupted run {', '.join(run['resumes'])}, whose ledger rows are counted here "
            "(each segment's runId names the run that staged it)."
            if run.get("resumes")
            else ""
        ),
        "",
        _md_table(r["byTopic"], ["topic", "removed", "tombstoned", "redacted"]),
        "",
        "## Copies",
        "",
        _md_table(
            r["copies"],
            ["logDir", "brokerId", "directoryId", "partitions", "segments", "recordsBefore", "recordsAfter"],
        )
        if r["copies"]
        else "(no segment evidence: "
        + ("the run rewrote no segment)" if r["segmentsRecorded"] else "the ledger predates its segments table)"),
        "",
        "## Segments",
        "",
        _md_table(
            r["segments"],
            [
                "logDir",
                "topic",
                "partition",
                "baseOffset",
                "recordsBefore",
                "recordsAfter",
                "sha256Before",
                "sha256After",
            ],
        )
        if r["segments"]
        else "(none)",
        "",
        "## Tables",
        "",
        _md_table(
            [
                {**t, "filesWritten": len(t["filesWritten"]), "filesDeleted": len(t["filesDeleted"])}
                for t in r.get("tables", [])
            ],
            ["table", "format", "topic", "rowsRemoved", "filesWritten", "filesDeleted"],
        )
        if r.get("tables")
        else "(none: the run erased from no exported table)",
        "",
        "## Verification",
        "",
    ]
    check = r["verification"]
    if check is None:
        lines.append("Not verified when the report was built (`kafkalog verify-purge` checks the copies).")
    else:
        verdict = "no record of a purged key was found" if check["clean"] else "RECORDS OF PURGED KEYS WERE FOUND"
        lines += [
            f"Checked at {_stamp(check['checkedAt'])} for {check['fingerprints']} purged keys: {verdict}"
            + ("" if check["secretChecked"] else " (the ledger could not confirm the secret)")
            + ".",
            "",
            _md_table(
                check["partitions"],
                ["logDir", "brokerId", "topic", "partition", "records", "found", "tombstones", "firstOffset"],
            ),
        ]
        if check.get("tables"):
            lines += ["", _md_table(check["tables"], ["table", "files", "values", "found"])]
    return "\n".join(lines) + "\n"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _md_table(rows: list[dict], columns: list[str]) -> str:
    def cell(v) -> str:
        return "" if v is None else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
