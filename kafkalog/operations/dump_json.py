"""The JSON of `kafkalog dump`: a batch, a record and a control record as kafka-dump-log names their
fields (bytes as base64, or as `--key-decoder`/`--value-decoder` show them), and the JSON lines
written without ever holding the whole base64 text of a large key or value (`Base64Bytes`,
`write_json_lines`): a record of N bytes costs about 2N of memory (the batch as read, the record's
value), not the 6N that building and serialising its base64 string would."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import TextIO, overload

from ..codec.compression import Codec
from ..codec.control import ControlType
from ..codec.metadata_records import decode_kraft_control
from ..errors import KafkaLogError


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


def lazy_b64(data: bytes | None):
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
