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
"""

from __future__ import annotations

import base64
import struct
from typing import Literal, NamedTuple, overload

from ..errors import CorruptBatchError, TruncatedDataError

__all__ = ["Reader", "Field", "Schema", "parse_schemas", "decode", "read_frame", "uuid_text"]

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

    def _fixed(self, codec: struct.Struct, field: str, expected: str):
        if self.pos + codec.size > len(self.buf):
            raise self._fail_truncated(field, expected, codec.size)
        (value,) = codec.unpack_from(self.buf, self.pos)
        self.pos += codec.size
        return value

    def int8(self, field: str) -> int:
        return self._fixed(_I8, field, "an int8")

    def int16(self, field: str) -> int:
        return self._fixed(_I16, field, "an int16")

    def uint16(self, field: str) -> int:
        return self._fixed(_U16, field, "a uint16")

    def int32(self, field: str) -> int:
        return self._fixed(_I32, field, "an int32")

    def uint32(self, field: str) -> int:
        return self._fixed(_U32, field, "a uint32")

    def int64(self, field: str) -> int:
        return self._fixed(_I64, field, "an int64")

    def float64(self, field: str) -> float:
        return self._fixed(_F64, field, "a float64")

    def boolean(self, field: str) -> bool:
        return self._fixed(_U8, field, "a bool") != 0

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

    def _take(self, n: int, field: str, expected: str, at: int) -> bytes:
        if n > len(self.buf) - self.pos:
            raise TruncatedDataError(
                f"{self.what}: {field} declares {n} bytes; expected {expected} of that size but only "
                f"{len(self.buf) - self.pos} remain",
                position=at,
            )
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return data

    def _length(self, field: str, flexible: bool, wide: bool) -> tuple[int, int]:
        """(length or -1 for null, position of the length): int16/int32 or compact (uvarint N+1)."""
        at = self.pos
        what = f"{field} length"
        if flexible:
            return self.uvarint(what) - 1, at
        return (self.int32(what) if wide else self.int16(what)), at

    @overload
    def string(self, field: str, flexible: bool, nullable: Literal[False] = False) -> str: ...

    @overload
    def string(self, field: str, flexible: bool, nullable: bool) -> str | None: ...

    def string(self, field: str, flexible: bool, nullable: bool = False) -> str | None:
        kind = "a compact string" if flexible else "a string"
        n, at = self._length(field, flexible, wide=False)
        if n < 0:
            if nullable and n == -1:
                return None
            expected = "a length of -1 (null) or more" if nullable else "a non-null string"
            raise CorruptBatchError(f"{self.what}: {field} has length {n}; expected {expected}", position=at)
        raw = self._take(n, field, f"{kind} of UTF-8 text", at)
        try:
            return raw.decode("utf-8")
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
    out = _read_struct(reader, schema.fields, version, _within(version, schema.flexible), "")
    if whole:
        reader.finish()
    return out


def _read_struct(reader: Reader, fields: tuple, version: int, flexible: bool, path: str) -> dict:
    values: dict = {}
    tagged: dict[int, Field] = {}
    for field in fields:
        if not _within(version, field.versions):
            continue
        if flexible and _within(version, field.tagged):
            assert field.tag is not None
            tagged[field.tag] = field
            continue
        values[field.name] = _read_field(reader, field, version, flexible, path + field.name)
    unknown = []
    if flexible:
        for tag, data in reader.tagged_fields(f"{path}tagged fields"):
            field = tagged.get(tag)
            if field is None:  # a field of a newer Kafka: kept as bytes
                unknown.append({"tag": tag, "data": data})
                continue
            sub = Reader(data, f"{reader.what}: tagged field {tag}")
            values[field.name] = _read_field(sub, field, version, True, path + field.name, tagged=True)
            sub.finish()
    out = {f.name: values[f.name] for f in fields if f.name in values}  # Kafka's field order
    if unknown:
        out["_unknownTaggedFields"] = unknown
    return out


def _read_field(reader: Reader, field: Field, version: int, flexible: bool, path: str, tagged: bool = False):
    nullable = _within(version, field.nullable)
    if field.array:
        count = reader.array_length(path, flexible, nullable)
        if count < 0:
            return None
        return [_read_one(reader, field, version, flexible, f"{path}[{i}]", False, False) for i in range(count)]
    return _read_one(reader, field, version, flexible, path, nullable, tagged)


def _read_one(reader: Reader, field: Field, version: int, flexible: bool, path: str, nullable: bool, tagged: bool):
    kind = field.type
    if kind == "{}":
        # a nullable struct's presence: an unsigned varint (0: null) when tagged, else an int8 (< 0: null)
        if nullable and (reader.uvarint(f"{path} presence") == 0 if tagged else reader.int8(f"{path} presence") < 0):
            return None
        return _read_struct(reader, field.fields, version, flexible, path + ".")
    if kind == "string":
        return reader.string(path, flexible, nullable)
    if kind in ("bytes", "records"):
        return reader.bytes_(path, flexible, nullable)
    return getattr(reader, "boolean" if kind == "bool" else kind)(path)
