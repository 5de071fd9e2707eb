"""Kafka's message-schema wire format: what the generated `*Record`, `*Key` and `*Value` classes read (sans-IO).

A schema is a list of fields, each valid in a range of versions. Its wire form, field after field:
int8..int64, uint16, uint32 and float64 big-endian; bool one byte; uuid 16 bytes; string an int16
length (-1: null) then UTF-8; bytes an int32 length (-1: null); array an int32 count (-1: null)
then the elements; a struct its fields in order (a nullable struct behind an int8: -1 null, 1
present; in a tagged field an unsigned varint, 0 null). In a *flexible* version, strings, bytes
and arrays are compact (an unsigned varint of length + 1, 0: null), and every struct, the message
included, ends with a tagged-field section: an unsigned varint count, then per field its tag, its
size and its bytes. A field with a tag lives only in that section; an absent tagged field has its
default value, and is left out of the result here, as Kafka's JSON converters leave out a tagged
field that holds its default.

Schemas are written in a compact notation (`parse_schemas`), one field a line, nested fields indented
by two spaces under their struct:

    Name VERSIONS [flexVERSIONS]
      fieldName TYPE [VERSIONS] [nullVERSIONS] [tagN[@VERSIONS]]

TYPE is a primitive, `{}` for a struct whose fields follow, or either behind `[]` for an array;
VERSIONS is `N`, `N-M` or `N+`; a field's versions default to all, its tagged versions to its versions.

`decode` returns a dict of the fields present in the given version, under Kafka's JSON names; a uuid
is shown as Kafka's `Uuid.toString` shows it (URL-safe base64 without padding), bytes stay bytes.
`encode` writes such a dict back in the wire form.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple, overload

from ..errors import CorruptBatchError, TruncatedDataError
from .varint import write_uvarint

__all__ = ["Reader", "Field", "Schema", "parse_schemas", "decode", "read_message", "encode", "read_frame", "uuid_text"]

_I8 = struct.Struct(">b")
_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


def uuid_text(raw: bytes) -> str:
    """A uuid as Kafka's `Uuid.toString` writes it."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _fixed(codec: struct.Struct, expected: str) -> Callable[[Reader, str], Any]:
    """A Reader method reading one value of `codec`: the reads a decode makes most, each one call."""
    size, unpack = codec.size, codec.unpack_from

    def read(self: Reader, field: str):
        pos = self.pos
        try:
            (value,) = unpack(self.buf, pos)
        except struct.error:  # the bytes end early: looked at only then, as most reads succeed
            raise self._fail_truncated(field, expected, size) from None
        self.pos = pos + size
        return value

    return read


_ReadInt = Callable[["Reader", str], int]


class Reader:
    """Reads Kafka protocol primitives from `buf`, raising KafkaLogError subclasses, never struct.error.

    `what` names the structure in every message (e.g. "offset commit value v3"); positions are byte
    positions inside `buf`."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf, what: str, pos: int = 0):
        self.buf = buf
        self.pos = pos
        self.what = what

    def _fail_truncated(self, field: str, expected: str, need: int) -> TruncatedDataError:
        remain = len(self.buf) - self.pos
        return TruncatedDataError(
            f"{self.what}: {field}: expected {expected} ({need} bytes) but only {remain} remain", position=self.pos
        )

    int8: ClassVar[_ReadInt] = _fixed(_I8, "an int8")
    int16: ClassVar[_ReadInt] = _fixed(_I16, "an int16")
    uint16: ClassVar[_ReadInt] = _fixed(_U16, "a uint16")
    int32: ClassVar[_ReadInt] = _fixed(_I32, "an int32")
    uint32: ClassVar[_ReadInt] = _fixed(_U32, "a uint32")
    int64: ClassVar[_ReadInt] = _fixed(_I64, "an int64")
    float64: ClassVar[Callable[[Reader, str], float]] = _fixed(_F64, "a float64")
    _uint8: ClassVar[_ReadInt] = _fixed(_U8, "a bool")

    def boolean(self, field: str) -> bool:
        return self._uint8(field) != 0

    def uuid(self, field: str) -> str:
        return uuid_text(self._take(16, field, "a uuid", self.pos))

    def uvarint(self, field: str) -> int:
        """An unsigned varint of at most 5 bytes whose value fits an int32, as ByteUtils reads it."""
        start = self.pos
        value = 0
        for i in range(5):
            if self.pos >= len(self.buf):
                raise TruncatedDataError(
                    f"{self.what}: {field}: expected an unsigned varint but the data ends", position=start
                )
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                if value > 0x7FFFFFFF:
                    break
                return value
        raise CorruptBatchError(
            f"{self.what}: {field} is not a valid unsigned varint (expected at most 5 bytes and a value below 2^31)",
            position=start,
        )

    def _fail_declared(self, n: int, field: str, expected: str, at: int) -> TruncatedDataError:
        return TruncatedDataError(
            f"{self.what}: {field} declares {n} bytes; expected {expected} of that size but only "
            f"{len(self.buf) - self.pos} remain",
            position=at,
        )

    def _take(self, n: int, field: str, expected: str, at: int) -> bytes:
        start = self.pos
        if n > len(self.buf) - start:
            raise self._fail_declared(n, field, expected, at)
        self.pos = start + n
        return bytes(self.buf[start : start + n])

    def _length(self, field: str, flexible: bool, wide: bool) -> tuple[int, int]:
        """(length or -1 for null, position of the length): int16/int32 or compact (uvarint N+1)."""
        at = self.pos
        if flexible:
            return self.uvarint(f"{field} length") - 1, at
        codec = _I32 if wide else _I16
        try:
            (n,) = codec.unpack_from(self.buf, at)
        except struct.error:
            raise self._fail_truncated(f"{field} length", "an int32" if wide else "an int16", codec.size) from None
        self.pos = at + codec.size
        return n, at

    @overload
    def string(self, field: str, flexible: bool, nullable: Literal[False] = False) -> str: ...

    @overload
    def string(self, field: str, flexible: bool, nullable: bool) -> str | None: ...

    def string(self, field: str, flexible: bool, nullable: bool = False) -> str | None:
        n, at = self._length(field, flexible, wide=False)
        if n < 0:
            if nullable and n == -1:
                return None
            expected = "a length of -1 (null) or more" if nullable else "a non-null string"
            raise CorruptBatchError(f"{self.what}: {field} has length {n}; expected {expected}", position=at)
        start = self.pos
        if n > len(self.buf) - start:
            raise self._fail_declared(n, field, f"{'a compact string' if flexible else 'a string'} of UTF-8 text", at)
        self.pos = start + n
        try:
            return str(self.buf[start : start + n], "utf-8")  # no copy of the bytes first
        except UnicodeDecodeError as exc:
            raise CorruptBatchError(
                f"{self.what}: {field} is not valid UTF-8 (byte {exc.start} of the string); expected UTF-8 text",
                position=at,
            ) from None

    @overload
    def bytes_(self, field: str, flexible: bool, nullable: Literal[False] = False) -> bytes: ...

    @overload
    def bytes_(self, field: str, flexible: bool, nullable: bool) -> bytes | None: ...

    def bytes_(self, field: str, flexible: bool, nullable: bool = False) -> bytes | None:
        n, at = self._length(field, flexible, wide=True)
        if n < 0:
            if nullable and n == -1:
                return None
            raise CorruptBatchError(f"{self.what}: {field} has length {n}; expected non-null bytes", position=at)
        return self._take(n, field, "compact bytes" if flexible else "bytes", at)

    def array_length(self, field: str, flexible: bool, nullable: bool = False) -> int:
        """An array's element count, or -1 for a null array where `nullable`."""
        n, at = self._length(field, flexible, wide=True)
        if n < 0:
            if nullable and n == -1:
                return -1
            raise CorruptBatchError(f"{self.what}: {field} has {n} elements; expected a non-null array", position=at)
        if n > len(self.buf) - self.pos:  # every element takes a byte at least: no huge list for a garbled count
            raise TruncatedDataError(
                f"{self.what}: {field} declares {n} elements; expected at least {n} bytes for them but only "
                f"{len(self.buf) - self.pos} remain",
                position=at,
            )
        return n

    def tagged_fields(self, field: str = "tagged fields") -> tuple:
        """(tag, raw bytes) of each field of a tagged-field section."""
        count = self.uvarint(f"{field} count")
        fields = []
        for _ in range(count):
            tag = self.uvarint(f"{field} tag")
            at = self.pos
            size = self.uvarint(f"size of tagged field {tag}")
            fields.append((tag, self._take(size, f"tagged field {tag}", "tagged-field data", at)))
        return tuple(fields)

    def finish(self) -> None:
        extra = len(self.buf) - self.pos
        if extra:
            raise CorruptBatchError(
                f"{self.what}: {extra} bytes left after the last field; expected the record to end", position=self.pos
            )


# -- schemas ----------------------------------------------------------------------------------------

_ALL = (0, 0x7FFF)
PRIMITIVES = frozenset(
    {"int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool", "uuid", "string", "bytes", "records"}
)


class Field(NamedTuple):
    name: str
    type: str  # a primitive, or "{}" for a struct of `fields`
    array: bool
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None  # the versions in which the field is tagged
    fields: tuple  # of Field, for a struct


class Schema(NamedTuple):
    name: str
    versions: tuple[int, int]
    flexible: tuple[int, int] | None
    fields: tuple  # of Field

    def has_version(self, version: int) -> bool:
        return _within(version, self.versions)


def _within(version: int, span: tuple[int, int] | None) -> bool:
    return span is not None and span[0] <= version <= span[1]


def _versions(text: str) -> tuple[int, int]:
    if text.endswith("+"):
        return int(text[:-1]), _ALL[1]
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def parse_schemas(text: str) -> dict[str, Schema]:
    """The schemas of a text in the notation of this module's docstring, by name."""
    schemas: dict[str, Schema] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    i = 0
    while i < len(lines):
        name, versions, *flex = lines[i].split()
        fields, i = _parse_fields(lines, i + 1, 2)
        flexible = _versions(flex[0][len("flex") :]) if flex else None
        schemas[name] = Schema(name, _versions(versions), flexible, fields)
    return schemas


def _parse_fields(lines: list[str], i: int, indent: int) -> tuple[tuple, int]:
    fields = []
    while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) == indent:
        name, type_, *options = lines[i].split()
        versions, nullable, tag, tagged = _ALL, None, None, None
        for option in options:
            if option.startswith("null"):
                nullable = _versions(option[4:])
            elif option.startswith("tag"):
                number, _, span = option[3:].partition("@")
                tag, tagged = int(number), (_versions(span) if span else None)
            else:
                versions = _versions(option)
        array = type_.startswith("[]")
        base = type_[2:] if array else type_
        if base != "{}" and base not in PRIMITIVES:
            raise ValueError(f"unknown type {type_!r} of field {name!r}")
        nested, i = _parse_fields(lines, i + 1, indent + 2)
        if tag is not None and tagged is None:
            tagged = versions
        fields.append(Field(name, base, array, versions, nullable, tag, tagged, nested))
    return tuple(fields), i


# -- framed messages ---------------------------------------------------------------------------------

FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


def read_frame(value, what: str) -> tuple[int, int, int]:
    """(api key, version, position of the message) of a message framed as Kafka's
    AbstractApiMessageSerde writes it (metadata records, remote log metadata): an unsigned varint
    frame version (1), the api key and the version (unsigned varints). Raises CorruptBatchError."""
    if value is None:
        raise CorruptBatchError(f"{what} is null; expected a framed record", position=0)
    reader = Reader(value, f"{what} frame")
    frame = reader.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise CorruptBatchError(f"{what} frame version is {frame}; expected {FRAME_VERSION}", position=0)
    api_key = reader.uvarint("api key")
    version = reader.uvarint("version")
    return api_key, version, reader.pos


# -- decoding ----------------------------------------------------------------------------------------


def decode(schema: Schema, version: int, buf, what: str | None = None, *, whole: bool = True) -> dict:
    """The message `buf` (all of it; with `whole` False, the message at its start) as `schema` at
    `version`: its fields by name. Raises CorruptBatchError (TruncatedDataError when the bytes end
    early), positions inside `buf`."""
    reader = Reader(buf, what or f"{schema.name} v{version}")
    out = read_message(reader, schema, version)
    if whole:
        reader.finish()
    return out


def read_message(reader: Reader, schema: Schema, version: int) -> dict:
    """The message at `reader`'s position as `schema` at `version` (`decode` of a message behind
    something read first, such as its version); the reader moves past it."""
    return _read_struct(reader, schema.fields, version, _within(version, schema.flexible), "")


def _read_struct(reader: Reader, fields: tuple, version: int, flexible: bool, path: str) -> dict:
    regular, tagged, _ = _layout(fields, version, flexible)
    values: dict = {}
    for name, read in regular:
        values[name] = read(reader, path + name)
    if not flexible:
        return values
    unknown = []
    found = False
    for tag, data in reader.tagged_fields(f"{path}tagged fields"):
        if tag not in tagged:  # a field of a newer Kafka: kept as bytes
            unknown.append({"tag": tag, "data": data})
            continue
        name, read = tagged[tag]
        sub = Reader(data, f"{reader.what}: tagged field {tag}")
        values[name] = read(sub, path + name)
        sub.finish()
        found = True
    out = {f.name: values[f.name] for f in fields if f.name in values} if found else values  # Kafka's field order
    if unknown:
        out["_unknownTaggedFields"] = unknown
    return out


_LAYOUTS: dict[tuple[int, int, bool], tuple[tuple, dict, tuple]] = {}


def _layout(fields: tuple, version: int, flexible: bool) -> tuple[tuple, dict, tuple]:
    """The fields present in `version`: ((name, read) of those read in order, {tag: (name, read)} of
    the tagged ones, `fields`), `read(reader, path)` reading one. Worked out once per struct and
    version: decoding a partition's records repeats it."""
    key = (id(fields), version, flexible)
    layout = _LAYOUTS.get(key)
    if layout is None:
        regular, tagged = [], {}
        for field in fields:
            if not _within(version, field.versions):
                continue
            nullable = _within(version, field.nullable)
            if flexible and _within(version, field.tagged):
                tagged[field.tag] = (field.name, _field_reader(field, version, True, nullable, tagged=True))
            else:
                regular.append((field.name, _field_reader(field, version, flexible, nullable)))
        layout = _LAYOUTS[key] = (tuple(regular), tagged, fields)  # holding `fields` keeps its id unique
    return layout


_FIXED = {
    "int8": Reader.int8,
    "int16": Reader.int16,
    "uint16": Reader.uint16,
    "int32": Reader.int32,
    "uint32": Reader.uint32,
    "int64": Reader.int64,
    "float64": Reader.float64,
    "bool": Reader.boolean,
    "uuid": Reader.uuid,
}


def _field_reader(field: Field, version: int, flexible: bool, nullable: bool, tagged: bool = False):
    """read(reader, path) of one field at `version`."""
    if field.array:
        element = _field_reader(field._replace(array=False), version, flexible, False)

        def read_array(reader: Reader, path: str):
            count = reader.array_length(path, flexible, nullable)
            return None if count < 0 else [element(reader, f"{path}[{i}]") for i in range(count)]

        return read_array
    kind = field.type
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == "string":
        return lambda reader, path: reader.string(path, flexible, nullable)
    if kind in ("bytes", "records"):
        return lambda reader, path: reader.bytes_(path, flexible, nullable)

    def read_struct(reader: Reader, path: str):
        # a nullable struct's presence: an unsigned varint (0: null) when tagged, else an int8 (< 0: null)
        if nullable and (reader.uvarint(f"{path} presence") == 0 if tagged else reader.int8(f"{path} presence") < 0):
            return None
        return _read_struct(reader, field.fields, version, flexible, path + ".")

    return read_struct


# -- encoding ----------------------------------------------------------------------------------------

_PACKS = {"int8": _I8, "int16": _I16, "uint16": _U16, "int32": _I32, "uint32": _U32, "int64": _I64, "float64": _F64}


def encode(schema: Schema, version: int, values: dict) -> bytes:
    """`values` (fields by name, as `decode` returns them) as `schema` at `version`: what `decode`
    reads back. A tagged field left out of `values` is not written (it holds its default), nor is
    `_unknownTaggedFields`."""
    out = bytearray()
    _write_struct(out, schema.fields, version, _within(version, schema.flexible), values)
    return bytes(out)


def _write_struct(out: bytearray, fields: tuple, version: int, flexible: bool, values: dict) -> None:
    tagged = []
    for field in fields:
        if not _within(version, field.versions):
            continue
        if flexible and _within(version, field.tagged):
            if field.name in values:
                data = bytearray()
                _write_field(data, field, version, True, values[field.name], tagged=True)
                tagged.append((field.tag, data))
        else:
            _write_field(out, field, version, flexible, values[field.name])
    if flexible:
        write_uvarint(out, len(tagged))
        for tag, data in sorted(tagged):
            write_uvarint(out, tag)
            write_uvarint(out, len(data))
            out += data


def _write_field(out: bytearray, field: Field, version: int, flexible: bool, value, tagged: bool = False) -> None:
    if field.array:
        _write_length(out, -1 if value is None else len(value), flexible, _I32)
        for item in value or ():
            _write_one(out, field, version, flexible, item, False, False)
    else:
        _write_one(out, field, version, flexible, value, _within(version, field.nullable), tagged)


def _write_length(out: bytearray, n: int, flexible: bool, codec: struct.Struct) -> None:
    if flexible:
        write_uvarint(out, n + 1)
    else:
        out += codec.pack(n)


def _write_one(out: bytearray, field: Field, version: int, flexible: bool, value, nullable: bool, tagged: bool):
    kind = field.type
    if kind == "{}":
        if nullable:
            present = value is not None
            out += bytes([present]) if tagged else _I8.pack(1 if present else -1)
        if value is not None:
            _write_struct(out, field.fields, version, flexible, value)
    elif kind in ("string", "bytes", "records"):
        raw = value.encode("utf-8") if kind == "string" and value is not None else value
        _write_length(out, -1 if raw is None else len(raw), flexible, _I16 if kind == "string" else _I32)
        out += raw or b""
    elif kind == "uuid":
        out += base64.urlsafe_b64decode(value + "==")
    elif kind == "bool":
        out.append(1 if value else 0)
    else:
        out += _PACKS[kind].pack(value)
