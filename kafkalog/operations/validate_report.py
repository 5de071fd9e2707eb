"""What `kafkalog validate` reports: findings (`Problem`), the `ValidationReport` with its counts,
JSON form, findings table (`FINDINGS_SCHEMA`), one-screen summary and exit code, and `Findings`, where
the checks add to it.

The check names and what each means are listed in `kafkalog.operations.validate`.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace

import pyarrow as pa

from ..errors import KafkaLogError
from ..storage.fs import pyarrow_uri

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {ERROR: 2, WARNING: 1, INFO: 0}
REPORT_VERSION = 1

CHECKS = (
    "batch.crc",
    "batch.structure",
    "batch.header",
    "batch.records",
    "batch.control",
    "batch.control_flags",
    "segment.truncated_tail",
    "segment.zero_tail",
    "offsets.order",
    "offsets.segment_base",
    "offsets.overflow",
    "offsets.next_segment",
    "index.missing",
    "index.size",
    "index.zero_tail",
    "index.sanity",
    "index.entry",
    "index.mismatch",
    "timeindex.missing",
    "timeindex.size",
    "timeindex.zero_tail",
    "timeindex.sanity",
    "timeindex.entry",
    "timeindex.final_entry",
    "timeindex.mismatch",
    "txnindex.size",
    "txnindex.parse",
    "txnindex.sanity",
    "txnindex.entry",
    "txnindex.missing_entry",
    "snapshot.parse",
    "snapshot.range",
    "snapshot.state",
    "snapshot.producer_absent",
    "checkpoint.parse",
    "checkpoint.range",
    "checkpoint.unknown_partition",
    "leader_epoch.parse",
    "leader_epoch.range",
    "leader_epoch.batches",
    "partition_metadata.parse",
    "partition.leftover",
    "partition.file_name",
    "partition.not_regular",
    "partition.orphan_index",
    "partition.empty",
    "partition.illegal_name",
    "meta_properties.parse",
    "kraft.snapshot",
    "kraft.snapshot_range",
    "kraft.quorum_state",
    "logdir.not_a_log_dir",
    "io.read",
)


@dataclass(frozen=True)
class Problem:
    """One finding. `position` is a byte position in `file` (for index files: of the entry),
    `offset` the Kafka offset concerned; either is None where it does not apply."""

    check: str
    severity: str
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
        }

    def __str__(self) -> str:
        where = [self.file or "-"]
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.severity.upper():7} {self.check}: {', '.join(where)}: {self.message}"


# One row per finding (`Problem`'s fields, camelCase as kafkalog's other tables) and one per group of
# findings the per-file cap left out (`ValidationReport.findings_table`).
FINDINGS_SCHEMA = pa.schema(
    [
        ("check", pa.string()),
        ("severity", pa.string()),
        ("file", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("message", pa.string()),
        ("count", pa.int64()),
    ]
)


@dataclass
class ValidationReport:
    paths: list[str]
    findings: list[Problem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    # (check, file, severity) -> findings left out of `findings` beyond the per-file cap
    suppressed: Counter = field(default_factory=Counter)
    fail_on: str = WARNING
    deep: bool = True  # records were decoded

    @property
    def problems(self) -> list[Problem]:
        """The findings that are problems (errors and warnings); infos are not."""
        return [p for p in self.findings if p.severity != INFO]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == WARNING]

    @property
    def infos(self) -> list[Problem]:
        return [p for p in self.findings if p.severity == INFO]

    def severity_counts(self) -> dict[str, int]:
        counts = Counter(p.severity for p in self.findings)
        for (_, _, severity), n in self.suppressed.items():
            counts[severity] += n
        return {s: counts.get(s, 0) for s in SEVERITIES}

    @property
    def exit_code(self) -> int:
        """0 when no finding reaches `fail_on`, else 1."""
        threshold = _RANK[self.fail_on]
        counts = self.severity_counts()
        return 1 if any(counts[s] for s in SEVERITIES if _RANK[s] >= threshold) else 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict:
        return {
            "version": REPORT_VERSION,
            "paths": list(self.paths),
            "exitCode": self.exit_code,
            "failOn": self.fail_on,
            "deep": self.deep,
            "severities": self.severity_counts(),
            "counts": dict(sorted(self.counts.items())),
            "findings": [p.to_dict() for p in self.findings],
            "suppressed": [
                {"check": c, "file": f, "severity": s, "count": n} for (c, f, s), n in self._suppressed_groups()
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def findings_table(self) -> pa.Table:
        """The findings as a table of FINDINGS_SCHEMA: first one row per finding of `findings`, in
        their order, with `count` 1; then one row per (check, file, severity) of `suppressed` (the
        findings beyond the per-file cap, counted but not kept), with `count` how many, no position
        or offset, and a message saying so. So `sum(count)` per severity is `severity_counts()`."""
        rows = [(p.check, p.severity, p.file, p.position, p.offset, p.message, 1) for p in self.findings]
        for (check, file, severity), n in self._suppressed_groups():
            message = f"{n} more {check} findings in this file, beyond the findings kept per check and file"
            rows.append((check, severity, file, None, None, message, n))
        return pa.Table.from_pylist([dict(zip(FINDINGS_SCHEMA.names, row)) for row in rows], schema=FINDINGS_SCHEMA)

    def _suppressed_groups(self) -> list[tuple[tuple[str, str | None, str], int]]:
        return sorted(self.suppressed.items(), key=lambda kv: tuple(map(str, kv[0])))

    def summary(self, max_lines: int = 20) -> str:
        """A readable report that fits one screen: totals, then the most severe findings."""
        lines = [
            f"kafkalog validate: {'OK' if self.exit_code == 0 else 'PROBLEMS FOUND'} (exit {self.exit_code})",
            self._totals_line(),
            self._severities_line(),
        ]
        by_check = self._by_check_line()
        if by_check:
            lines.append(by_check)
        # problems first, most severe first; infos only a few, they are not problems
        shown = sorted((p for p in self.findings if p.severity != INFO), key=lambda p: -_RANK[p.severity])
        shown += self.infos[: max(0, min(5, max_lines - len(shown)))]
        root = _common_root(self.paths)
        for p in shown[:max_lines]:
            if root and p.file and p.file.startswith(root):
                p = replace(p, file=p.file[len(root) :].lstrip("/") or p.file)
            lines.append("  " + _shorten(_printable(str(p)), 160))
        hidden = len(self.findings) - min(len(shown), max_lines) + sum(self.suppressed.values())
        if hidden > 0:
            lines.append(f"  ... and {hidden} more findings (see the JSON report)")
        return "\n".join(lines)

    def _totals_line(self) -> str:
        c = self.counts
        return (
            f"  checked {c['partitions']} partitions, {c['segments']} segments, {c['batches']} batches"
            f" ({c['records'] if self.deep else 'records not decoded'}"
            f"{' records' if self.deep else ''}), {_size(c['log_bytes'])}; {c['index_files']} .index,"
            f" {c['time_index_files']} .timeindex, {c['txn_index_files']} .txnindex,"
            f" {c['snapshots']} snapshots, {c['checkpoint_files']} checkpoint files"
        )

    def _severities_line(self) -> str:
        sev = self.severity_counts()
        return f"  {sev[ERROR]} errors, {sev[WARNING]} warnings, {sev[INFO]} infos"

    def _by_check_line(self) -> str | None:
        by_check = Counter((p.severity, p.check) for p in self.findings)
        for (_, check, severity), n in self.suppressed.items():
            by_check[(severity, check)] += n
        if not by_check:
            return None
        ordered = sorted(by_check.items(), key=lambda kv: (-_RANK[kv[0][0]], kv[0][1]))
        return "  by check: " + ", ".join(f"{check} ({severity}) ×{n}" for (severity, check), n in ordered)


class Findings:
    """Where the checks report to: `report`, keeping at most `max_per_file` findings per (check,
    file) and counting the others in `report.suppressed`."""

    def __init__(self, report: ValidationReport, max_per_file: int):
        self.report = report
        self.max_per_file = max_per_file
        self._per_key: Counter = Counter()

    @property
    def counts(self) -> Counter:
        """What was checked (partitions, segments, batches, ...), as the report counts it."""
        return self.report.counts

    def add(
        self,
        check: str,
        severity: str,
        message: str,
        file: str | None = None,
        position: int | None = None,
        offset: int | None = None,
    ) -> None:
        assert check in CHECKS and severity in SEVERITIES, (check, severity)
        key = (check, file)
        self._per_key[key] += 1
        if self._per_key[key] > self.max_per_file:
            self.report.suppressed[(check, file, severity)] += 1
            return
        self.report.findings.append(Problem(check, severity, message, file, position, offset))

    def merge(self, other: ValidationReport) -> None:
        """Add what checks made into a report of their own (another process's, a partition's)."""
        for p in other.findings:
            self._per_key[(p.check, p.file)] += 1
        self.report.findings.extend(other.findings)
        self.report.suppressed.update(other.suppressed)
        self.report.counts.update(other.counts)

    def add_error(
        self, check: str, severity: str, err: KafkaLogError, file: str | None = None, prefix: str = ""
    ) -> None:
        """A finding from a KafkaLogError: its message (after `prefix`, and the line of a text file's
        error), file, position and offset."""
        line = f"line {err.line}: " if err.line is not None else ""
        self.add(check, severity, prefix + line + err.message, err.file or file, err.position, err.offset)


def _common_root(paths: list[str]) -> str:
    """The directory the validated paths share, to print file names relative to it."""
    local = [os.path.abspath(p) for p in map(pyarrow_uri, paths) if "://" not in p]  # dbfs:/x is local
    if not local or len(local) != len(paths):
        return ""
    root = os.path.commonpath(local)
    return root if os.path.isdir(root) else os.path.dirname(root)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _printable(text: str) -> str:
    """`text` with control characters escaped (a directory name with a newline stays on one line)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
