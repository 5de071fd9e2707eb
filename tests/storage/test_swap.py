"""The swap protocol, crashed at every step and recovered: LCT.testRecoveryAfterCrash stages 1-6; and
the checks recovery makes of a leftover `.swap` before it completes it (tests/leftovers.py)."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from kafkalog.codec.batch import build_batch
from kafkalog.codec.reader import iter_batches
from kafkalog.codec.records import Record
from kafkalog.errors import KafkaLogError
from kafkalog.storage.fs import LogFileSystem
from kafkalog.storage.swap import (
    SWAP_INTENT,
    check_swaps,
    in_flight_files,
    recover_partition,
    replace_in_partitions,
    replace_segments,
)
from tests import leftovers


class Crash(Exception):
    pass


def _write_segment(d, base, offsets, state=""):
    data = b"".join(build_batch([Record(o, 1000 + o, b"k%d" % (o % 3), b"v%d" % o)]) for o in offsets)
    (d / f"{base:020d}.log{state}").write_bytes(data)
    (d / f"{base:020d}.index{state}").write_bytes(b"")
    (d / f"{base:020d}.timeindex{state}").write_bytes(b"")


def _old_state(d):
    _write_segment(d, 0, range(0, 5))
    _write_segment(d, 5, range(5, 10))
    _write_segment(d, 10, range(10, 12))  # the active segment, not rewritten
    (d / f"{5:020d}.snapshot").write_bytes(b"s5")
    (d / f"{10:020d}.snapshot").write_bytes(b"s10")


OLD = list(range(12))
NEW = [3, 4, 8, 9, 10, 11]  # the new segment 0 keeps offsets 3, 4, 8, 9


def _stage(d):
    _write_segment(d, 0, [3, 4, 8, 9], state=".cleaned")


def _offsets(d):
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            out += [b.base_offset for b in iter_batches((d / name).read_bytes())]
    return out


def _count_steps(tmp_path):
    d = tmp_path / "count" / "t-0"
    d.mkdir(parents=True)
    _old_state(d)
    _stage(d)
    steps = []
    fs = LogFileSystem.for_path(str(d))[0]
    replace_segments(fs, str(d), [0], [0, 5], fault=lambda step, name: steps.append((step, name)))
    return steps


def test_swap_completes_and_removes_snapshots_of_removed_segments(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    _stage(d)
    fs = LogFileSystem.for_path(str(d))[0]
    replace_segments(fs, str(d), [0], [0, 5])
    assert _offsets(d) == NEW
    names = sorted(os.listdir(d))
    assert not in_flight_files(fs, str(d))
    assert f"{5:020d}.snapshot" not in names and f"{10:020d}.snapshot" in names
    assert f"{5:020d}.log" not in names


def _crashed_at(root, i: int, kept: list[int]):
    """The old state with a new segment 0 of the offsets `kept` swapped in for segments 0 and 5, the
    swap crashed at its step `i`: the partition directory and its filesystem."""
    d = root / "t-0"
    d.mkdir(parents=True)
    _old_state(d)
    _write_segment(d, 0, kept, state=".cleaned")
    fs = LogFileSystem.for_path(str(d))[0]
    seen = []

    def fault(step, name):
        seen.append((step, name))
        if len(seen) == i + 1:
            raise Crash(step)

    with pytest.raises(Crash):
        replace_segments(fs, str(d), [0], [0, 5], fault=fault)
    return d, fs


def test_crash_at_every_step_recovers_old_or_new__LCT_testRecoveryAfterCrash(tmp_path):
    steps = _count_steps(tmp_path)
    assert len(steps) > 8
    outcomes = set()
    for i, crash_step in enumerate(steps):
        d, fs = _crashed_at(tmp_path / f"crash{i}", i, [3, 4, 8, 9])
        recover_partition(fs, str(d))
        assert not in_flight_files(fs, str(d)), crash_step
        got = _offsets(d)
        assert got in (OLD, NEW), (crash_step, got)
        outcomes.add(tuple(got))
        # every segment that is there has its .log (no orphan index files after recovery)
        bases = {n.split(".")[0] for n in os.listdir(d) if not n.endswith(".snapshot")}
        assert all((d / f"{b}.log").exists() for b in bases), crash_step
    assert outcomes == {tuple(OLD), tuple(NEW)}  # crashes early roll back, crashes late complete


def test_recovery_of_a_clean_directory_does_nothing(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    fs = LogFileSystem.for_path(str(d))[0]
    assert recover_partition(fs, str(d)) == []
    assert _offsets(d) == OLD


def test_partitions_swapped_together_and_a_crash_in_one_leaves_the_others_whole(tmp_path):
    """replace_in_partitions swaps many partitions at once; when one crashes mid-way, the others end
    their swap before the error is raised, and the crashed one recovers to its old or new state."""
    dirs = []
    for p in range(12):
        d = tmp_path / f"t-{p}"
        d.mkdir()
        _old_state(d)
        _stage(d)
        dirs.append(d)
    fs = LogFileSystem.for_path(str(tmp_path))[0]
    replace_in_partitions(fs, {str(d): ([0], [0, 5]) for d in dirs[:6]})
    assert all(_offsets(d) == NEW and not in_flight_files(fs, str(d)) for d in dirs[:6])

    crashes = []
    lock = threading.Lock()

    def crash_once(step, name):  # the first partition to rename its old segment 5 crashes there
        with lock:
            if step == "old-deleted" and name == f"{5:020d}.log" and not crashes:
                crashes.append(name)
                raise Crash(name)

    with pytest.raises(Crash):
        replace_in_partitions(fs, {str(d): ([0], [0, 5]) for d in dirs[6:]}, fault=crash_once)
    interrupted = [d for d in dirs[6:] if in_flight_files(fs, str(d))]
    assert len(interrupted) == 1
    assert all(_offsets(d) == NEW for d in dirs[6:] if d not in interrupted)
    recover_partition(fs, str(interrupted[0]))
    assert _offsets(interrupted[0]) in (OLD, NEW)


# -- a leftover .swap is read and checked before it is completed ----------------------------------


def _segment_bytes(offsets) -> bytes:
    return b"".join(build_batch([Record(o, 1000 + o, b"k%d" % (o % 3), b"v%d" % o)]) for o in offsets)


def _files(d) -> dict:
    return {name: (d / name).read_bytes() for name in sorted(os.listdir(d))}


LOST = {  # (kind, originals) -> what the error says would be lost, where the originals are not live
    ("empty", "deleted"): "Kafka would replace 00000000000000000005.log.deleted, 5 batches, offsets 5-9, with a "
    "0-byte segment: offsets 5-9 would be lost",
    ("torn_length", "deleted"): "only 00000000000000000005.log.deleted remain): completing the swap, as Kafka "
    "would, loses offsets 6-9",
    ("torn_length", "gone"): "no file of them is left): completing the swap, as Kafka would, loses offsets 6-9",
    ("truncated_copy", "gone"): "loses offset 9;",
    ("garbage_negative", "deleted"): "loses offsets 5-9",
}


@pytest.mark.parametrize("originals", leftovers.ORIGINALS)
@pytest.mark.parametrize("kind", leftovers.KINDS)
def test_a_leftover_swap_is_completed_only_when_it_reads_whole_and_covers_what_it_replaces(tmp_path, kind, originals):
    """A `.swap` that is empty, torn (a length past its end, a cut copy) or garbage (a positive or a
    negative first length) is never renamed: recovery raises one error naming the `.swap`, the byte
    and the offset, says what Kafka would do or what would be lost, and leaves every byte as it was.
    A valid one is completed as Kafka completes it, with its originals live, `.deleted` or gone."""
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    swap, byte, offset = leftovers.make_swap(d, 5, kind, originals)
    fs = LogFileSystem.for_path(str(d))[0]
    before = _files(d)
    if leftovers.completes(kind, originals):
        check_swaps(fs, str(d))
        assert f"renamed {swap.name}" in recover_partition(fs, str(d))
        assert _offsets(d) == (OLD if kind == "valid" else list(range(5)) + [10, 11])
        assert not in_flight_files(fs, str(d))
        return
    with pytest.raises(KafkaLogError) as checked:
        check_swaps(fs, str(d))
    with pytest.raises(KafkaLogError) as raised:
        recover_partition(fs, str(d))
    assert _files(d) == before  # nothing renamed, nothing deleted
    err = raised.value
    assert str(err) == str(checked.value) and "\n" not in str(err)
    assert (err.file, err.position, err.offset) == (str(swap), byte, offset), str(err)
    assert "kafkalog does not complete such a swap and leaves the partition as it is" in err.message
    if originals == "live":
        assert f"Kafka would replace {5:020d}.log, 5 batches, offsets 5-9, with " in err.message, err.message
    if (kind, originals) in LOST:
        assert LOST[(kind, originals)] in err.message, err.message


def test_a_swap_that_covers_only_part_of_what_it_replaces_is_refused_with_what_would_be_lost(tmp_path):
    """A copy of a segment cut at a batch boundary reads whole; it still does not cover the offsets
    of the live segment it replaces: the issue's example, in validate's words."""
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    (d / f"{5:020d}.log.swap").write_bytes(_segment_bytes(range(5, 8)))
    fs = LogFileSystem.for_path(str(d))[0]
    before = _files(d)
    with pytest.raises(KafkaLogError) as raised:
        recover_partition(fs, str(d))
    assert _files(d) == before
    assert raised.value.message.startswith(
        f"Kafka would replace {5:020d}.log, 5 batches, offsets 5-9, with a segment of 3 batches, offsets 5-7: "
        "offsets 8-9 would be lost"
    ), raised.value.message
    assert raised.value.offset == 8


def test_a_swap_that_would_overlap_the_segment_before_it_is_refused(tmp_path):
    """Named below the end of the live segment before it (which recovery keeps), a swap would leave
    offsets in two segments."""
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    _write_segment(d, 3, [5, 6, 7, 8, 9], state=".swap")
    fs = LogFileSystem.for_path(str(d))[0]
    before = _files(d)
    with pytest.raises(KafkaLogError, match=r"holds offsets up to 4: Kafka would keep both") as raised:
        recover_partition(fs, str(d))
    assert _files(d) == before and raised.value.offset == 3


@pytest.mark.parametrize(
    "suffix,data,says",
    [
        (".index", struct.pack(">ii", 1, 7), "does not point at the start of a batch"),
        (".index", struct.pack(">ii", 9, 0), "lies past the last offset"),
        (".index", b"\x00" * 5, "not a multiple of the 8-byte entry size"),
        (".timeindex", struct.pack(">qi", 1009, 4) + struct.pack(">qi", 1001, 3), "last timestamp 1001 is less"),
        (".txnindex", struct.pack(">hqqqq", 0, 7, 5, 2, 5), "below the segment base offset"),
    ],
    ids=["index-mid-batch", "index-past-end", "index-partial-entry", "timeindex-order", "txnindex-below-base"],
)
def test_an_index_swap_that_does_not_match_its_log_is_refused(tmp_path, suffix, data, says):
    """kafkalog does not trust a `.swap` index Kafka would install as it is (or rebuild): the swap
    is refused with the index named, and nothing renamed."""
    from kafkalog.errors import CorruptIndexError

    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    _write_segment(d, 5, [8, 9], state=".swap")
    (d / f"{5:020d}{suffix}.swap").write_bytes(data)
    fs = LogFileSystem.for_path(str(d))[0]
    before = _files(d)
    with pytest.raises(CorruptIndexError, match=says) as raised:
        recover_partition(fs, str(d))
    assert _files(d) == before
    assert raised.value.file == str(d / f"{5:020d}{suffix}.swap") and raised.value.position is not None
    assert "Kafka would rename it into place" in raised.value.message


def test_a_swap_index_renamed_after_its_log_is_checked_against_the_live_log(tmp_path):
    """Step 3 interrupted between a segment's `.log` and its index: the index `.swap` is checked
    against the `.log` already in place, and completed when it matches."""
    d = tmp_path / "t-0"
    d.mkdir()
    _old_state(d)
    os.remove(d / f"{5:020d}.index")
    (d / f"{5:020d}.log").write_bytes(_segment_bytes([8, 9]))
    (d / f"{5:020d}.index.swap").write_bytes(struct.pack(">ii", 3, 0))
    fs = LogFileSystem.for_path(str(d))[0]
    assert recover_partition(fs, str(d)) == [f"renamed {5:020d}.index.swap"]
    (d / f"{5:020d}.index.swap").write_bytes(struct.pack(">ii", 5, 0))  # offset 10: past offset 9
    with pytest.raises(Exception, match="lies past the last offset"):
        recover_partition(fs, str(d))


SHORT = [3, 4, 7, 10, 11]  # the new segment 0 ends at 7: the records that ended segment 5 were removed


@pytest.mark.parametrize("intent", [True, False], ids=["kafkalog's swap", "intent lost"])
def test_a_crash_at_every_step_of_a_swap_whose_new_segment_ends_short(tmp_path, intent):
    """A compaction or purge can leave its new segment ending below the segments it replaces, which no
    file tells from a copy cut short: kafkalog's swap says so in its intent, and recovery completes
    or rolls back its own swap at every step. Without the intent (not kafkalog's swap), a `.swap`
    that does not cover the live or `.deleted` segments it replaces is refused, the directory as it is."""
    steps = _count_steps(tmp_path)
    outcomes = set()
    for i in range(len(steps)):
        d, fs = _crashed_at(tmp_path / f"crash{i}", i, [3, 4, 7])
        if not intent and (d / SWAP_INTENT).exists():
            (d / SWAP_INTENT).unlink()
            if (d / f"{0:020d}.log.swap").exists() and not list(d.glob("*.cleaned")):
                before = _files(d)
                with pytest.raises(KafkaLogError, match="offsets 8-9 would be lost"):
                    recover_partition(fs, str(d))
                assert _files(d) == before
                outcomes.add("refused")
                continue
        recover_partition(fs, str(d))
        assert not in_flight_files(fs, str(d)) and not (d / SWAP_INTENT).exists(), steps[i]
        got = _offsets(d)
        assert got in (OLD, SHORT), (steps[i], got)
        outcomes.add(tuple(got))
    assert {tuple(OLD), tuple(SHORT)} <= outcomes
    assert ("refused" in outcomes) == (not intent)
