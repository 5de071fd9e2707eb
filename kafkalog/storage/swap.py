"""Kafka's crash-safe replacement of segments, and the recovery of an interrupted one.

A rewrite writes its new segments as `<base>.<kind>.cleaned`, then:
  1. renames every new segment's files `.cleaned` -> `.swap`, the highest base offset first;
  2. renames every old segment's files to `.deleted`, the lowest base offset first;
  3. renames `.swap` -> final names (each segment's `.log` before its indexes) and syncs the directory;
  4. deletes the producer snapshots of segments that no longer exist, then the `.deleted` files.
Kafka's log loader, and `recover_partition` here, turn a directory interrupted anywhere in this
sequence into either the complete old or the complete new set of segments. Unlike Kafka's loader,
`recover_partition` completes a leftover `.swap` only once it has read it whole and checked it
against the segments it replaces (`check_swaps`, docs/semantics.md "Recovery"): a `.swap` left by
anything but an interrupted swap (empty, torn, garbage) must not replace a live segment.

A rewrite's new segment may end below the segments it replaces (the records that ended them were
compacted or purged away), and then nothing in the files tells it from a copy cut short. So before
step 1 kafkalog's own swap writes an intent (`SWAP_INTENT`: each `.swap` file it is about to make,
with its size) and removes it after step 4. Recovery completes the `.swap` files an intent names, as
they are, without the coverage check; any other `.swap` (Kafka's cleaner's, or one no rewrite made)
must cover what it replaces. Kafka's loader ignores the file (its name has none of a segment's
suffixes).

Kafka's loader takes any `.cleaned` file for the sign of an unfinished step 1 and deletes the `.swap`
files at or above it. Where the directory shows the swap past its step 1 (a segment's `.deleted`
file, or a `.log.swap` whose offsets no live segment holds), the `.cleaned` file is a stray and those
`.swap` files may be the only copy: recovery completes them once they pass the checks, and refuses
the partition otherwise. Only regular files are a swap's files: an entry of another kind under such
a name makes the swap and recovery refuse the partition (`Partition.ensure_regular_files`).
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from .. import tuning
from ..errors import CorruptIndexError, KafkaLogError, LogDirError
from .fs import FileEntry, LogFileSystem
from .index import OffsetIndex, OffsetPosition, TimeIndex
from .naming import INT32_MAX, SegmentFileName, parse_segment_file_name, segment_file_name
from .partition import Partition
from .segment import SegmentReader, batch_first_offset, locate
from .txnindex import TransactionIndex

SEGMENT_KINDS = (".log", ".index", ".timeindex", ".txnindex")
SWAP_STEPS = ("cleaned-written", "swap-renamed", "old-deleted", "swap-completed", "done")

LEFT = "kafkalog does not complete such a swap and leaves the partition as it is"  # ends every refusal
SWAP_INTENT = "kafkalog-swap-intent.json"  # the `.swap` files kafkalog's own swap makes, with their sizes

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
    # the one listing: every later step renames or deletes files it names, or files it renamed
    listing = fs.list_dir(partition_dir)
    Partition.open(fs, partition_dir, listing).ensure_regular_files()  # a directory cannot be renamed back
    files = {e.name: e for e in listing}
    staged = {
        name[: -len(".cleaned")] + ".swap": files[name].size
        for b in new_bases
        for name in _segment_files(files, b, ".cleaned")
    }
    intent = {"version": 1, "swaps": staged, "replaced": old_bases}
    fs.write_atomic(fs.join(partition_dir, SWAP_INTENT), json.dumps(intent).encode())
    fault("cleaned-written", "")
    swaps = [e for e in listing if e.name.endswith(".swap")]
    for base in reversed(new_bases):
        for name in _segment_files(files, base, ".cleaned"):
            swaps.append(_renamed(fs, files[name], name[: -len(".cleaned")] + ".swap"))
            fault("swap-renamed", name)
    deleted = [e for e in listing if e.name.endswith(".deleted")]
    for base in old_bases:
        for name in _segment_files(files, base, None):
            deleted.append(_renamed(fs, files[name], name + ".deleted"))
            fault("old-deleted", name)
    _complete_swaps(fs, swaps, fault)
    fs.sync_dir(partition_dir)
    # the snapshots go while `.deleted` files still mark the replacement: a crash here leaves
    # recovery a sign that it must remove the strays (no step renames a snapshot: the listing's stand)
    doomed = set(old_bases) - set(new_bases)
    for entry in listing:
        parsed = parse_segment_file_name(entry.name)
        if parsed and parsed.kind == ".snapshot" and not parsed.state and parsed.base_offset in doomed:
            fs.delete(entry.path)
    for entry in sorted(deleted, key=lambda e: e.name):
        fs.delete(entry.path)
        fault("deleted-removed", entry.name)
    fs.delete(fs.join(partition_dir, SWAP_INTENT))
    fault("done", "")


def replace_in_partitions(
    fs: LogFileSystem, replacements: dict[str, tuple[list[int], list[int]]], *, fault: FaultHook = no_fault
) -> None:
    """`replace_segments` in many partition directories (path -> (new bases, old bases)), several
    at a time: a partition's swap is renames and a directory sync, time spent waiting on the disk
    or the store, and each partition's swap is crash-safe on its own. When one fails, the others
    run to their end before its error is raised."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(tuning.SWAP_THREADS, len(replacements)))) as pool:
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


def _renamed(fs: LogFileSystem, entry: FileEntry, name: str) -> FileEntry:
    """Rename `entry` to `name` in its directory; the renamed file's entry."""
    path = _sibling(entry, name)
    fs.rename(entry.path, path)
    return entry._replace(name=name, path=path)


def _complete_swaps(fs: LogFileSystem, swaps: list[FileEntry], fault: FaultHook) -> None:
    """Step 3: each `.swap` file renamed to its final name, segment by segment, `.log` first."""
    for entry in sorted(swaps, key=lambda e: (_parsed(e.name).base_offset, SEGMENT_KINDS.index(_parsed(e.name).kind))):
        fs.rename(entry.path, _sibling(entry, entry.name[: -len(".swap")]))
        fault("swap-completed", entry.name)


def in_flight_files(fs: LogFileSystem, partition_dir: str) -> list[FileEntry]:
    """Leftovers of an interrupted rewrite: `.cleaned`, `.swap` and `.deleted` files."""
    return _in_flight(fs.list_dir(partition_dir))


def _in_flight(listing: list[FileEntry]) -> list[FileEntry]:
    return [e for e in listing if (p := parse_segment_file_name(e.name)) is not None and p.state is not None]


def needs_recovery(listing: list[FileEntry]) -> bool:
    """Whether a partition directory so listed holds anything `recover_partition` acts on: files of
    an interrupted swap, or kafkalog's swap intent."""
    return bool(_in_flight(listing)) or any(e.name == SWAP_INTENT for e in listing)


def recover_partition(fs: LogFileSystem, partition_dir: str, listing: list[FileEntry] | None = None) -> list[str]:
    """Finish or roll back an interrupted swap as Kafka's LogLoader does; returns what it did.

    `.deleted` files go; `.swap` files at or above the lowest `.cleaned` base offset belong to an
    incomplete step 1 and go, with every `.cleaned` file (unless the directory shows the swap past
    its step 1, `_past_step_one`: then they won too); the remaining `.swap` segments won, so
    live files whose base offset lies in their offset range are deleted and the swaps renamed. When
    a replacement won, the producer snapshots it would have deleted in step 4 go as Kafka's loader
    removes stray snapshots. Unlike Kafka's loader, the winning swaps are read and checked first
    (`check_swaps`): one that would lose or misplace data raises, and nothing is touched.
    `listing`: the directory's, when the caller listed it already."""
    recovery = _plan_recovery(fs, partition_dir, listing)
    actions = []
    for what, entries in (
        ("deleted", recovery.deleted),
        ("deleted incomplete", recovery.incomplete),
        ("deleted", recovery.cleaned),
        ("deleted replaced", recovery.replaced),
    ):
        for e in entries:
            fs.delete(e.path)
            actions.append(f"{what} {e.name}")
    for e in recovery.swaps:
        fs.rename(e.path, _sibling(e, e.name[: -len(".swap")]))
        actions.append(f"renamed {e.name}")
    if recovery.swaps or recovery.deleted:  # a replacement won: step 4 is undone
        actions += _remove_stray_snapshots(fs, partition_dir)
    if recovery.intent is not None:
        fs.delete(recovery.intent.path)
        actions.append(f"deleted {SWAP_INTENT}")
    if actions:
        fs.sync_dir(partition_dir)
    return actions


def check_swaps(fs: LogFileSystem, partition_dir: str, listing: list[FileEntry] | None = None) -> None:
    """Raise the KafkaLogError `recover_partition` would raise, touching nothing: a leftover `.swap`
    that does not read whole, does not cover the offsets of the segments it replaces, would overlap
    the segment before it, or has an index that does not match its `.log`. The error names the file,
    the byte and the offset, and says what a broker starting on the directory would do. `listing`:
    the directory's, when the caller listed it already."""
    _plan_recovery(fs, partition_dir, listing)


@dataclass
class _Recovery:
    """What recovering a partition directory deletes and renames, decided from one listing."""

    deleted: list[FileEntry]  # `.deleted` files
    incomplete: list[FileEntry]  # `.swap` files of an incomplete step 1
    cleaned: list[FileEntry]
    replaced: list[FileEntry]  # live files of the segments the winning swaps replace
    swaps: list[FileEntry]  # the winning `.swap` files, renamed
    intent: FileEntry | None  # kafkalog's swap intent, deleted once the swap is settled


def _plan_recovery(fs: LogFileSystem, partition_dir: str, listing: list[FileEntry] | None = None) -> _Recovery:
    listing = fs.list_dir(partition_dir) if listing is None else listing
    part = Partition.open(fs, partition_dir, listing)
    part.ensure_regular_files()
    entries = _in_flight(listing)
    deleted = [e for e in entries if e.name.endswith(".deleted")]
    cleaned = [e for e in entries if e.name.endswith(".cleaned")]
    min_cleaned = min((_parsed(e.name).base_offset for e in cleaned), default=None)
    swaps: list[FileEntry] = []
    incomplete: list[FileEntry] = []
    for e in entries:
        if e.name.endswith(".swap"):
            late = min_cleaned is not None and _parsed(e.name).base_offset >= min_cleaned
            (incomplete if late else swaps).append(e)
    replaced = []
    intent = next((e for e in listing if e.name == SWAP_INTENT), None)
    # Kafka's loader drops the `.swap` files above a `.cleaned` one as an unfinished step 1; but
    # when the swap had gone past step 1, the `.cleaned` file is a stray and they are all that is
    # left of what they replace: then they must be completed, once they pass the checks below
    past_step_one = _past_step_one(part, deleted, incomplete)
    if past_step_one is not None:
        _refuse_unfinished_own_swap(fs, intent, cleaned, past_step_one)
        swaps, incomplete = swaps + incomplete, []
    if swaps:
        # the segments kafkalog's own swap replaces, where its intent vouches for the swaps: a new
        # segment that ends short does not say which segments it replaces
        vouched = _vouched(fs, intent, swaps)
        try:
            low, high = _SwapCheck(fs, partition_dir, listing, swaps).run(check_coverage=vouched is None)
        except KafkaLogError as err:
            if past_step_one is None:
                raise
            raise _stray_cleaned(err, cleaned, past_step_one) from None
        for e in listing:
            p = parse_segment_file_name(e.name)
            if p and p.state is None and p.kind in SEGMENT_KINDS:
                if low <= p.base_offset < high or (vouched is not None and p.base_offset in vouched):
                    replaced.append(e)
    return _Recovery(deleted, incomplete, cleaned, replaced, swaps, intent)


def _past_step_one(part: Partition, deleted: list[FileEntry], incomplete: list[FileEntry]) -> str | None:
    """Why the `incomplete` swaps (those at or above the lowest `.cleaned` base offset) cannot
    belong to an unfinished step 1, or None when they may: a segment's `.deleted` file (step 2 had
    begun), or a `.log.swap` whose offsets no live segment holds (its originals are gone, which a
    step 1, renaming only new files, never does)."""
    if not incomplete:
        return None
    segments = [e for e in deleted if _parsed(e.name).kind in SEGMENT_KINDS]
    gone = min(segments, key=lambda e: (_parsed(e.name).kind != ".log", e.name), default=None)
    if gone is not None:
        return f"{gone.name} says that the swap's step 2 had begun"
    for e in incomplete:
        base = _parsed(e.name).base_offset
        live = part.segment_for(base)
        if _parsed(e.name).kind != ".log" or not e.size or (live is not None and live.base_offset == base):
            continue  # an empty one (a segment rolled at the log end) holds nothing to lose
        try:
            last = None if live is None else live.last_offset()
        except KafkaLogError:
            last = None
        if last is None or last < base:
            return f"no live segment holds offset {base}, where {e.name} begins"
    return None


def _stray_cleaned(err: KafkaLogError, cleaned: list[FileEntry], why: str) -> KafkaLogError:
    """`err`, the failed check of a `.swap` past its step 1 (`why`), saying what Kafka would do."""
    lowest = min(cleaned, key=lambda e: _parsed(e.name).base_offset)
    refused = copy.copy(err)
    refused.message = (
        f"{err.message.split('; ')[0]}; Kafka would delete the .swap, taking {lowest.name} for an unfinished "
        f"step 1 of the swap, but {why}: the .swap may be the only copy of what it replaces, and it fails "
        f"kafkalog's checks, so it cannot be completed either; {LEFT}"
    )
    refused.args = (refused.message,)
    return refused


def _refuse_unfinished_own_swap(fs: LogFileSystem, intent: FileEntry | None, cleaned: list[FileEntry], why: str):
    """Refuse when kafkalog's own intent names one of the `.cleaned` files: its swap's step 1 had not
    ended, yet `why` says the swap had gone past it. Nothing then tells which files are the log."""
    staged, _ = _read_intent(fs, intent) or ({}, None)
    unrenamed = next((e for e in cleaned if e.name[: -len(".cleaned")] + ".swap" in staged), None)
    if unrenamed is not None:
        raise LogDirError(
            f"kafkalog's swap intent ({SWAP_INTENT}) says its step 1 had not renamed this file yet, but {why}: "
            f"which files are the log cannot be told; {LEFT}",
            file=unrenamed.path,
        )


def _read_intent(fs: LogFileSystem, intent: FileEntry | None) -> tuple[dict, frozenset[int]] | None:
    """(the `.swap` files it names -> their sizes, the base offsets they replace) of kafkalog's swap
    intent; None without one, or for one that cannot be read."""
    if intent is None:
        return None
    try:
        written = json.loads(fs.read_bytes(intent.path))
        staged, replaced = written["swaps"], frozenset(int(b) for b in written["replaced"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return (staged, replaced) if isinstance(staged, dict) else None


def _vouched(fs: LogFileSystem, intent: FileEntry | None, swaps: list[FileEntry]) -> frozenset[int] | None:
    """The base offsets of the segments kafkalog's own swap replaces when its intent names every one
    of `swaps`, of the size it had when staged; None otherwise (an intent that cannot be read, or
    swaps it does not name, vouches for nothing)."""
    written = _read_intent(fs, intent)
    if written is None:
        return None
    staged, replaced = written
    if any(staged.get(e.name) != e.size for e in swaps):
        return None
    # a `.swap` it names that is gone was renamed in step 3, after step 2 renamed every replaced
    # segment: a live file at a replaced base offset is then a new one
    return replaced if len(swaps) == len(staged) else frozenset()


class _Span(NamedTuple):
    """What a `.log` file holds: (position, last offset) of each whole batch, its first offset and
    its last (None: no batch)."""

    entry: FileEntry
    base: int
    batches: list[tuple[int, int]]
    first: int | None
    last: int | None

    @property
    def next_offset(self) -> int:
        """Kafka's readNextOffset: after the last batch, the base offset when there is none."""
        return self.base if self.last is None else self.last + 1

    def describe(self) -> str:
        if not self.batches:
            return f"{self.entry.name}, {self.entry.size} bytes, no batch"
        return f"{self.entry.name}, {len(self.batches)} batches, {_offsets(self.first, self.last)}"


def _read(fs: LogFileSystem, entry: FileEntry, offset_range: tuple[int, int] | None = None) -> _Span:
    """Every batch of the `.log` file `entry`. With `offset_range` ([low, high)) the file must read
    whole, as a `.swap` must: no torn tail, every CRC, every record, offsets in order and in the
    range; without it, as Kafka's readers read a live segment (bytes after the last whole batch
    ignored, records not decoded)."""
    strict = offset_range is not None
    reader = SegmentReader(
        fs, entry.path, entry.size, torn_tail_ok=not strict, offset_range=offset_range, headers_only=not strict
    )
    batches: list[tuple[int, int]] = []
    first = last = None
    for position, batch in reader:
        if strict:
            try:
                batch.verify()
                batch.records()  # every record decodes: what a rewrite of the swapped-in segment reads
            except KafkaLogError as err:
                raise locate(err, entry.path, position, batch) from None
        if first is None:
            first = batch_first_offset(batch)
            first = batch.last_offset if first is None else first
        batches.append((position, batch.last_offset))
        last = batch.last_offset if last is None else max(last, batch.last_offset)
    return _Span(entry, _parsed(entry.name).base_offset, batches, first, last)


class _SwapCheck:
    """The checks of the winning `.swap` files of one partition directory before any is renamed.

    Kafka's loader trusts a `.swap`: its cleaner writes one only after a flush. kafkalog reads each
    `.log.swap` whole, then checks that the swaps together cover every offset of the segments they
    replace (the live ones, and the `.deleted` ones of a swap past its step 2), that the segment
    before the lowest swap ends below it, and that each index `.swap` matches its `.log`."""

    def __init__(self, fs: LogFileSystem, partition_dir: str, listing: list[FileEntry], swaps: list[FileEntry]):
        self.fs, self.swaps = fs, swaps
        self.part = Partition.open(fs, partition_dir, listing)
        self.live = {s.base_offset: s for s in self.part.segments}
        self.deleted = {
            p.base_offset: e
            for e in listing
            if (p := parse_segment_file_name(e.name)) and p.kind == ".log" and p.state == ".deleted"
        }
        logs = (e for e in swaps if _parsed(e.name).kind == ".log")
        self.logs = sorted(logs, key=lambda e: _parsed(e.name).base_offset)

    def run(self, check_coverage: bool = True) -> tuple[int, int]:
        """[low, high): the offset range whose live segments the swaps replace (empty: none).
        Without `check_coverage` (swaps kafkalog's own swap made), they may end below what they replace."""
        spans = {}
        for i, e in enumerate(self.logs):
            base = _parsed(e.name).base_offset
            upper = _parsed(self.logs[i + 1].name).base_offset if i + 1 < len(self.logs) else base + INT32_MAX + 1
            try:
                spans[base] = _read(self.fs, e, (base, upper))
            except KafkaLogError as err:
                raise _explained(err, self._unreadable(err, base)) from None
        low = min(spans, default=0)
        high = max((s.next_offset for s in spans.values()), default=0)
        if spans:
            if check_coverage:
                self._check_coverage(spans, low, high)
            self._check_below(spans[low])
        for e in self.swaps:
            p = _parsed(e.name)
            if p.kind in (".index", ".timeindex", ".txnindex"):
                span = spans.get(p.base_offset)
                if span is None and p.base_offset in self.live:  # the `.log` of this swap is renamed already
                    span = _read(self.fs, self.live[p.base_offset].log)
                if span is not None:
                    _check_index(self.fs, e, span)
        return low, high

    def _originals(self, low: int, high: int, bases) -> list[FileEntry]:
        """The `.log` files, live or `.deleted`, of the segments a swap over [low, high) replaces:
        those whose base offset lies in the range, and those a swap's rename would overwrite."""
        live = [s.log for b, s in sorted(self.live.items()) if low <= b < high or b in bases]
        return live + [e for b, e in sorted(self.deleted.items()) if low <= b < high or b in bases]

    def _check_coverage(self, spans: dict[int, _Span], low: int, high: int) -> None:
        for entry in self._originals(low, high, spans):
            try:
                original = _read(self.fs, entry)
            except KafkaLogError as err:
                raise _explained(err, f"the .swap that replaces it cannot be checked against it; {LEFT}") from None
            if original.last is None or original.last < high:
                continue
            swap = spans[max(b for b in spans if b <= original.base)]
            holds = (
                f"a {swap.entry.size}-byte segment"
                if not swap.batches
                else f"a segment of {len(swap.batches)} batches, {_offsets(swap.first, swap.last)}"
            )
            lost = max(high, original.first if original.first is not None else high)
            raise LogDirError(
                f"Kafka would replace {original.describe()}, with {holds}: {_offsets(lost, original.last)} "
                f"would be lost; {LEFT} (where a compaction or purge removed those records, a broker started on "
                "the directory completes the swap)",
                file=swap.entry.path,
                position=swap.entry.size,
                offset=lost,
            )

    def _check_below(self, lowest: _Span) -> None:
        """The live segment below the lowest swap, which stays, must end below it."""
        below = [s for b, s in self.live.items() if b < lowest.base]
        if not below:
            return
        previous = max(below, key=lambda s: s.base_offset)
        last = previous.last_offset()
        if last is not None and last >= lowest.base:
            raise LogDirError(
                f"the .swap begins at offset {lowest.base}, but {previous.log.name}, which stays before it, "
                f"holds offsets up to {last}: Kafka would keep both, offsets {lowest.base}-{last} in two "
                f"segments; {LEFT}",
                file=lowest.entry.path,
                position=0,
                offset=lowest.base,
            )

    def _unreadable(self, err: KafkaLogError, base: int) -> str:
        """What completing a `.log.swap` at `base` that does not read whole (`err`) would do: with its
        originals live, a broker renames it over them; with them gone, the offsets from the damage
        to the end of the originals (or to the next live segment) are lost."""
        end = min((b for b in self.live if b > base), default=None)
        if base in self.live:
            original = self.live[base].log
            try:
                held = _read(self.fs, original).describe()
            except KafkaLogError:
                held = original.name
            return f"Kafka would replace {held}, with this .swap, which does not read whole; {LEFT}"
        originals = [e for b, e in sorted(self.deleted.items()) if base <= b and (end is None or b < end)]
        gone = f"only {', '.join(e.name for e in originals)} remain" if originals else "no file of them is left"
        lasts = []
        for e in originals:
            try:
                lasts.append(_read(self.fs, e).last)
            except KafkaLogError:
                continue
        last = max((x for x in lasts if x is not None), default=None if end is None else end - 1)
        start = base if err.offset is None else err.offset
        lost = _offsets(start, last) if last is not None else f"every offset from {start} on"
        return f"the segments it replaces are gone ({gone}): completing the swap, as Kafka would, loses {lost}; {LEFT}"


def _check_index(fs: LogFileSystem, entry: FileEntry, log: _Span) -> None:
    """An index `.swap` checked on its own (Kafka's sanity checks, and a length of whole entries)
    and against its `.log`: each offset-index entry points at the start of a batch after every batch
    whose offsets reach its own, and no entry of either index lies past the `.log`'s last offset."""
    p = _parsed(entry.name)
    data = fs.read_bytes(entry.path)
    try:
        if p.kind == ".txnindex":
            TransactionIndex.from_bytes(data, p.base_offset, file=entry.path).sanity_check()
            return
        index = (OffsetIndex if p.kind == ".index" else TimeIndex).from_bytes(data, p.base_offset, file=entry.path)
        index.sanity_check()
        starts = {position: i for i, (position, _) in enumerate(log.batches)}
        reached = list(itertools.accumulate((last for _, last in log.batches), max))
        for i, e in enumerate(index.entries):
            problem = None
            if log.last is None or e.offset > log.last:
                problem = f"lies past the last offset of {log.entry.name} ({log.last})"
            elif isinstance(e, OffsetPosition):
                j = starts.get(e.position)
                if j is None:
                    problem = f"does not point at the start of a batch of {log.entry.name}"
                elif j and reached[j - 1] >= e.offset:
                    problem = f"points after a batch of {log.entry.name} that holds offset {reached[j - 1]}"
            if problem:
                raise CorruptIndexError(
                    f"entry {i} {tuple(e)} {problem}", file=entry.path, position=i * index.ENTRY.size, offset=e.offset
                )
    except KafkaLogError as err:
        consequence = (
            "Kafka would rename it into place, find it corrupt and rebuild the segment's indexes"
            if p.kind == ".txnindex"
            else "Kafka would rename it into place and use it as it is: its loader checks no offset or time index"
        )
        raise _explained(err.located(offset=p.base_offset), f"{consequence}; {LEFT}") from None


def _offsets(first, last) -> str:
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def _explained(err: KafkaLogError, consequence: str) -> KafkaLogError:
    """`err` with what it means for the swap after its message."""
    explained = copy.copy(err)
    explained.message = f"{err.message}; {consequence}"
    explained.args = (explained.message,)
    return explained


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
