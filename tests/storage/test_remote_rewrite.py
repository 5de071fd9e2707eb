"""Rewriting a remote segment of LocalTieredStorage in place (storage/remote_rewrite.py): staged and
checked, committed, swapped; an interrupted rewrite rolled back or forward by the next run; on a
local path and on an S3 bucket (moto's server). On the files of a real Kafka 4.3.1 broker
(tests/fixtures/tiered-4.3.1: remote segments at 0 and 14 of topic `tiered`, keys k0..k39)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from kafkalog.codec.filter import BatchRetention
from kafkalog.errors import LogDirError
from kafkalog.operations.validate import validate_paths
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.remote_log import RemotePartition, RemoteStorage
from kafkalog.storage.remote_rewrite import (
    COMMITTED,
    clear_remote_index_cache,
    commit_and_swap,
    recover_remote_partition,
    stage_remote_segment,
    staging_path,
)
from kafkalog.storage.rewrite import BatchPlan

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiered-4.3.1"
BUCKET = "kafkalog-remote-tier"


def _partition(root: str) -> RemotePartition:
    part = RemoteStorage.open(root).partition("tiered", 0)
    assert part is not None
    return part


def _plans(part: RemotePartition, keys: set[bytes]) -> dict:
    """Batch plans removing the records of `keys` from the first remote segment."""
    segment = part.segments[0]
    plans = {}
    for position, batch in segment.batches():
        gone = frozenset(r.offset for r in batch.records() if r.key in keys)
        if gone:
            plans[(segment.base_offset, position)] = BatchPlan(BatchRetention.DELETE_EMPTY, gone)
    return plans


def _records(part: RemotePartition) -> list[tuple[int, bytes]]:
    return [(r.offset, r.key) for s in part.segments for _, b in s.batches() for r in b.records()]


def _digests(fs: LogFileSystem, path: str) -> dict[str, str]:
    return {e.name: hashlib.sha256(fs.read_bytes(e.path)).hexdigest() for e in fs.list_dir(path) if not e.is_dir}


def _stage(part: RemotePartition, keys: set[bytes]) -> int:
    segment = part.segments[0]
    stats = stage_remote_segment(
        part.fs,
        part.path,
        segment,
        part.segment_ids[0],
        _plans(part, keys),
        delete_horizon_ms=0,
        index_interval_bytes=100,  # entries in the rebuilt offset index, to look offsets up by
    )
    return stats.records_out


@pytest.fixture
def remote(tmp_path) -> str:
    shutil.copytree(FIXTURE / "remote", tmp_path / "remote")
    return str(tmp_path / "remote")


@pytest.fixture
def bucket(s3_server, tmp_path) -> str:
    s3_server.create_bucket(BUCKET)
    uri = f"s3://{BUCKET}/{tmp_path.name}/remote"
    pafs.copy_files(str(FIXTURE / "remote"), uri, source_filesystem=pafs.LocalFileSystem())
    return uri


@pytest.mark.parametrize("where", ["remote", "bucket"])
def test_a_swapped_rewrite_keeps_every_other_record_at_its_offset(where, request):
    root = request.getfixturevalue(where)
    part = _partition(root)
    before, files = _records(part), _digests(part.fs, part.path)
    old_size = part.segments[0].size
    assert _stage(part, {b"k3", b"k7"}) == 12
    assert _digests(part.fs, part.path) == files  # staged only: nothing changed yet
    commit_and_swap(part.fs, part.path, 0, part.segment_ids[0])
    after = _partition(root)
    assert _records(after) == [(o, k) for o, k in before if k not in (b"k3", b"k7")]
    assert after.segments[0].size < old_size
    assert [e.name for e in part.fs.list_dir(part.path) if e.is_dir] == []  # no staging directory left
    # the rebuilt offset index finds every kept offset's batch
    segment = after.segments[0]
    positions = {p for p, _ in segment.batches()}
    assert segment.offset_index_entries and all(e.position in positions for e in segment.offset_index_entries)
    if where == "remote":
        assert validate_paths([root]).ok


def test_an_uncommitted_staging_is_refused_by_readers_and_rolled_back(remote):
    part = _partition(remote)
    before = _digests(part.fs, part.path)
    _stage(part, {b"k3"})
    with pytest.raises(LogDirError, match="interrupted kafkalog purge") as err:
        _partition(remote)
    assert ".kafkalog-staged" in str(err.value)
    assert recover_remote_partition(part.fs, part.path) == [f"rolled back the interrupted rewrite of {_name(part)}"]
    assert _digests(part.fs, part.path) == before


@pytest.mark.parametrize("where", ["remote", "bucket"])
def test_a_committed_swap_cut_short_is_rolled_forward(where, request):
    root = request.getfixturevalue(where)
    part = _partition(root)
    sid = part.segment_ids[0]
    _stage(part, {b"k3"})
    staging = staging_path(part.fs, part.path, 0, sid)
    part.fs.write_bytes(part.fs.join(staging, COMMITTED), b"")
    # the crash: the offset index moved into place, the rest still staged
    part.fs.rename(part.fs.join(staging, f"{0:020d}.index"), part.fs.join(part.path, f"{0:020d}-{sid}.index"))
    assert recover_remote_partition(part.fs, part.path) == [f"rolled forward the interrupted rewrite of {_name(part)}"]
    assert [k for _, k in _records(_partition(root))][:4] == [b"k0", b"k1", b"k2", b"k4"]
    assert not part.fs.exists(staging)


def test_the_brokers_cached_indexes_of_a_rewritten_segment_are_deleted(tmp_path):
    fs = LogFileSystem(pafs.LocalFileSystem())
    cache = tmp_path / "remote-log-index-cache"
    cache.mkdir()
    sid = "1rvAsADDRBSdo2tZkS233g"
    names = [f"0_{sid}.index", f"0_{sid}.timeindex", f"0_{sid}.txnindex", f"14_{sid}.index", f"0_{'x' * 22}.index"]
    for name in names:
        (cache / name).write_bytes(b"")
    deleted = clear_remote_index_cache(fs, str(tmp_path), 0, sid)
    assert sorted(Path(p).name for p in deleted) == sorted(names[:3])
    assert sorted(p.name for p in cache.iterdir()) == sorted(names[3:])


def _name(part: RemotePartition) -> str:
    return f"{0:020d}-{part.segment_ids[0]}"
