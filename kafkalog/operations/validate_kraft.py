"""`kafkalog validate`: the KRaft files of `__cluster_metadata-0`, its snapshots and `quorum-state`.

Each snapshot's batches are checked as KRaft reads them (`storage.kraft.snapshot_problems`: CRC,
structure, the header first and the footer last). The snapshots and the log must agree as
KafkaMetadataLog requires when it loads them: with a log start offset above 0 there must be a
snapshot at or above it (else Kafka refuses to start: "Inconsistent snapshot state"); a snapshot
below the log start offset is deleted on load; a snapshot's end offset must lie within its epoch in
the log's leader epochs (the check KafkaMetadataLog.createNewSnapshot makes), and the latest
snapshot beyond the log's last epoch or end offset makes Kafka truncate the whole log to it on load
(truncateToLatestSnapshot). `quorum-state` must be the JSON object FileQuorumStateStore writes.
"""

from __future__ import annotations

from ..errors import KafkaLogError
from ..storage.checkpoint import EpochEntry
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.kraft import read_quorum_state, snapshot_problems
from ..storage.naming import KRAFT_BOOTSTRAP_CHECKPOINT, QUORUM_STATE, parse_kraft_snapshot_name
from ..storage.partition import Partition
from .validate_report import ERROR, INFO, WARNING, Findings


def check_kraft(findings: Findings, part: Partition, log_end: int | None, epochs: list[EpochEntry] | None) -> None:
    """The snapshots and quorum-state of a KRaft metadata partition, against its log."""
    log_start = part.segments[0].base_offset if part.segments else None
    for (offset, epoch), entry in sorted(part.kraft_snapshots.items()):
        check_kraft_file(findings, part.fs, entry)
        if log_start is not None and offset < log_start:
            findings.add(
                "kraft.snapshot_range",
                INFO,
                f"snapshot end offset {offset} is below the log start offset {log_start}; Kafka deletes it on load",
                entry.path,
            )
        elif epochs and log_end is not None:
            _check_epoch(findings, entry.path, offset, epoch, epochs, log_end)
    if log_start and not any(offset >= log_start for offset, _ in part.kraft_snapshots):
        findings.add(
            "kraft.snapshot_range",
            ERROR,
            f"the log starts at offset {log_start} but no snapshot is at or above it; Kafka refuses to load "
            "the metadata log (KafkaMetadataLog: inconsistent snapshot state)",
            part.segments[0].log_path,
        )
    state = part.files.get(QUORUM_STATE)
    if state is not None:
        check_kraft_file(findings, part.fs, state)


def check_kraft_file(findings: Findings, fs: LogFileSystem, entry: FileEntry) -> bool:
    """A KRaft snapshot (`<offset>-<epoch>.checkpoint`, `bootstrap.checkpoint`) or `quorum-state`
    given on its own; False for any other file."""
    if entry.name == QUORUM_STATE:
        findings.counts["checkpoint_files"] += 1
        try:
            read_quorum_state(fs.read_bytes(entry.path), entry.path)
        except KafkaLogError as err:
            findings.add_error("kraft.quorum_state", ERROR, err, entry.path)
        return True
    if parse_kraft_snapshot_name(entry.name) is None and entry.name != KRAFT_BOOTSTRAP_CHECKPOINT:
        return False
    findings.counts["snapshots"] += 1
    for problem in snapshot_problems(fs, entry):
        findings.add_error("kraft.snapshot", ERROR, problem, entry.path)
    return True


def _check_epoch(
    findings: Findings, path: str, offset: int, epoch: int, epochs: list[EpochEntry], log_end: int
) -> None:
    """A snapshot's end offset within its epoch: at most where the next epoch starts (the log end
    for the last one); one beyond the last epoch or the log end is where Kafka truncates the log."""
    latest = max(e.epoch for e in epochs)
    if epoch > latest or (epoch == latest and offset > log_end):
        findings.add(
            "kraft.snapshot_range",
            WARNING,
            f"snapshot (end offset {offset}, epoch {epoch}) is beyond the log (end offset {log_end}, last epoch "
            f"{latest}); Kafka truncates the whole metadata log to it on load",
            path,
        )
        return
    epoch_end = min((e.start_offset for e in epochs if e.epoch > epoch), default=log_end)
    known = any(e.epoch <= epoch for e in epochs)
    if not known or offset > epoch_end:
        findings.add(
            "kraft.snapshot_range",
            ERROR,
            f"snapshot (end offset {offset}, epoch {epoch}) does not agree with the log's leader epochs: epoch "
            f"{epoch} ends at offset {epoch_end}" + ("" if known else " and the log has no epoch at or below it"),
            path,
        )
