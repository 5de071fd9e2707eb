"""Rewriting a remote segment of Kafka's LocalTieredStorage in place (a purge of the remote tier):
staged, checked, then swapped, on a local path or an object store.

A fileset `<start>-<segmentId>.{log,index,timeindex,txnindex,snapshot,leader_epoch_checkpoint}` is
rewritten as follows (`storage/remote_log.py` tells the layout):

1. Stage: the new `.log`, `.index`, `.timeindex` (and `.txnindex` where the old fileset has one)
   are written into a directory of their own in the partition directory,
   `<start>-<segmentId>.kafkalog-staged/`, named as a local segment's files (`<start>.log`, ...).
2. Check: the staged segment is read back whole (every batch's CRC, offsets in order and inside the
   old segment's range) and must hold the number of records the rewrite wrote.
3. Commit: a `COMMITTED` file is written into the staging directory. From here on the rewrite is
   rolled forward, never back.
4. Swap: each staged file replaces its fileset file by a rename (on a local path, an atomic replace
   of one file; on an object store pyarrow's move, a server-side copy then a delete of the staged
   object: the fileset object is replaced whole, never torn). Then `COMMITTED` and the staging
   directory go.

A crash (or a failure) leaves, per fileset:

* before step 3: the old fileset untouched, and a staging directory without `COMMITTED`, which the
  next purge deletes (`recover_remote_partition`, "rolled back");
* after step 3: some files new, the others old with their new ones still staged; the next purge
  moves the staged files that are left into place and deletes the staging directory ("rolled
  forward"). On an object store a move cut between its copy and its delete leaves the staged object
  too: moved again, the same bytes are written.

Until then a staging directory makes kafkalog's readers refuse the partition (`remote_log.py`),
naming it. The `.snapshot` (producer state at the segment's end) and `.leader_epoch_checkpoint`
(epochs and their start offsets) are left as they are: a purge keeps every offset and every batch
of a producer (and so its last sequence and epoch), so both still tell the truth about the segment.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import KafkaLogError
from .fs import LogFileSystem
from .naming import segment_file_name
from .remote_log import REMOTE_STAGING_SUFFIX
from .rewrite import BatchPlan, RewriteStats, rewrite_segments
from .segment import LogSegment

COMMITTED = "COMMITTED"
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"  # RemoteIndexCache.DIR_NAME, in each log dir
# What RemoteIndexCache keeps of a remote segment: `<startOffset>_<segmentId>` + these suffixes
# (generateFileNamePrefixForIndex; the offset is not padded), and `.deleted` ones on their way out.
REMOTE_INDEX_CACHE_SUFFIXES = tuple(
    s + deleted for deleted in ("", ".deleted") for s in (".index", ".timeindex", ".txnindex")
)
_SWAP_ORDER = (".index", ".timeindex", ".txnindex", ".log")


def fileset_path(fs: LogFileSystem, partition_path: str, start: int, segment_id: str, suffix: str) -> str:
    return fs.join(partition_path, f"{start:020d}-{segment_id}{suffix}")


def staging_path(fs: LogFileSystem, partition_path: str, start: int, segment_id: str) -> str:
    return fileset_path(fs, partition_path, start, segment_id, REMOTE_STAGING_SUFFIX)


def stage_remote_segment(
    fs: LogFileSystem,
    partition_path: str,
    segment: LogSegment,
    segment_id: str,
    plans: Mapping[tuple[int, int], BatchPlan],
    *,
    delete_horizon_ms: int,
    index_interval_bytes: int,
) -> RewriteStats:
    """Steps 1 and 2: write the segment's rewrite into its staging directory and check it. A
    staging directory left by an attempt that failed (a retried task) is started afresh."""
    staging = staging_path(fs, partition_path, segment.base_offset, segment_id)
    if fs.exists(staging):
        fs.delete_dir(staging)
    fs.make_dirs(staging)
    written, stats = rewrite_segments(
        fs,
        staging,
        [segment],
        plans,
        delete_horizon_ms=delete_horizon_ms,
        index_interval_bytes=index_interval_bytes,
        aborted_txns=segment.aborted_txns(),
        suffix="",
    )
    if ".txnindex" in segment.files and ".txnindex" not in written.files:
        # the old fileset has one (empty: a purge keeps every transaction's marker and entry), so the
        # new one has one too, and the swap replaces the same set of files
        fs.write_bytes(fs.join(staging, segment_file_name(segment.base_offset, ".txnindex")), b"")
    _check_staged(fs, staging, segment, stats.records_out)
    return stats


def _check_staged(fs: LogFileSystem, staging: str, source: LogSegment, records: int) -> None:
    """The staged `.log` reads whole (CRCs, offsets in order inside the source's range) and holds
    `records` records."""
    files = {e.name[20:]: e for e in fs.list_dir(staging)}
    staged = LogSegment(
        fs, staging, source.base_offset, files, source.next_base_offset, topic=source.topic, partition=source.partition
    )
    counted, last, damaged = 0, staged.base_offset - 1, None
    for position, batch in staged.batches():
        if damaged is None and not batch.is_valid():
            damaged = position
        counted += batch.records_count
        last = batch.last_offset
    source_last = source.last_offset()
    if damaged is not None:
        raise KafkaLogError(
            f"the staged rewrite's batch at byte {damaged} fails its CRC; nothing was swapped", file=staged.log_path
        )
    if counted != records or (source_last is not None and last > source_last):
        raise KafkaLogError(
            f"the staged rewrite holds {counted} records up to offset {last}, expected {records} up to at most "
            f"{source_last}; nothing was swapped",
            file=staged.log_path,
        )


def commit_and_swap(fs: LogFileSystem, partition_path: str, start: int, segment_id: str) -> None:
    """Steps 3 and 4, for the fileset staged by `stage_remote_segment`."""
    staging = staging_path(fs, partition_path, start, segment_id)
    fs.write_atomic(fs.join(staging, COMMITTED), b"")
    _move_staged(fs, partition_path, staging, start, segment_id)


def _move_staged(fs: LogFileSystem, partition_path: str, staging: str, start: int, segment_id: str) -> None:
    for suffix in _SWAP_ORDER:
        src = fs.join(staging, segment_file_name(start, suffix))
        if fs.exists(src):
            fs.rename(src, fileset_path(fs, partition_path, start, segment_id, suffix))
    fs.sync_dir(partition_path)
    fs.delete(fs.join(staging, COMMITTED))
    fs.delete_dir(staging)


def discard_staged(fs: LogFileSystem, staging: str) -> None:
    """Delete a staging directory that was not committed (a failed run's)."""
    if fs.exists(staging):
        fs.delete_dir(staging)


def recover_remote_partition(fs: LogFileSystem, partition_path: str) -> list[str]:
    """Finish or undo the rewrites an interrupted purge left in a remote partition directory (the
    module docstring); one line per staging directory saying which."""
    done = []
    for entry in fs.list_dir(partition_path):
        if not (entry.is_dir and entry.name.endswith(REMOTE_STAGING_SUFFIX)):
            continue
        start, _, segment_id = entry.name[: -len(REMOTE_STAGING_SUFFIX)].partition("-")
        if fs.exists(fs.join(entry.path, COMMITTED)):
            _move_staged(fs, partition_path, entry.path, int(start), segment_id)
            done.append(f"rolled forward the interrupted rewrite of {entry.name[: -len(REMOTE_STAGING_SUFFIX)]}")
        else:
            fs.delete_dir(entry.path)
            done.append(f"rolled back the interrupted rewrite of {entry.name[: -len(REMOTE_STAGING_SUFFIX)]}")
    return done


def clear_remote_index_cache(fs: LogFileSystem, log_dir: str, start: int, segment_id: str) -> list[str]:
    """Delete the broker's cached copies of a rewritten remote segment's indexes in `log_dir`
    (RemoteIndexCache loads them at start and would look positions up in the old offset index);
    the broker fetches the new ones when it next reads the segment. Returns the deleted paths."""
    cache = fs.join(log_dir, REMOTE_INDEX_CACHE_DIR)
    deleted = []
    for suffix in REMOTE_INDEX_CACHE_SUFFIXES:
        path = fs.join(cache, f"{start}_{segment_id}{suffix}")
        if fs.exists(path):
            fs.delete(path)
            deleted.append(path)
    return deleted
