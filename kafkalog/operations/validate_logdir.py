"""What `kafkalog validate` checks of a log directory's own files: meta.properties as Kafka reads
it, and the offset checkpoint files (recovery point, log start offset, high watermark, cleaner
offset) against each partition's offsets (operations/validate.py dispatches, validate_partition
checks a partition directory)."""

from __future__ import annotations

from ..errors import KafkaLogError, UnreadableFileError
from ..storage.checkpoint import parse_offset_checkpoint
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.meta_properties import check_meta_properties
from ..storage.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from .validate_partition import DirContext, PartitionResult
from .validate_report import ERROR, INFO, WARNING, Findings


def check_meta_properties_file(findings: Findings, fs: LogFileSystem, path: str) -> None:
    """meta.properties as Kafka reads it: each issue a finding."""
    findings.counts["meta_properties"] += 1
    try:
        data = fs.read_bytes(path)
    except UnreadableFileError as err:
        findings.add_error("io.read", ERROR, err, path)
        return
    except OSError as err:
        findings.add("io.read", ERROR, f"cannot read: {err}", path)
        return
    _, issues = check_meta_properties(data)
    for issue in issues:
        findings.add(
            "meta_properties.parse",
            ERROR if issue.severity == "error" else WARNING,
            issue.message,
            path,
            issue.position,
        )


def read_checkpoints(
    findings: Findings, fs: LogFileSystem, names: dict[str, FileEntry]
) -> tuple[DirContext, dict[str, str]]:
    """The log dir's offset checkpoint files, parsed, and their texts (to name lines)."""
    ctx = DirContext()
    texts: dict[str, str] = {}
    for name in OFFSET_CHECKPOINT_FILES:
        entry = names.get(name)
        if entry is None or entry.is_dir:
            continue
        findings.counts["checkpoint_files"] += 1
        try:
            text = fs.read_bytes(entry.path).decode("utf-8", "replace")
            ctx.checkpoints[name] = parse_offset_checkpoint(text, file=entry.path)
            texts[name] = text
        except UnreadableFileError as err:
            findings.add_error("io.read", ERROR, err, entry.path)
        except KafkaLogError as err:
            findings.add_error("checkpoint.parse", ERROR, err, entry.path, "Kafka's CheckpointFile refuses this file: ")
        except OSError as err:
            findings.add("io.read", ERROR, f"cannot read: {err}", entry.path)
    return ctx, texts


def report_unknown_partitions(findings: Findings, fs: LogFileSystem, path: str, ctx: DirContext, present: set) -> None:
    """Checkpoint entries of partitions that have no directory here (Kafka ignores them)."""
    for name, offsets in ctx.checkpoints.items():
        unknown = sorted(tp for tp in offsets if tp not in present)
        if unknown:
            shown = ", ".join(f"{t}-{p}" for t, p in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            findings.add(
                "checkpoint.unknown_partition",
                INFO,
                f"{len(unknown)} entries for partitions that have no directory here ({shown}); Kafka ignores them",
                fs.join(path, name),
            )


def check_checkpoint_ranges(
    findings: Findings,
    fs,
    dir_path,
    ctx: DirContext,
    texts: dict[str, str],
    topic: str,
    partition: int,
    result: PartitionResult,
) -> None:
    leo, start = result.log_end, result.log_start
    if leo is None:
        return
    add = findings.add

    def where(name: str) -> tuple[str, int | None]:
        file = fs.join(dir_path, name)
        return file, checkpoint_line_position(texts.get(name, ""), topic, partition)

    tp = f"{topic}-{partition}"
    recovery = ctx.get(RECOVERY_POINT_CHECKPOINT, topic, partition)
    if recovery is not None and recovery > leo:
        add(
            "checkpoint.range",
            ERROR,
            f"{tp}: recovery point {recovery} is above the log end offset {leo}: "
            "data the broker had flushed is missing",
            *where(RECOVERY_POINT_CHECKPOINT),
            offset=recovery,
        )
    log_start_cp = ctx.get(LOG_START_OFFSET_CHECKPOINT, topic, partition)
    hw = ctx.get(REPLICATION_OFFSET_CHECKPOINT, topic, partition)
    if log_start_cp is not None and log_start_cp > leo:
        add(
            "checkpoint.range",
            ERROR,
            f"{tp}: log start offset {log_start_cp} is above the log end offset "
            f"{leo}: Kafka would delete every segment on load",
            *where(LOG_START_OFFSET_CHECKPOINT),
            offset=log_start_cp,
        )
    if hw is not None:
        if hw > leo:
            add(
                "checkpoint.range",
                ERROR,
                f"{tp}: high watermark {hw} is above the log end offset {leo}: committed data is missing",
                *where(REPLICATION_OFFSET_CHECKPOINT),
                offset=hw,
            )
        if start is not None and hw < start:
            add(
                "checkpoint.range",
                ERROR,
                f"{tp}: high watermark {hw} is below the log start offset {start}",
                *where(REPLICATION_OFFSET_CHECKPOINT),
                offset=hw,
            )
    cleaner = ctx.get(CLEANER_OFFSET_CHECKPOINT, topic, partition)
    if cleaner is not None and ((start is not None and cleaner < start) or cleaner > leo):
        add(
            "checkpoint.range",
            WARNING,
            f"{tp}: cleaner checkpoint {cleaner} is outside [log start {start}, log end {leo}]; Kafka resets it",
            *where(CLEANER_OFFSET_CHECKPOINT),
            offset=cleaner,
        )


def checkpoint_line_position(text: str, topic: str, partition: int) -> int | None:
    """The byte position of the line for (topic, partition) in an offset checkpoint."""
    position = 0
    for line in text.splitlines(keepends=True):
        fields = line.split()
        if len(fields) == 3 and fields[0] == topic and fields[1] == str(partition):
            return position
        position += len(line.encode("utf-8"))
    return None
