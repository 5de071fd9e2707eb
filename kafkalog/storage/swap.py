"""Kafka's crash-safe replacement of segments, and the recovery of an interrupted one.

A rewrite writes its new segments as `<base>.<kind>.cleaned`, then:
  1. renames every new segment's files `.cleaned` -> `.swap`, the highest base offset first;
  2. renames every old segment's files to `.deleted`, the lowest base offset first;
  3. renames `.swap` -> final names (each segment's `.log` before its indexes) and syncs the directory;
  4. deletes the producer snapshots of segments that no longer exist, then the `.deleted` files.
Kafka's log loader, and `recover_partition` here, turn a directory interrupted anywhere in this
sequence into either the complete old or the complete new set of segments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .fs import FileEntry, LogFileSystem
from .naming import SegmentFileName, parse_segment_file_name, segment_file_name
from .segment import SegmentReader

SEGMENT_KINDS = (".log", ".index", ".timeindex", ".txnindex")
SWAP_STEPS = ("cleaned-written", "swap-renamed", "old-deleted", "swap-completed", "done")
SWAP_THREADS = 8  # partitions swapped at once by replace_in_partitions

# A test hook: called with each step name and file name as the swap proceeds; it may raise to
# simulate a crash at that point.
FaultHook = Callable[[str, str], None]


def no_fault(step: str, name: str) -> None:
    pass


def replace_segments(
    fs: LogFileSystem,
    partition_dir: str,
    new_bases: Iterable[int],
    old_bases: Iterable[int],
    *,
    fault: FaultHook = no_fault,
) -> None:
    """Swap the staged `.cleaned` segments `new_bases` in for the segments `old_bases`.

    Producer snapshots at old base offsets that are not new base offsets are deleted."""
    new_bases, old_bases = sorted(set(new_bases)), sorted(set(old_bases))
    files = {e.name: e for e in fs.list_dir(partition_dir)}
    fault("cleaned-written", "")
    for base in reversed(new_bases):
        for name in _segment_files(files, base, ".cleaned"):
            fs.rename(files[name].path, _sibling(files[name], name[: -len(".cleaned")] + ".swap"))
            fault("swap-renamed", name)
    for base in old_bases:
        for name in _segment_files(files, base, None):
            fs.rename(files[name].path, _sibling(files[name], name + ".deleted"))
            fault("old-deleted", name)
    _complete_swaps(fs, partition_dir, fault)
    fs.sync_dir(partition_dir)
    # the snapshots go while `.deleted` files still mark the replacement: a crash here leaves
    # recovery a sign that it must remove the strays
    doomed = set(old_bases) - set(new_bases)
    for entry in fs.list_dir(partition_dir):
        parsed = parse_segment_file_name(entry.name)
        if parsed and parsed.kind == ".snapshot" and not parsed.state and parsed.base_offset in doomed:
            fs.delete(entry.path)
    _delete_leftovers(fs, partition_dir, ".deleted", fault)
    fault("done", "")


def replace_in_partitions(
    fs: LogFileSystem, replacements: dict[str, tuple[list[int], list[int]]], *, fault: FaultHook = no_fault
) -> None:
    """`replace_segments` in many partition directories (path -> (new bases, old bases)), several
    at a time: a partition's swap is renames and a directory sync, time spent waiting on the disk
    or the store, and each partition's swap is crash-safe on its own. When one fails, the others
    run to their end before its error is raised."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(SWAP_THREADS, len(replacements)))) as pool:
        swaps = [
            pool.submit(replace_segments, fs, path, *replacements[path], fault=fault) for path in sorted(replacements)
        ]
    for swap in swaps:
        swap.result()


def _segment_files(files: dict[str, FileEntry], base: int, state: str | None) -> list[str]:
    """The segment's files in a given state, `.log` first."""
    names = [segment_file_name(base, kind + (state or "")) for kind in SEGMENT_KINDS]
    return [n for n in names if n in files]


def _sibling(entry: FileEntry, name: str) -> str:
    return entry.path[: len(entry.path) - len(entry.name)] + name


def _parsed(name: str) -> SegmentFileName:
    """The parts of the name of a file of a swap (a segment file name, `in_flight_files` says so)."""
    parsed = parse_segment_file_name(name)
    assert parsed is not None, name
    return parsed


def _complete_swaps(fs: LogFileSystem, partition_dir: str, fault: FaultHook) -> None:
    swaps = sorted(
        (e for e in fs.list_dir(partition_dir) if e.name.endswith(".swap")),
        key=lambda e: (_parsed(e.name).base_offset, SEGMENT_KINDS.index(_parsed(e.name).kind)),
    )
    for entry in swaps:
        fs.rename(entry.path, _sibling(entry, entry.name[: -len(".swap")]))
        fault("swap-completed", entry.name)


def _delete_leftovers(fs: LogFileSystem, partition_dir: str, state: str, fault: FaultHook = no_fault) -> None:
    for entry in fs.list_dir(partition_dir):
        if entry.name.endswith(state):
            fs.delete(entry.path)
            fault("deleted-removed", entry.name)


def in_flight_files(fs: LogFileSystem, partition_dir: str) -> list[FileEntry]:
    """Leftovers of an interrupted rewrite: `.cleaned`, `.swap` and `.deleted` files."""
    return [
        e
        for e in fs.list_dir(partition_dir)
        if (p := parse_segment_file_name(e.name)) is not None and p.state is not None
    ]


def recover_partition(fs: LogFileSystem, partition_dir: str) -> list[str]:
    """Finish or roll back an interrupted swap exactly as Kafka's LogLoader does; returns what it did.

    `.deleted` files go; `.swap` files at or above the lowest `.cleaned` base offset belong to an
    incomplete step 1 and go, with every `.cleaned` file; the remaining `.swap` segments won, so
    live files whose base offset lies in their offset range are deleted and the swaps renamed. When
    a replacement won, the producer snapshots it would have deleted in step 4 go as Kafka's loader
    removes stray snapshots."""
    actions = []
    entries = in_flight_files(fs, partition_dir)
    for e in entries:
        if e.name.endswith(".deleted"):
            fs.delete(e.path)
            actions.append(f"deleted {e.name}")
    cleaned = [e for e in entries if e.name.endswith(".cleaned")]
    min_cleaned = min((_parsed(e.name).base_offset for e in cleaned), default=None)
    swaps = []
    for e in entries:
        if not e.name.endswith(".swap"):
            continue
        if min_cleaned is not None and _parsed(e.name).base_offset >= min_cleaned:
            fs.delete(e.path)
            actions.append(f"deleted incomplete {e.name}")
        else:
            swaps.append(e)
    for e in cleaned:
        fs.delete(e.path)
        actions.append(f"deleted {e.name}")
    swap_logs = [e for e in swaps if _parsed(e.name).kind == ".log"]
    if swap_logs:
        low = min(_parsed(e.name).base_offset for e in swap_logs)
        high = max(_next_offset(fs, e) for e in swap_logs)
        for e in fs.list_dir(partition_dir):
            p = parse_segment_file_name(e.name)
            if p and p.state is None and p.kind in SEGMENT_KINDS and low <= p.base_offset < high:
                fs.delete(e.path)
                actions.append(f"deleted replaced {e.name}")
    for e in swaps:
        fs.rename(e.path, _sibling(e, e.name[: -len(".swap")]))
        actions.append(f"renamed {e.name}")
    if swaps or any(e.name.endswith(".deleted") for e in entries):  # a replacement won: step 4 is undone
        actions += _remove_stray_snapshots(fs, partition_dir)
    if actions:
        fs.sync_dir(partition_dir)
    return actions


def _remove_stray_snapshots(fs: LogFileSystem, partition_dir: str) -> list[str]:
    """Kafka's removeStraySnapshots at load: a producer snapshot that matches no segment base offset
    goes, except the latest one when it lies above the last segment's base offset."""
    names = [(parse_segment_file_name(e.name), e) for e in fs.list_dir(partition_dir)]
    bases = {p.base_offset for p, _ in names if p and p.state is None and p.kind == ".log"}
    snapshots = sorted((p.base_offset, e) for p, e in names if p and p.state is None and p.kind == ".snapshot")
    latest = snapshots[-1][0] if snapshots and bases and snapshots[-1][0] > max(bases) else None
    removed = []
    for offset, e in snapshots:
        if offset not in bases and offset != latest:
            fs.delete(e.path)
            removed.append(f"deleted stray {e.name}")
    return removed


def _next_offset(fs: LogFileSystem, log_entry: FileEntry) -> int:
    """The offset after the last batch of a `.log` file (its base offset when it is empty)."""
    base = _parsed(log_entry.name).base_offset
    last = None
    for _, batch in SegmentReader(fs, log_entry.path, log_entry.size):
        last = batch
    return base if last is None else last.last_offset + 1
