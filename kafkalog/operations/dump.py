"""`kafkalog dump`: the JSON counterpart of kafka-dump-log.sh, one object per batch and per record.

Field names follow Kafka's (baseOffset, lastOffset, producerId, isTransactional, ...); bytes are
base64. Paths may be log directories, partition directories or single segment files.

`dump_paths` yields the objects; `write_dump` writes them as JSON lines (what `kafkalog dump`
prints) without ever holding the whole base64 text of a large key or value: a record of N bytes
costs about 2N of memory (the batch as read, the record's value), not the 6N that building and
serialising its base64 string would.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from collections.abc import Iterable, Iterator
from typing import TextIO, overload

from ..codec.batch import RecordBatch
from ..codec.compression import Codec
from ..codec.consumer_offsets import decode_record as decode_coordinator_record
from ..codec.control import control_record
from ..errors import KafkaLogError, LogDirError
from ..storage.fs import LogFileSystem
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.naming import parse_partition_dir_name, parse_segment_file_name
from ..storage.partition import Partition
from ..storage.segment import LogSegment, locate
from ..storage.snapshot import ProducerSnapshot
from ..storage.txnindex import TransactionIndex

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


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


def record_json(record, batch, offsets_decoder: bool, encode=b64) -> dict:
    """A record's fields; `encode` turns bytes into their JSON value (base64 text by default)."""
    out = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "keySize": -1 if record.key is None else len(record.key),
        "valueSize": -1 if record.value is None else len(record.value),
        "key": encode(record.key),
        "value": encode(record.value),
        "headers": [{"key": k, "value": encode(v)} for k, v in record.headers],
    }
    if offsets_decoder and not batch.is_control and record.key is not None:
        out["payload"] = _coordinator_json(record.key, record.value)
    return out


def _coordinator_json(key: bytes, value: bytes | None) -> dict:
    try:
        decoded = decode_coordinator_record(key, value)
    except KafkaLogError as err:
        return {"error": err.message}
    return _plain(decoded._asdict())


def _plain(value):
    """NamedTuples and bytes as JSON-ready values."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return b64(bytes(value))
    if hasattr(value, "name") and hasattr(value, "value"):  # enums
        return value.name
    return value


def dump_segment(
    segment: LogSegment,
    *,
    records: bool = False,
    offsets_decoder: bool = False,
    context: dict | None = None,
    lazy: bool = False,
) -> Iterator[dict]:
    """One object per batch (and per record with `records`), then one for a truncated tail. With
    `lazy`, large keys and values are Base64Bytes (for write_dump) instead of base64 text."""
    encode = _lazy_b64 if lazy else b64
    reader = segment.reader()
    base = {"file": segment.log_path, **(context or {})}
    for position, batch in reader:
        yield {"type": "batch", **base, **batch_json(batch, position)}
        if not records:
            continue
        try:
            if batch.is_control and isinstance(batch, RecordBatch):
                ctl = control_record(batch)
                if ctl is not None:
                    yield {
                        "type": "control",
                        **base,
                        "offset": ctl.offset,
                        "timestamp": ctl.timestamp,
                        "controlType": ctl.type.name,
                        "coordinatorEpoch": ctl.coordinator_epoch,
                    }
                continue
            for record in batch.records():
                yield {"type": "record", **base, **record_json(record, batch, offsets_decoder, encode)}
        except KafkaLogError as err:
            raise locate(err, segment.log_path, position, batch) from None
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
            yield {"type": "producerSnapshot", "file": path, **_camel(entry._asdict())}


def _camel(fields: dict) -> dict:
    return {_camel_name(k): v for k, v in fields.items()}


def _camel_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def dump_paths(
    paths: list[str],
    *,
    records: bool = False,
    offsets_decoder: bool = False,
    txn_index: bool = False,
    snapshots: bool = False,
    lazy: bool = False,
) -> Iterator[dict]:
    """Dump log directories, partition directories or segment files, in order. `lazy`: see dump_segment."""
    for path_or_uri in paths:
        fs, path = LogFileSystem.for_path(path_or_uri)
        info = fs.info(path)
        if info is None:
            raise LogDirError("no such file or directory", file=path)
        if info.is_dir:
            yield from _dump_dir(fs, path, records, offsets_decoder, txn_index, snapshots, lazy)
        else:
            yield from _dump_file(fs, info, records, offsets_decoder, lazy)


def write_dump(
    paths: list[str],
    out: TextIO,
    *,
    records: bool = False,
    offsets_decoder: bool = False,
    txn_index: bool = False,
    snapshots: bool = False,
) -> None:
    """`kafkalog dump`: dump_paths's objects written to `out`, one JSON object a line, each exactly
    `json.dumps(obj, separators=(",", ":"))`, but large keys and values written in pieces."""
    write_json_lines(
        dump_paths(
            paths, records=records, offsets_decoder=offsets_decoder, txn_index=txn_index, snapshots=snapshots, lazy=True
        ),
        out,
    )


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


def _dump_dir(fs, path, records, offsets_decoder, txn_index, snapshots, lazy=False):
    if parse_partition_dir_name(fs.name(path)) is not None:
        partition_paths = [path]
    else:
        partition_paths = [e.path for e in fs.list_dir(path) if e.is_dir and parse_partition_dir_name(e.name)]
    for ppath in partition_paths:
        part = Partition.open(fs, ppath)
        part.ensure_settled()
        context = {"topic": part.topic, "partition": part.partition}
        decode = offsets_decoder and part.topic == CONSUMER_OFFSETS_TOPIC
        for segment in part.segments:
            yield from dump_segment(segment, records=records, offsets_decoder=decode, context=context, lazy=lazy)
            if txn_index and ".txnindex" in segment.files:
                yield from dump_index_file(fs, segment.files[".txnindex"].path, ".txnindex", segment.base_offset)
        if snapshots:
            for offset, entry in sorted(part.snapshots.items()):
                yield from dump_index_file(fs, entry.path, ".snapshot", offset)


def _dump_file(fs, info, records, offsets_decoder, lazy=False):
    name = parse_segment_file_name(info.name)
    if name is None or name.state:
        raise LogDirError("not a segment, index or snapshot file name", file=info.path)
    if name.kind != ".log":
        yield from dump_index_file(fs, info.path, name.kind, name.base_offset)
        return
    segment = LogSegment(fs, posixpath.dirname(info.path), name.base_offset, {".log": info})
    yield from dump_segment(segment, records=records, offsets_decoder=offsets_decoder, lazy=lazy)
