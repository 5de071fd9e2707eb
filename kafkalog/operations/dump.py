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

`dump_paths` yields the objects; `write_dump` writes them as JSON lines (what `kafkalog dump`
prints) without ever holding the whole base64 text of a large key or value: a record of N bytes
costs about 2N of memory (the batch as read, the record's value), not the 6N that building and
serialising its base64 string would.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Iterable, Iterator
from typing import NamedTuple, TextIO, overload

from ..codec.batch import RecordBatch
from ..codec.compression import Codec
from ..codec.control import ControlType, control_record
from ..codec.coordinator_records import (
    GROUP_RECORDS,
    SHARE_RECORDS,
    TRANSACTION_RECORDS,
    RecordFamily,
    decode_coordinator_record,
)
from ..codec.metadata_records import decode_kraft_control, decode_metadata_record
from ..codec.remote_log_metadata import decode_remote_log_metadata
from ..errors import KafkaLogError, LogDirError
from ..storage.checkpoint import parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_partition_metadata
from ..storage.fs import LogFileSystem
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


@overload
def b64(data: bytes) -> str: ...
@overload
def b64(data: None) -> None: ...
@overload
def b64(data: bytes | None) -> str | None: ...
def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


# Keys, values and header values of at least this many bytes become Base64Bytes when the objects are
# made for write_dump; they are written this many input bytes (a multiple of 3) at a time.
_LAZY_AT = 64 * 1024
_B64_PIECE = 3 << 18  # 768 KiB in, 1 MiB of base64 out


class Base64Bytes:
    """A bytes field that `write_dump` writes as a base64 JSON string piece by piece."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __str__(self) -> str:
        return b64(self.data)

    def __repr__(self) -> str:
        return f"Base64Bytes(<{len(self.data)} bytes>)"


def _lazy_b64(data: bytes | None):
    if data is not None and len(data) >= _LAZY_AT:
        return Base64Bytes(data)
    return b64(data)


def _string(data: bytes | None) -> str | None:
    # Kafka's StringDecoder: `new String(bytes, UTF_8)`, which replaces malformed input with U+FFFD
    return None if data is None else data.decode("utf-8", "replace")


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


class _NotJson(ValueError):
    pass


def _json(data: bytes | None):
    if data is None:
        return None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _NotJson(f"not JSON: {err}") from None


# The decoders of --key-decoder and --value-decoder: how a key's or value's bytes become its JSON
# value. "base64" is dump's default (any bytes, losslessly); "string" is kafka-dump-log's default.
BYTES_DECODERS = {"base64": b64, "string": _string, "hex": _hex, "json": _json}


def batch_json(batch, position: int) -> dict:
    """A batch's header as kafka-dump-log names its fields."""
    out = {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.records_count,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "position": position,
        "maxTimestamp": batch.max_timestamp,
        "timestampType": _timestamp_type_name(batch.timestamp_type),
        "size": batch.size,
        "magic": batch.magic,
        "compresscodec": Codec(batch.codec).name.lower()
        if batch.codec in Codec._value2member_map_
        else f"unknown({batch.codec})",
        "crc": batch.crc,
        "isvalid": batch.is_valid(),
    }
    return out


def _timestamp_type_name(ts_type: int) -> str:
    return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[ts_type]


def record_json(
    record, batch, decoder=None, encode=b64, skip_metadata: bool = False, key_encode=None, value_encode=None
) -> dict:
    """A record's fields; `encode` turns bytes into their JSON value (base64 text by default), and
    `key_encode` and `value_encode` (BYTES_DECODERS) the key and the value when given; a key or value
    they cannot decode stays base64, with the reason in "keyError" or "valueError". `decoder` (one
    of DECODERS) adds the decoded "payload"; `skip_metadata` (--skip-record-metadata) leaves out the
    timestamp, sizes and headers."""
    out: dict = {"offset": record.offset}
    if not skip_metadata:
        out["timestamp"] = record.timestamp
        out["keySize"] = -1 if record.key is None else len(record.key)
        out["valueSize"] = -1 if record.value is None else len(record.value)
    _put_bytes(out, "key", record.key, key_encode or encode)
    _put_bytes(out, "value", record.value, value_encode or encode)
    if not skip_metadata:
        out["headers"] = [{"key": k, "value": encode(v)} for k, v in record.headers]
    if decoder is not None and not batch.is_control:
        try:
            payload = decoder(record)
        except KafkaLogError as err:  # shown, as kafka-dump-log shows what it cannot parse
            payload = {"error": err.message}
        if payload is not None:
            out["payload"] = _plain(payload)
    return out


def _put_bytes(out: dict, field: str, data: bytes | None, encode) -> None:
    try:
        out[field] = encode(data)
    except _NotJson as err:  # shown, not fatal: one bad value must not end a dump
        out[field] = b64(data)
        out[field + "Error"] = str(err)


def control_json(ctl, skip_metadata: bool = False) -> dict:
    """A control record: its type, and its payload (a marker's version and coordinator epoch, a
    KRaft control record's fields)."""
    out: dict = {"offset": ctl.offset}
    if not skip_metadata:
        out["timestamp"] = ctl.timestamp
    out["controlType"] = ctl.type.name
    out["coordinatorEpoch"] = ctl.coordinator_epoch
    try:
        if ctl.type in (ControlType.ABORT, ControlType.COMMIT):
            out["payload"] = {"version": int.from_bytes(ctl.value[:2], "big", signed=True)}
        else:
            payload = decode_kraft_control(ctl.type, ctl.value)
            if payload is not None:
                out["payload"] = _plain(payload)
    except KafkaLogError as err:
        out["payload"] = {"error": err.message}
    return out


def _plain(value):
    """A decoded message JSON-ready: its bytes as base64 text."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return b64(bytes(value))
    return value


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
    encode = _lazy_b64 if lazy else b64
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


def dump_paths(
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
) -> Iterator[dict]:
    """Dump log directories, partition directories or files, in order. `decoders`: names of DECODERS
    (`offsets_decoder` is "offsets"; any implies `records`); `lazy`: see dump_batches;
    `skip_record_metadata` and `max_bytes`: kafka-dump-log's options of those names; `key_decoder`
    and `value_decoder`: names of BYTES_DECODERS (either, given, implies `records`, as in kafka-dump-log;
    base64 when not given)."""
    unknown = sorted(set(decoders) - DECODERS.keys())
    if unknown:
        raise ValueError(f"unknown decoder(s) {unknown}; expected some of {sorted(DECODERS)}")
    for name in (key_decoder, value_decoder):
        if name is not None and name not in BYTES_DECODERS:
            raise ValueError(f"unknown key or value decoder {name!r}; expected one of {sorted(BYTES_DECODERS)}")
    decoded = key_decoder is not None or value_decoder is not None
    chosen = frozenset(decoders) | ({"offsets"} if offsets_decoder else set())
    options = _Options(
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
    for path_or_uri in paths:
        fs, path = LogFileSystem.for_path(path_or_uri)
        info = fs.info(path)
        if info is None:
            raise LogDirError("no such file or directory", file=path)
        if info.is_dir:
            yield from _dump_dir(fs, path, options)
        else:
            yield from _dump_file(fs, info, options)


class _Options(NamedTuple):
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


def write_json_lines(objs: Iterable[dict], out: TextIO) -> None:
    """Each object as one line of compact JSON (`json.dumps(obj, separators=(",", ":"))`); a
    Base64Bytes anywhere in it is written as its base64 string, 1 MiB of text at a time."""
    for obj in objs:
        try:  # the C encoder for every object without a Base64Bytes
            line = json.dumps(obj, separators=_SEPARATORS, default=_no_lazy)
        except _Lazy:
            _write_json(out, obj)
            out.write("\n")
        else:
            out.write(line + "\n")


_SEPARATORS = (",", ":")


class _Lazy(Exception):
    pass


def _no_lazy(value):
    if isinstance(value, Base64Bytes):
        raise _Lazy
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _write_json(out: TextIO, value) -> None:
    if isinstance(value, Base64Bytes):
        out.write('"')
        view = memoryview(value.data)
        for i in range(0, len(view), _B64_PIECE):
            out.write(binascii.b2a_base64(view[i : i + _B64_PIECE], newline=False).decode("ascii"))
        out.write('"')
    elif isinstance(value, dict):
        out.write("{")
        for i, (k, v) in enumerate(value.items()):
            out.write(("," if i else "") + json.dumps(str(k)) + ":")
            _write_json(out, v)
        out.write("}")
    elif isinstance(value, (list, tuple)):
        out.write("[")
        for i, v in enumerate(value):
            if i:
                out.write(",")
            _write_json(out, v)
        out.write("]")
    else:
        out.write(json.dumps(value, separators=_SEPARATORS))


def _dump_dir(fs, path, options: _Options):
    if RemoteStorage.is_remote_storage(fs, path):
        for remote in RemoteStorage.at(fs, path).partitions():
            yield from _dump_remote_partition(remote, options)
        return
    if RemotePartition.is_remote_partition(fs, path):
        yield from _dump_remote_partition(RemotePartition.open(fs, path), options)
        return
    if parse_partition_dir_name(fs.name(path)) is not None:
        partition_paths = [path]
    else:
        partition_paths = [e.path for e, _ in DirListing.of(fs, path).partition_dirs]
    for ppath in partition_paths:
        part = Partition.open(fs, ppath)
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


def _dump_remote_partition(remote: RemotePartition, options: _Options):
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


def _dump_kraft_snapshot(fs, info, offset: int, epoch: int, options: _Options, decoder, context=None):
    """A KRaft snapshot: an object naming its id (as kafka-dump-log's "Snapshot end offset: N,
    epoch: E"), then its batches."""
    yield {"type": "snapshot", "file": info.path, **(context or {}), "endOffset": offset, "epoch": epoch}
    yield from options.batches(options.reader(fs, info), info.path, decoder, context)


def _dump_quorum_state(fs, path: str):
    yield {"type": "quorumState", "file": path, **read_quorum_state(fs.read_bytes(path), path)}


def _dump_file(fs, info, options: _Options):
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
