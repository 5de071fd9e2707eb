"""`kafkalog dump`: the JSON counterpart of kafka-dump-log.sh, one object per batch and per record.

Field names follow Kafka's (baseOffset, lastOffset, producerId, isTransactional, ...); bytes are
base64. Paths may be log directories, partition directories, single segment, index or snapshot
files, checkpoint files (offset checkpoints, leader-epoch-checkpoint, partition.metadata,
meta.properties: one object per entry), KRaft snapshots (`<offset>-<epoch>.checkpoint`),
`quorum-state`, or any file of record batches (its name not Kafka's: the offsets come from the
batches). Decoders (`DECODERS`, as kafka-dump-log's --offsets-decoder, --transaction-log-decoder,
--cluster-metadata-decoder and --share-group-state-decoder) add a record's decoded key and value as
its "payload"; in a log or partition directory each applies to its own topic, on a single file to
every record. Control records always show their payload (a marker's version and coordinator epoch,
KRaft's control records' fields).

`plan_dump(paths, **options)` finds the paths on the driver before anything is printed (every path
there, the options known, a log directory listed once), `run_dump(plan)` yields the objects,
`dump_paths` is the two in one call; `write_dump` writes them as JSON lines (what `kafkalog dump`
prints), large keys and values streamed (`dump_json`, where the objects' JSON is made).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TextIO

from ..codec.batch import RecordBatch
from ..codec.control import control_record
from ..codec.coordinator_records import (
    GROUP_RECORDS,
    SHARE_RECORDS,
    TRANSACTION_RECORDS,
    RecordFamily,
    decode_coordinator_record,
)
from ..codec.metadata_records import decode_metadata_record
from ..codec.remote_log_metadata import decode_remote_log_metadata
from ..errors import KafkaLogError
from ..storage.checkpoint import parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_partition_metadata
from ..storage.fs import FileEntry, LogFileSystem
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.kraft import read_quorum_state
from ..storage.logdir import DirListing
from ..storage.meta_properties import META_PROPERTIES, read_meta_properties
from ..storage.naming import (
    KRAFT_BOOTSTRAP_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA,
    QUORUM_STATE,
    parse_kraft_snapshot_name,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from ..storage.partition import Partition
from ..storage.remote_log import RemotePartition, RemoteStorage, remote_segment_file
from ..storage.segment import SegmentReader, locate
from ..storage.snapshot import ProducerSnapshot
from ..storage.txnindex import TransactionIndex
from ..topics import CONSUMER_OFFSETS_TOPIC, KRAFT_METADATA_TOPIC, REMOTE_LOG_METADATA_TOPIC
from .dump_json import BYTES_DECODERS, b64, batch_json, control_json, lazy_b64, record_json, write_json_lines
from .files import camel_keys


def _coordinator_decoder(family: RecordFamily):
    def decoder(record) -> dict | None:
        return None if record.key is None else decode_coordinator_record(family, record.key, record.value)

    return decoder


def _metadata_decoder(record) -> dict | None:
    return None if record.value is None else decode_metadata_record(record.value)


def _remote_log_metadata_decoder(record) -> dict | None:
    return decode_remote_log_metadata(record.value)


# kafka-dump-log's decoders: name (its option without "--" and "-decoder") -> (topic, record -> payload or None).
DECODERS = {
    "offsets": (CONSUMER_OFFSETS_TOPIC, _coordinator_decoder(GROUP_RECORDS)),
    "transaction-log": (TRANSACTION_RECORDS.topic, _coordinator_decoder(TRANSACTION_RECORDS)),
    "share-group-state": (SHARE_RECORDS.topic, _coordinator_decoder(SHARE_RECORDS)),
    "cluster-metadata": (KRAFT_METADATA_TOPIC, _metadata_decoder),
    "remote-log-metadata": (REMOTE_LOG_METADATA_TOPIC, _remote_log_metadata_decoder),
}


def dump_batches(
    reader: SegmentReader,
    path: str,
    *,
    records: bool = False,
    decoder=None,
    context: dict | None = None,
    lazy: bool = False,
    skip_record_metadata: bool = False,
    key_decoder: str = "base64",
    value_decoder: str = "base64",
) -> Iterator[dict]:
    """One object per batch (and per record with `records`) of `reader` (a segment, a snapshot, any
    file of batches), then one for a truncated tail. With `lazy`, large keys and values are
    Base64Bytes (for write_dump) instead of base64 text. `key_decoder` and `value_decoder` name
    BYTES_DECODERS."""
    encode = lazy_b64 if lazy else b64
    key_encode, value_encode = (None if n == "base64" else BYTES_DECODERS[n] for n in (key_decoder, value_decoder))
    base = {"file": path, **(context or {})}
    for position, batch in reader:
        yield {"type": "batch", **base, **batch_json(batch, position)}
        if not records:
            continue
        try:
            if batch.is_control and isinstance(batch, RecordBatch):
                ctl = control_record(batch)
                if ctl is not None:
                    yield {"type": "control", **base, **control_json(ctl, skip_record_metadata)}
                continue
            for record in batch.records():
                yield {
                    "type": "record",
                    **base,
                    **record_json(record, batch, decoder, encode, skip_record_metadata, key_encode, value_encode),
                }
        except KafkaLogError as err:
            raise locate(err, path, position, batch) from None
    if reader.truncated_tail is not None:
        tail = reader.truncated_tail
        yield {
            "type": "truncated",
            **base,
            "position": tail.position,
            "length": tail.length,
            "declaredSize": tail.declared_size,
        }


def dump_index_file(fs: LogFileSystem, path: str, kind: str, base_offset: int) -> Iterator[dict]:
    data = fs.read_bytes(path)
    if kind == ".index":
        for offset, position in OffsetIndex.from_bytes(data, base_offset, file=path).entries:
            yield {"type": "index", "file": path, "offset": offset, "position": position}
    elif kind == ".timeindex":
        for timestamp, offset in TimeIndex.from_bytes(data, base_offset, file=path).entries:
            yield {"type": "timeindex", "file": path, "timestamp": timestamp, "offset": offset}
    elif kind == ".txnindex":
        for txn in TransactionIndex.from_bytes(data, base_offset, file=path).entries:
            yield {
                "type": "abortedTxn",
                "file": path,
                "producerId": txn.producer_id,
                "firstOffset": txn.first_offset,
                "lastOffset": txn.last_offset,
                "lastStableOffset": txn.last_stable_offset,
            }
    elif kind == ".snapshot":
        for entry in ProducerSnapshot.from_bytes(data, base_offset, file=path).entries:
            yield {"type": "producerSnapshot", "file": path, **camel_keys(entry._asdict())}
    elif kind == ".leader_epoch_checkpoint":  # a remote segment's (tiered storage)
        yield from _leader_epochs(data, path)


def _leader_epochs(data: bytes, path: str) -> Iterator[dict]:
    for epoch in parse_leader_epoch_checkpoint(data.decode("utf-8", "replace"), file=path):
        yield {"type": "leaderEpoch", "file": path, "epoch": epoch.epoch, "startOffset": epoch.start_offset}


def _offset_checkpoint(data: bytes, path: str) -> Iterator[dict]:
    for (topic, partition), offset in parse_offset_checkpoint(data.decode("utf-8", "replace"), file=path).items():
        yield {"type": "offsetCheckpoint", "file": path, "topic": topic, "partition": partition, "offset": offset}


def _partition_metadata(data: bytes, path: str) -> Iterator[dict]:
    metadata = parse_partition_metadata(data.decode("utf-8", "replace"), file=path)
    yield {"type": "partitionMetadata", "file": path, "version": metadata.version, "topicId": metadata.topic_id}


def _meta_properties(data: bytes, path: str) -> Iterator[dict]:
    meta = read_meta_properties(data, file=path)
    yield {
        "type": "metaProperties",
        "file": path,
        "version": meta.version,
        "nodeId": meta.node_id,
        "clusterId": meta.cluster_id,
        "directoryId": meta.directory_id,
    }


# The text files of a log or partition directory that dump decodes, by name: file bytes -> objects.
TEXT_FILES = {
    **dict.fromkeys(OFFSET_CHECKPOINT_FILES, _offset_checkpoint),
    LEADER_EPOCH_CHECKPOINT: _leader_epochs,
    PARTITION_METADATA: _partition_metadata,
    META_PROPERTIES: _meta_properties,
}


# What a path given to dump is, as the plan finds it
FILE, PARTITIONS, REMOTE_STORAGE, REMOTE_PARTITION = "file", "partitions", "remote storage", "remote partition"


@dataclass(frozen=True)
class DumpTarget:
    """One path given to dump: a file, partition directories (a log directory's, listed once by the
    plan, or the one given), tiered storage's directory or one of its remote partitions."""

    fs: LogFileSystem
    path: str  # as given (its objects name the files under it so)
    info: FileEntry
    kind: str
    partition_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class DumpPlan:
    """A dump as asked for, found before anything is printed (`plan_dump`): every path there, each
    one's kind, the options known. Dump runs on the driver alone: it never starts Spark."""

    targets: tuple[DumpTarget, ...]
    options: DumpOptions


def plan_dump(
    paths: list[str],
    *,
    records: bool = False,
    offsets_decoder: bool = False,
    decoders: Collection[str] = (),
    txn_index: bool = False,
    snapshots: bool = False,
    lazy: bool = False,
    skip_record_metadata: bool = False,
    max_bytes: int | None = None,
    key_decoder: str | None = None,
    value_decoder: str | None = None,
) -> DumpPlan:
    """What `run_dump` dumps of log directories, partition directories or files, in order.
    `decoders`: names of DECODERS (`offsets_decoder` is "offsets"; any implies `records`); `lazy`: see
    dump_batches; `skip_record_metadata` and `max_bytes`: kafka-dump-log's options of those names;
    `key_decoder` and `value_decoder`: names of BYTES_DECODERS (either, given, implies `records`, as in
    kafka-dump-log; base64 when not given). Raises ValueError for an unknown decoder and LogDirError
    for a path that is not there, before anything is dumped; reads no segment."""
    unknown = sorted(set(decoders) - DECODERS.keys())
    if unknown:
        raise ValueError(f"unknown decoder(s) {unknown}; expected some of {sorted(DECODERS)}")
    for name in (key_decoder, value_decoder):
        if name is not None and name not in BYTES_DECODERS:
            raise ValueError(f"unknown key or value decoder {name!r}; expected one of {sorted(BYTES_DECODERS)}")
    decoded = key_decoder is not None or value_decoder is not None
    chosen = frozenset(decoders) | ({"offsets"} if offsets_decoder else set())
    options = DumpOptions(
        records or bool(chosen) or decoded,  # as in kafka-dump-log, a decoder prints the records
        chosen,
        txn_index,
        snapshots,
        lazy,
        skip_record_metadata,
        max_bytes,
        key_decoder or "base64",
        value_decoder or "base64",
    )
    return DumpPlan(tuple(_target(path) for path in paths), options)


def _target(path_or_uri: str) -> DumpTarget:
    fs, path, info = LogFileSystem.found(path_or_uri)
    if not info.is_dir:
        return DumpTarget(fs, path, info, FILE)
    if RemoteStorage.is_remote_storage(fs, path):
        return DumpTarget(fs, path, info, REMOTE_STORAGE)
    if RemotePartition.is_remote_partition(fs, path):
        return DumpTarget(fs, path, info, REMOTE_PARTITION)
    if parse_partition_dir_name(fs.name(path)) is not None:
        return DumpTarget(fs, path, info, PARTITIONS, (path,))
    return DumpTarget(fs, path, info, PARTITIONS, tuple(e.path for e, _ in DirListing.of(fs, path).partition_dirs))


def run_dump(plan: DumpPlan) -> Iterator[dict]:
    """The objects of the plan's paths, in order."""
    for target in plan.targets:
        fs, path = target.fs, target.path
        if target.kind == FILE:
            yield from _dump_file(fs, target.info, plan.options)
        elif target.kind == REMOTE_STORAGE:
            for remote in RemoteStorage.at(fs, path).partitions():
                yield from _dump_remote_partition(remote, plan.options)
        elif target.kind == REMOTE_PARTITION:
            yield from _dump_remote_partition(RemotePartition.open(fs, path), plan.options)
        else:
            for partition_path in target.partition_paths:
                yield from _dump_partition(fs, partition_path, plan.options)


def dump_paths(paths: list[str], **options) -> Iterator[dict]:
    """`run_dump(plan_dump(paths, **options))`: the objects of `paths` (plan_dump says what `options`
    do)."""
    return run_dump(plan_dump(paths, **options))


class DumpOptions(NamedTuple):
    records: bool
    decoders: frozenset
    txn_index: bool
    snapshots: bool
    lazy: bool
    skip_record_metadata: bool
    max_bytes: int | None
    key_decoder: str
    value_decoder: str

    def decoder_for(self, topic: str | None):
        """The decoder of `topic`'s records (None: a single file, where any chosen decoder applies)."""
        for name in sorted(self.decoders):
            decoder_topic, decoder = DECODERS[name]
            if topic is None or topic == decoder_topic:
                return decoder
        return None

    def batches(self, reader: SegmentReader, path: str, decoder, context: dict | None = None) -> Iterator[dict]:
        objs = dump_batches(
            reader,
            path,
            records=self.records,
            decoder=decoder,
            context=context,
            lazy=self.lazy,
            skip_record_metadata=self.skip_record_metadata,
            key_decoder=self.key_decoder,
            value_decoder=self.value_decoder,
        )
        if self.max_bytes is not None and reader.end == self.max_bytes:  # a batch cut by --max-bytes, not torn
            return (o for o in objs if o["type"] != "truncated")
        return objs

    def reader(self, fs: LogFileSystem, info) -> SegmentReader:
        end = info.size if self.max_bytes is None else min(self.max_bytes, info.size)
        return SegmentReader(fs, info.path, end)


def write_dump(paths: list[str], out: TextIO, **options) -> None:
    """`kafkalog dump`: dump_paths's objects (with dump_paths's `options`) written to `out`, one JSON
    object a line, each exactly `json.dumps(obj, separators=(",", ":"))`, but large keys and values
    written in pieces."""
    write_json_lines(dump_paths(paths, **options, lazy=True), out)


def _dump_partition(fs: LogFileSystem, path: str, options: DumpOptions) -> Iterator[dict]:
    part = Partition.open(fs, path)
    part.ensure_settled()
    context = {"topic": part.topic, "partition": part.partition}
    decoder = options.decoder_for(part.topic)
    for segment in part.segments:
        yield from options.batches(options.reader(fs, segment.log), segment.log_path, decoder, context)
        if options.txn_index and ".txnindex" in segment.files:
            yield from dump_index_file(fs, segment.files[".txnindex"].path, ".txnindex", segment.base_offset)
    if options.snapshots:
        for offset, entry in sorted(part.snapshots.items()):
            yield from dump_index_file(fs, entry.path, ".snapshot", offset)
    for (offset, epoch), entry in sorted(part.kraft_snapshots.items()):
        yield from _dump_kraft_snapshot(fs, entry, offset, epoch, options, decoder, context)
    if QUORUM_STATE in part.files:
        yield from _dump_quorum_state(fs, part.files[QUORUM_STATE].path)


def _dump_remote_partition(remote: RemotePartition, options: DumpOptions):
    """A remote partition of tiered storage (Kafka's LocalTieredStorage layout): its complete
    segments in offset order, each object naming the topic id and the remote segment id."""
    decoder = options.decoder_for(remote.topic)
    for segment in remote.segments:
        context = {
            "topic": remote.topic,
            "partition": remote.partition,
            "topicId": remote.topic_id,
            "remoteSegmentId": remote.segment_ids[segment.base_offset],
        }
        yield from options.batches(options.reader(remote.fs, segment.log), segment.log_path, decoder, context)
        if options.txn_index and ".txnindex" in segment.files:
            yield from dump_index_file(remote.fs, segment.files[".txnindex"].path, ".txnindex", segment.base_offset)


def _dump_kraft_snapshot(fs, info, offset: int, epoch: int, options: DumpOptions, decoder, context=None):
    """A KRaft snapshot: an object naming its id (as kafka-dump-log's "Snapshot end offset: N,
    epoch: E"), then its batches."""
    yield {"type": "snapshot", "file": info.path, **(context or {}), "endOffset": offset, "epoch": epoch}
    yield from options.batches(options.reader(fs, info), info.path, decoder, context)


def _dump_quorum_state(fs, path: str):
    yield {"type": "quorumState", "file": path, **read_quorum_state(fs.read_bytes(path), path)}


def _dump_file(fs, info, options: DumpOptions):
    decoder = options.decoder_for(None)
    snapshot_id = parse_kraft_snapshot_name(info.name)
    if snapshot_id is not None:
        yield from _dump_kraft_snapshot(fs, info, *snapshot_id, options, decoder)
        return
    if info.name == QUORUM_STATE:
        yield from _dump_quorum_state(fs, info.path)
        return
    if info.name in TEXT_FILES:
        yield from TEXT_FILES[info.name](fs.read_bytes(info.path), info.path)
        return
    if info.name == KRAFT_BOOTSTRAP_CHECKPOINT:  # kafka-dump-log: "KRaft bootstrap snapshot"
        yield {"type": "bootstrapSnapshot", "file": info.path}
        yield from options.batches(options.reader(fs, info), info.path, decoder)
        return
    name = parse_segment_file_name(info.name) or remote_segment_file(info.name)
    if name is not None and name.kind != ".log" and not name.state:
        yield from dump_index_file(fs, info.path, name.kind, name.base_offset)
        return
    if name is None or name.state:
        # not a Kafka segment name (a captured fetch response, a file kept under another name):
        # read as a file of batches, the offsets theirs
        yield {
            "type": "file",
            "file": info.path,
            "note": "not a Kafka segment file name: read as record batches, offsets from the batches",
        }
    yield from options.batches(options.reader(fs, info), info.path, decoder)
