"""`kafkalog validate`'s walk of one segment: every batch of the `.log`, streamed in chunks through
`LogSegment.reader()`, checked on its own (CRC, header, records, control record), against the
offsets before it (order, the segment's base offset and range), against the segment's index files
(fed batch by batch to the checks of `validate_index`) and against the partition's replay of
producer state, snapshots and leader epochs (`validate_replay`).

A walk that stops before the end of the file reports why: zero bytes to the end (a preallocated
segment never trimmed), a torn last batch, or bytes that are not a batch at all. Anywhere but in
the last segment, Kafka's recovery truncates there and deletes every later segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import tuning
from ..codec.batch import INT32_MAX, RecordBatch
from ..codec.control import ControlType, control_record
from ..codec.legacy import LegacyBatch
from ..errors import CrcMismatchError, KafkaLogError, LogDirError
from ..storage.index import DEFAULT_INDEX_INTERVAL_BYTES, BatchSummary, IndexBuilder
from ..storage.naming import is_kraft_metadata, partition_of_file
from ..storage.segment import LogSegment, locate
from .validate_index import (
    OffsetIndexCheck,
    TimeIndexCheck,
    TxnIndexCheck,
    load_index,
    load_txn_index,
    mismatch_message,
)
from .validate_replay import ReplayState, compare_snapshots
from .validate_report import ERROR, INFO, WARNING, Findings

# byte positions of v2 header fields in a batch
_LAST_OFFSET_DELTA_AT = 23
_RECORDS_COUNT_AT = 57


@dataclass
class SegmentPlan:
    """How one segment is to be checked."""

    segment: LogSegment
    base: int | None  # None: a file whose name gives no base offset
    next_base: int | None
    is_last: bool
    standalone: bool  # a file given alone, not inside a partition being validated
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES


class SegmentChecks:
    """The checks of one segment at a time. `deep` decodes every record; `chunk_size` is how much of
    a `.log` is read at once."""

    def __init__(self, findings: Findings, *, deep: bool, chunk_size: int | None = None):
        self.findings = findings
        self.deep = deep
        self.chunk_size = tuning.READ_CHUNK_BYTES if chunk_size is None else chunk_size

    def check(self, plan: SegmentPlan, state: ReplayState, exact_txn: bool) -> int | None:
        """Check one segment and its index files; returns the log end offset after it. `exact_txn`:
        the transaction index must be what a replay of producer state computes (not compacted)."""
        return _SegmentWalk(self, plan, state, exact_txn).run()


class _SegmentWalk:
    """One segment's walk: the index checks fed as it goes, and what it has seen so far."""

    def __init__(self, checks: SegmentChecks, plan: SegmentPlan, state: ReplayState, exact_txn: bool):
        self.checks, self.findings, self.plan, self.state = checks, checks.findings, plan, state
        seg, base = plan.segment, plan.base
        self.seg, self.base, self.path = seg, base, seg.log_path
        self.findings.counts["segments"] += 1
        self.findings.counts["log_bytes"] += seg.size
        self.oidx = load_index(self.findings, seg, base, plan.standalone, ".index", plan.is_last)
        self.tidx = load_index(self.findings, seg, base, plan.standalone, ".timeindex", plan.is_last)
        txn = load_txn_index(self.findings, seg, base)
        self.ocheck = OffsetIndexCheck(self.findings, self.oidx) if self.oidx is not None else None
        self.tcheck = TimeIndexCheck(self.findings, self.tidx) if self.tidx is not None else None
        exact = exact_txn and not plan.standalone
        self.xcheck = (
            TxnIndexCheck(self.findings, txn, seg.path(".txnindex"), exact, state.complete)
            if txn is not None or exact
            else None
        )
        self.builder = IndexBuilder(base, plan.index_interval_bytes, self.path) if base is not None else None
        self.seg_last: int | None = None  # the highest last offset in this segment
        self.max_ts = -1
        self.first = True
        self.walk_end = 0  # where the last whole batch read ends

    def run(self) -> int | None:
        reader = self.seg.reader(chunk_size=self.checks.chunk_size)
        try:
            for pos, batch in reader:
                self._batch(pos, batch)
        except LogDirError as err:  # the file itself cannot be read (not a regular file): not a batch's fault
            self.findings.add_error("io.read", ERROR, err, self.path)
        except KafkaLogError as err:
            self._walk_stopped(err.located(file=self.path))
        self._truncated_tail(reader.truncated_tail)
        self._finish_indexes()
        last = self.state.last_offset
        if self.seg_last is None:  # an empty segment: the log ends at its base offset
            return self.seg.base_offset if last is None else max(self.seg.base_offset, last + 1)
        assert last is not None  # _batch sets it with seg_last
        return last + 1

    # -- one batch, in the order its findings are reported ------------------------------------------------
    def _batch(self, pos: int, batch) -> None:
        self.findings.counts["batches"] += 1
        is_v2 = isinstance(batch, RecordBatch)
        self._check_crc(pos, batch)
        last = batch.last_offset
        first_offset, decoded = self._first_offset(batch, pos)
        self.walk_end = pos + batch.size
        if is_v2:
            self._check_v2_header(batch, pos)
        self._check_offsets(pos, first_offset, last)
        self._feed_indexes(pos, batch, first_offset, last)
        if self.checks.deep and decoded:
            self._check_records(batch, pos, first_offset, last)
        ctl = self._control_record(batch, pos) if is_v2 and batch.is_control else None
        if ctl is not None and not batch.is_transactional:
            self._check_control_flags(batch, pos, ctl)
        self._replay(pos, batch, first_offset, last, ctl)
        self.state.last_offset = last if self.state.last_offset is None else max(self.state.last_offset, last)
        self.state.last_file = self.path
        self.first = False

    def _check_crc(self, pos: int, batch) -> None:
        """Kafka's ensureValid."""
        try:
            batch.verify()
        except CrcMismatchError as err:
            plan = self.plan
            self.findings.add_error(
                "batch.crc",
                ERROR,
                locate(err, self.path, pos, batch),
                prefix=""
                if plan.standalone
                else (
                    "Kafka's recovery would truncate the segment here"
                    + ("" if plan.is_last else " and delete every later segment")
                    + ": "
                ),
            )

    def _first_offset(self, batch, pos: int) -> tuple[int, bool]:
        """The batch's first offset, and False when a legacy wrapper does not decode (reported here)."""
        if isinstance(batch, LegacyBatch):
            try:
                return batch.base_offset, True  # decodes a compressed wrapper (cached for records())
            except KafkaLogError as err:
                self.findings.add_error(
                    "batch.records",
                    ERROR,
                    locate(err, self.path, pos, batch),
                    prefix="compressed wrapper does not decode: ",
                )
                return batch.last_offset, False
        return batch.base_offset, True

    def _check_v2_header(self, batch: RecordBatch, pos: int) -> None:
        add, path = self.findings.add, self.path
        if batch.last_offset_delta < 0:
            add(
                "batch.header",
                ERROR,
                f"lastOffsetDelta {batch.last_offset_delta} is negative",
                path,
                pos + _LAST_OFFSET_DELTA_AT,
                batch.base_offset,
            )
        if batch.records_count < 0:
            add(
                "batch.header",
                ERROR,
                f"recordsCount {batch.records_count} is negative",
                path,
                pos + _RECORDS_COUNT_AT,
                batch.base_offset,
            )
        elif batch.last_offset_delta >= 0 and batch.records_count > batch.last_offset_delta + 1:
            add(
                "batch.header",
                ERROR,
                f"recordsCount {batch.records_count} does not fit the offset range "
                f"[{batch.base_offset}, {batch.last_offset}]",
                path,
                pos + _RECORDS_COUNT_AT,
                batch.base_offset,
            )

    def _check_offsets(self, pos: int, first_offset: int, last: int) -> None:
        add, path, base, state = self.findings.add, self.path, self.base, self.state
        if state.last_offset is not None and first_offset <= state.last_offset:
            where = "in this segment" if state.last_file == path else f"in {state.last_file}"
            add(
                "offsets.order",
                ERROR,
                f"batch [{first_offset}, {last}] does not start above the last "
                f"offset {state.last_offset} of an earlier batch {where}",
                path,
                pos,
                first_offset,
            )
        if base is not None:
            if self.first and first_offset < base:
                add(
                    "offsets.segment_base",
                    ERROR,
                    f"the first batch starts at offset {first_offset}, below the segment's base offset {base}",
                    path,
                    pos,
                    first_offset,
                )
            if not 0 <= last - base <= INT32_MAX:
                add(
                    "offsets.overflow",
                    ERROR,
                    f"last offset {last} minus the segment base {base} is "
                    "outside [0, 2^31-1]: Kafka cannot index it (LogSegmentOffsetOverflow)",
                    path,
                    pos,
                    last,
                )
        next_base = self.plan.next_base
        if next_base is not None and last >= next_base:
            add(
                "offsets.next_segment",
                ERROR,
                f"last offset {last} reaches the next segment's base offset {next_base}",
                path,
                pos,
                last,
            )

    def _feed_indexes(self, pos: int, batch, first_offset: int, last: int) -> None:
        """The streaming index checks and the index builder; then the segment's last offset and max timestamp."""
        batch_max_ts = batch.max_timestamp
        if self.ocheck is not None:
            self.ocheck.on_batch(pos, self.seg_last)
        if self.tcheck is not None:
            self.tcheck.on_batch(first_offset, last, self.max_ts, max(self.max_ts, batch_max_ts))
        if self.builder is not None:
            try:
                self.builder.append(BatchSummary(pos, batch.size, last, batch_max_ts))
            except (KafkaLogError, ValueError):
                self.builder = None  # the offset checks above name the cause
        self.seg_last = last if self.seg_last is None else max(self.seg_last, last)
        self.max_ts = max(self.max_ts, batch_max_ts)

    def _check_records(self, batch, pos: int, first_offset: int, last: int) -> None:
        try:
            records = batch.records()
        except KafkaLogError as err:
            self.findings.add_error(
                "batch.records", ERROR, locate(err, self.path, pos, batch), prefix="records do not decode: "
            )
            return
        self.findings.counts["records"] += len(records)
        previous = None
        for record in records:
            if (previous is not None and record.offset <= previous) or not first_offset <= record.offset <= last:
                self.findings.add(
                    "batch.records",
                    ERROR,
                    f"record offset {record.offset} is not strictly "
                    f"increasing inside the batch's range [{first_offset}, {last}]",
                    self.path,
                    pos,
                    record.offset,
                )
                return
            previous = record.offset

    def _control_record(self, batch: RecordBatch, pos: int):
        """The control batch's marker, None when it does not parse (reported here)."""
        try:
            return control_record(batch)
        except KafkaLogError as err:
            self.findings.add_error(
                "batch.control", ERROR, locate(err, self.path, pos, batch), prefix="control record does not parse: "
            )
            return None

    def _check_control_flags(self, batch: RecordBatch, pos: int, ctl) -> None:
        """A control batch without the transactional flag: Kafka writes those only in KRaft's
        `__cluster_metadata` (its LogValidator refuses every control batch from a client, and the
        transaction coordinator's markers are transactional). What Kafka's cleaner does with one
        (CleanedTransactionMetadata.onControlBatchRead, which kafkalog's compaction follows): it
        reads the first record's type whatever the flag says, so a COMMIT or ABORT is taken as a
        marker of the batch's producer id, and any other type is kept as it is."""
        parent = partition_of_file(self.path)
        topic = self.seg.topic or (parent.topic if parent is not None else None)
        if topic is None or is_kraft_metadata(topic):  # KRaft's control records are not transactional
            return
        if ctl.type in (ControlType.ABORT, ControlType.COMMIT):
            fate = f"as producer {batch.producer_id}'s {ctl.type.name} marker (removed once it ends no transaction)"
        else:
            fate = "as a control batch of its type, kept in every pass"
        self.findings.add(
            "batch.control_flags",
            ERROR,
            f"a control batch ({ctl.type.name}) without the transactional flag: outside __cluster_metadata "
            f"Kafka writes control batches only as transaction markers; its cleaner treats this one {fate}, "
            "and so does kafkalog compact",
            self.path,
            pos,
            batch.base_offset,
        )

    def _replay(self, pos: int, batch, first_offset: int, last: int, ctl) -> None:
        """Producer state, snapshots reached, leader epochs, and the transaction index at a marker."""
        state = self.state
        compare_snapshots(self.findings, state, first_offset, self.checks.deep)
        state.check_epoch(batch, pos, self.path)
        is_v2 = isinstance(batch, RecordBatch)
        has_pid = is_v2 and batch.has_producer_id
        if has_pid:
            state.seen_pids.add(batch.producer_id)
            if state.compacted:
                state.before_batch(batch.producer_id)
        completed, replayed = None, False
        if not (is_v2 and batch.is_control and ctl is None and batch.records_count != 0):
            try:
                completed, replayed = state.manager.append(batch), True
            except KafkaLogError:
                completed = None  # reported by batch.control / batch.records
        else:
            state.manager.map_end_offset = last + 1
        if has_pid and state.compacted:
            state.after_batch(batch.producer_id, last)
        if self.xcheck is not None and ctl is not None and ctl.type in (ControlType.ABORT, ControlType.COMMIT):
            expected = None
            if completed is not None and completed.is_aborted:
                expected = state.manager.aborted_txn(completed)
            # a marker the replay applied without completing a transaction: it had no data
            self.xcheck.on_marker(ctl, batch.producer_id, expected, replayed and completed is None, pos, self.path)

    # -- the end of the segment ---------------------------------------------------------------------------
    def _walk_stopped(self, err: KafkaLogError) -> None:
        """The batch walk could not go on: a zero tail, or bytes that are not a batch."""
        seg, start, plan = self.seg, self.walk_end, self.plan
        if self._zero_tail():
            return
        self.findings.add(
            "batch.structure",
            ERROR,
            f"{err.message}; the {seg.size - start} bytes from byte {start} on cannot be read and "
            f"Kafka's recovery truncates them"
            f"{'' if plan.is_last else ' and deletes every later segment'}",
            err.file,
            err.position,
            err.offset,
        )

    def _zero_tail(self) -> bool:
        """A walk that stopped at zero bytes running to the end of the file: a preallocated, untrimmed
        segment. Reported as such (and read in chunks, so a 1 GiB preallocation costs nothing)."""
        seg, start = self.seg, self.walk_end
        if start >= seg.size:
            return False
        with seg.fs.open_input(seg.log_path) as f:
            pos = start
            while pos < seg.size:
                chunk = f.read_at(min(self.checks.chunk_size, seg.size - pos), pos)
                if not chunk or chunk.count(0) != len(chunk):
                    return False
                pos += len(chunk)
        self.findings.add(
            "segment.zero_tail",
            WARNING if self.plan.is_last else ERROR,
            f"{seg.size - start} zero bytes after the last batch: a preallocated segment that was "
            "never trimmed (Kafka reads them as a corrupt batch; recovery truncates them)",
            seg.log_path,
            start,
            None,
        )
        return True

    def _truncated_tail(self, tail) -> None:
        """Bytes after the last whole batch, as the reader found them (None: none)."""
        if tail is None:
            return
        declared = f", the batch there declares {tail.declared_size} bytes" if tail.declared_size is not None else ""
        is_last = self.plan.is_last
        consequence = (
            "Kafka's readers ignore them and recovery truncates them"
            if is_last
            else "recovery truncates them and deletes every later segment"
        )
        last = self.state.last_offset
        self.findings.add(
            "segment.truncated_tail",
            WARNING if is_last else ERROR,
            f"{tail.length} bytes after the last whole batch{declared}; {consequence}",
            self.path,
            tail.position,
            last + 1 if last is not None else None,
        )

    def _finish_indexes(self) -> None:
        """What needs the whole segment: entries past its end, the final time-index entry, the
        comparison with the indexes recovery builds, transaction-index entries without a marker."""
        active = self.plan.is_last
        if self.ocheck is not None:
            self.ocheck.finish(self.walk_end, self.seg_last)
        if self.tcheck is not None:
            self.tcheck.finish(self.seg_last, self.max_ts, final=not active)
        if self.builder is not None:
            self._compare_with_rebuilt(self.builder, active)
        if self.xcheck is not None:
            self.xcheck.finish()

    def _compare_with_rebuilt(self, builder: IndexBuilder, active: bool) -> None:
        """`index.mismatch` / `timeindex.mismatch`: lookup-consistent indexes that differ from what
        recovery builds. An active segment's time index may lack only the final entry."""
        oidx, tidx, interval = self.oidx, self.tidx, self.plan.index_interval_bytes
        pre_final = list(builder.time_index.entries)
        built_offsets, built_times = builder.finish()
        if self.ocheck is not None and self.ocheck.consistent and oidx.entries != built_offsets.entries:
            self.findings.add(
                "index.mismatch",
                INFO,
                mismatch_message("offset index", oidx.entries, built_offsets.entries, interval),
                oidx.file,
            )
        if (
            self.tcheck is not None
            and self.tcheck.consistent
            and tidx.entries != built_times.entries
            and not (active and tidx.entries == pre_final)
        ):
            self.findings.add(
                "timeindex.mismatch",
                INFO,
                mismatch_message("time index", tidx.entries, built_times.entries, interval),
                tidx.file,
            )
