"""The Arrow type of decoded keys and values, and decoded values made to fit it (no Spark, no I/O).

Each schema language maps onto Arrow the way Spark's own readers map it onto Spark types
(`from_avro`, `from_protobuf`, `from_json`), so that a column keeps its type from Arrow to Spark to
Delta or Iceberg:

* Avro (`avro_type`): records -> structs, arrays -> lists, maps -> maps, a union with null -> its
  other branch, nullable; any other union -> a struct of ``member0``, ``member1``, ... with the
  branch that was written set (Spark's `from_avro` names them so); enums -> strings; bytes and
  fixed -> binary; date, timestamp-millis/micros (UTC), local-timestamp-millis/micros and decimal
  logical types -> date, timestamp and decimal (a string beyond 38 digits); time-millis/micros ->
  microseconds of the day (int64, Spark has no time type); a record that contains itself -> JSON text there.
* Protobuf (`protobuf_type`): messages -> structs, repeated -> lists, maps -> maps, enums -> their
  names, uint64 -> decimal(20, 0), google.protobuf.Timestamp -> timestamp, the wrapper types
  (StringValue, ...) -> their value, nullable; a message that contains itself -> JSON text there.
* JSON Schema (`json_schema_type`): object/array/string/integer/number/boolean, and a type list with
  "null"; anything else ($ref, oneOf, anyOf, allOf, an object without properties) -> JSON text.
* JSON without a schema (`infer_json_type`, `merge_types`): each value's type, merged over the
  values; a field whose values disagree becomes JSON text, integers and numbers become double.

"JSON text" is `pa.large_string()`: Spark reads it as a string like any other, and `conform` knows by
it to write the value there as JSON instead of requiring a string.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

JSON_TEXT = pa.large_string()
# the metadata key of an Avro union's member field that holds a record: the record's full name
UNION_BRANCH = b"avro.record"
UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def nullable_struct(fields: list[tuple[str, pa.DataType]]) -> pa.DataType:
    return pa.struct([pa.field(name, t, nullable=True) for name, t in fields])


# -- Avro -------------------------------------------------------------------------------------------

_AVRO_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_AVRO_LOGICAL = {
    "date": pa.date32(),
    "timestamp-millis": UTC_TIMESTAMP,
    "timestamp-micros": UTC_TIMESTAMP,
    "local-timestamp-millis": pa.timestamp("us"),
    "local-timestamp-micros": pa.timestamp("us"),
    "time-millis": pa.int64(),
    "time-micros": pa.int64(),
    "uuid": pa.string(),
}


def avro_type(parsed: Any) -> pa.DataType:
    """The Arrow type of values of a parsed Avro schema (`fastavro.parse_schema`'s output: a named type
    is defined once and then used by its full name; `__named_schemas` holds every definition, those
    of referenced schemas included)."""
    definitions = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    named: dict[str, pa.DataType] = {}

    def convert(schema: Any) -> pa.DataType:
        if isinstance(schema, str):
            if schema in _AVRO_PRIMITIVES:
                return _AVRO_PRIMITIVES[schema]
            if schema not in named and schema in definitions:
                return convert(definitions[schema])
            if schema in named:
                return named[schema]
            raise ValueError(f"Avro type {schema!r} is neither primitive nor defined")
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) == 1:
                return convert(branches[0])
            # a record branch carries its name: the reader returns (name, record) for it
            return pa.struct(
                [
                    pa.field(f"member{i}", convert(b), metadata={UNION_BRANCH: name} if name else None)
                    for i, b in enumerate(branches)
                    for name in [_record_name(b, definitions)]
                ]
            )
        logical, kind = schema.get("logicalType"), schema["type"]
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = schema["precision"], schema.get("scale", 0)
            result = pa.decimal128(precision, scale) if precision <= 38 else pa.string()
        elif logical in _AVRO_LOGICAL:
            result = _AVRO_LOGICAL[logical]
        elif kind in ("record", "error"):
            named[schema["name"]] = JSON_TEXT  # what a record that contains itself holds there
            result = nullable_struct([(f["name"], convert(f["type"])) for f in schema["fields"]])
        elif kind == "enum":
            result = pa.string()
        elif kind == "fixed":
            result = pa.binary()
        elif kind == "array":
            result = pa.list_(convert(schema["items"]))
        elif kind == "map":
            result = pa.map_(pa.string(), convert(schema["values"]))
        else:
            result = convert(kind)
        if "name" in schema:
            named[schema["name"]] = result
        return result

    return convert(parsed)


def _record_name(branch: Any, definitions: dict) -> str | None:
    definition = definitions.get(branch, branch) if isinstance(branch, str) else branch
    if isinstance(definition, dict) and definition.get("type") in ("record", "error"):
        return definition["name"]
    return None


# -- Protobuf ---------------------------------------------------------------------------------------

_WRAPPERS = {
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}
TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"


def protobuf_type(descriptor: Any, _seen: tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow type of a Protobuf message (a `google.protobuf.descriptor.Descriptor`)."""
    if descriptor.full_name == TIMESTAMP_MESSAGE:
        return UTC_TIMESTAMP
    if descriptor.full_name in _WRAPPERS:
        return _protobuf_field_type(descriptor.fields_by_name["value"], _seen)
    if descriptor.full_name in _seen:
        return JSON_TEXT
    seen = (*_seen, descriptor.full_name)
    return nullable_struct([(f.name, _protobuf_field_type(f, seen)) for f in descriptor.fields])


def _protobuf_field_type(field: Any, seen: tuple[str, ...]) -> pa.DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        entry = field.message_type.fields_by_name
        return pa.map_(_protobuf_field_type(entry["key"], seen), _protobuf_field_type(entry["value"], seen))
    if field.type == F.TYPE_MESSAGE or field.type == F.TYPE_GROUP:
        single = protobuf_type(field.message_type, seen)
    else:
        single = _PROTOBUF_SCALARS[field.type]
    return pa.list_(single) if _is_repeated(field) else single


def _is_repeated(field: Any) -> bool:
    # protobuf >= 5 has FieldDescriptor.is_repeated; label is deprecated there but the only way before
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _protobuf_scalars() -> dict[int, pa.DataType]:
    try:
        from google.protobuf.descriptor import FieldDescriptor as F
    except ImportError:  # without the `formats` extra; protobuf_type is never called then
        return {}
    return {
        F.TYPE_DOUBLE: pa.float64(),
        F.TYPE_FLOAT: pa.float32(),
        F.TYPE_INT64: pa.int64(),
        F.TYPE_SINT64: pa.int64(),
        F.TYPE_SFIXED64: pa.int64(),
        F.TYPE_UINT64: pa.decimal128(20, 0),
        F.TYPE_FIXED64: pa.decimal128(20, 0),
        F.TYPE_INT32: pa.int32(),
        F.TYPE_SINT32: pa.int32(),
        F.TYPE_SFIXED32: pa.int32(),
        F.TYPE_UINT32: pa.int64(),
        F.TYPE_FIXED32: pa.int64(),
        F.TYPE_BOOL: pa.bool_(),
        F.TYPE_STRING: pa.string(),
        F.TYPE_BYTES: pa.binary(),
        F.TYPE_ENUM: pa.string(),
    }


_PROTOBUF_SCALARS = _protobuf_scalars()


def protobuf_value(message: Any) -> Any:
    """A decoded Protobuf message as Python values of `protobuf_type`'s shape: unset fields with
    presence (messages, `optional`, oneof members) are None, the others their default, as protobuf reads them."""
    return _message_reader(message.DESCRIPTOR)(message)


# by descriptor object: two schema ids may define different messages of one name
_MESSAGE_READERS: dict[Any, Converter] = {}


def _message_reader(descriptor: Any) -> Converter:
    """`protobuf_value` for messages of `descriptor`, its fields' handling chosen once."""
    found = _MESSAGE_READERS.get(descriptor)
    if found is not None:
        return found
    if descriptor.full_name == TIMESTAMP_MESSAGE:
        found = _timestamp_message
    elif descriptor.full_name in _WRAPPERS:
        found = _wrapped_value
    else:
        plan = [(field.name, _field_reader(field)) for field in descriptor.fields]

        def found(message: Any) -> dict:
            return {name: read(message) for name, read in plan}

    _MESSAGE_READERS[descriptor] = found
    return found


def _timestamp_message(message: Any) -> dt.datetime:
    return _EPOCH + dt.timedelta(seconds=message.seconds, microseconds=message.nanos // 1000)


def _wrapped_value(message: Any) -> Any:
    return message.value


def _field_reader(field: Any) -> Converter:
    from google.protobuf.descriptor import FieldDescriptor as F

    name = field.name
    if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        item = _single(field.message_type.fields_by_name["value"])
        if item is None:
            return lambda m: dict(getattr(m, name))
        return lambda m: {k: item(v) for k, v in getattr(m, name).items()}
    single = _single(field)
    if _is_repeated(field):
        if single is None:
            return lambda m: list(getattr(m, name))
        return lambda m: [single(v) for v in getattr(m, name)]
    if field.has_presence:
        convert = single or (lambda v: v)
        return lambda m: convert(getattr(m, name)) if m.HasField(name) else None
    if single is None:
        return lambda m: getattr(m, name)
    return lambda m: single(getattr(m, name))


def _single(field: Any) -> Converter | None:
    """How one value of `field` reads (None: as protobuf gives it)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        sub = field.message_type
        return lambda v: _message_reader(sub)(v)  # looked up when called: a message may contain itself
    if field.type == F.TYPE_ENUM:
        # an open enum keeps numbers it does not name; they stay readable as their number
        names = {number: value.name for number, value in field.enum_type.values_by_number.items()}
        return lambda v: names.get(v) or str(v)
    return None


# -- JSON Schema and JSON -------------------------------------------------------------------------

_JSON_SCHEMA_SCALARS = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}


def json_schema_type(schema: Any) -> pa.DataType:
    """The Arrow type of values of a JSON Schema, where it is simple; JSON text where it is not."""
    if not isinstance(schema, dict):
        return JSON_TEXT
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        kind = others[0] if len(others) == 1 else None
    if any(k in schema for k in ("$ref", "oneOf", "anyOf", "allOf", "not", "if")):
        return JSON_TEXT
    if kind in _JSON_SCHEMA_SCALARS:
        return _JSON_SCHEMA_SCALARS[kind]
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pa.list_(json_schema_type(schema["items"]))
    properties = schema.get("properties")
    if kind == "object" and isinstance(properties, dict) and properties:
        if schema.get("additionalProperties") not in (None, False):
            return JSON_TEXT  # fields beyond the properties would be lost in a struct
        return nullable_struct([(name, json_schema_type(sub)) for name, sub in properties.items()])
    return JSON_TEXT


def infer_json_type(value: Any) -> pa.DataType:
    """The Arrow type of one parsed JSON value (null: `pa.null()`, to be merged with the others)."""
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64() if -(2**63) <= value < 2**63 else pa.float64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        item: pa.DataType = pa.null()
        for v in value:
            item = merge_types(item, infer_json_type(v))
        return pa.list_(item)
    return nullable_struct([(k, infer_json_type(v)) for k, v in value.items()])


def merge_types(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type that holds values of both: null gives way, int64 widens to double, structs take the
    union of their fields (in first-seen order), anything else that disagrees becomes JSON text."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(merge_types(a.value_type, b.value_type))
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            fields[f.name] = merge_types(fields[f.name], f.type) if f.name in fields else f.type
        return nullable_struct(list(fields.items()))
    return JSON_TEXT


def settle(t: pa.DataType) -> pa.DataType:
    """An inferred type with no null type left (a field that was null in every value): JSON text there."""
    if pa.types.is_null(t):
        return JSON_TEXT
    if pa.types.is_list(t):
        return pa.list_(settle(t.value_type))
    if pa.types.is_struct(t):
        return nullable_struct([(f.name, settle(f.type)) for f in t])
    return t


# -- values made to fit their type ----------------------------------------------------------------


class DoesNotFit(ValueError):
    """A decoded value that its column's type cannot hold: where (`path`, filled in on the way out of
    nested types, so that a value that fits costs no path) and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def __str__(self) -> str:
        return f"${''.join(self.path)}: {self.reason}"


Converter = Callable[[Any], Any]
_CONVERTERS: dict[pa.DataType, Converter] = {}
_INT_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


def conform(value: Any, t: pa.DataType) -> Any:
    """`value` as `pa.array([...], type=t)` takes it, or DoesNotFit naming the first place it does not.
    A struct reads the fields it has and leaves out others, as a reader schema does."""
    return converter(t)(value)


def converter(t: pa.DataType) -> Converter:
    """`conform` for values of `t`, its checks chosen once per type (decoding calls it per value)."""
    found = _CONVERTERS.get(t)
    if found is None:
        found = _CONVERTERS[t] = _nullable(_converter(t))
    return found


def _nullable(convert: Converter) -> Converter:
    return lambda value: None if value is None else convert(value)


def _converter(t: pa.DataType) -> Converter:
    if t == JSON_TEXT:
        return lambda value: json.dumps(value, default=_json_default)
    if pa.types.is_string(t):
        return _string
    if pa.types.is_binary(t):
        return _binary
    if pa.types.is_boolean(t):
        return _boolean
    if t in _INT_BITS:
        return _integer(_INT_BITS[t])
    if pa.types.is_floating(t):
        return _floating
    if pa.types.is_decimal(t):
        return _decimal
    if pa.types.is_date(t):
        return _date
    if pa.types.is_timestamp(t):
        return _timestamp
    if pa.types.is_list(t):
        return _list(converter(t.value_type))
    if pa.types.is_map(t):
        return _map(converter(t.key_type), converter(t.item_type))
    if pa.types.is_struct(t):
        return _union(t) if _is_union(t) else _struct([(f.name, converter(f.type)) for f in t])
    raise ValueError(f"no conversion of decoded values to {t}")


def _fail(expected: str, value: Any) -> DoesNotFit:
    return DoesNotFit(f"expected {expected}, got {type(value).__name__}")


def _string(value: Any) -> str:
    # a UUID (Avro's uuid), a Decimal (Avro's decimal wider than Arrow's 38 digits)
    if isinstance(value, (str, uuid.UUID, decimal.Decimal)):
        return str(value)
    raise _fail("a string", value)


def _binary(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise _fail("bytes", value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _fail("a boolean", value)


def _integer(bits: int) -> Converter:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1)

    def convert(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and low <= value < high:
            return value
        if isinstance(value, dt.time):  # Avro's time logical types, as microseconds of the day
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        raise DoesNotFit(f"expected a {bits}-bit integer, got {value!r:.40}")

    return convert


def _floating(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _fail("a number", value)


def _decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
        return decimal.Decimal(value)
    raise _fail("a decimal", value)


def _date(value: Any) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    raise _fail("a date", value)


def _timestamp(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    raise _fail("a timestamp", value)


def _list(item: Converter) -> Converter:
    def convert(value: Any) -> list:
        if not isinstance(value, (list, tuple)):
            raise _fail("an array", value)
        out = []
        for i, v in enumerate(value):
            try:
                out.append(item(v))
            except DoesNotFit as err:
                err.path.insert(0, f"[{i}]")
                raise
        return out

    return convert


def _map(key: Converter, item: Converter) -> Converter:
    def convert(value: Any) -> list:
        if not isinstance(value, dict):
            raise _fail("a map", value)
        out = []
        for k, v in value.items():
            try:
                out.append((key(k), item(v)))
            except DoesNotFit as err:
                err.path.insert(0, f"[{k!r}]")
                raise
        return out

    return convert


def _struct(fields: list[tuple[str, Converter]]) -> Converter:
    def convert(value: Any) -> dict:
        if not isinstance(value, dict):
            raise _fail("an object", value)
        out = {}
        for name, field in fields:
            try:
                out[name] = field(value.get(name))
            except DoesNotFit as err:
                err.path.insert(0, f".{name}")
                raise
        return out

    return convert


def _is_union(t: pa.DataType) -> bool:
    return t.num_fields > 0 and [f.name for f in t] == [f"member{i}" for i in range(t.num_fields)]


def _union(t: pa.DataType) -> Converter:
    """An Avro union's value in its branch, the other members null. A record comes as (its name,
    the record) from the reader and goes to the member of that name; any other value goes to the
    first member it fits (the reader does not say which of int and long, say, it was written as).
    A struct whose fields merely are named so (a dict of those keys) is read as a struct."""
    members = [(f.name, converter(f.type), (f.metadata or {}).get(UNION_BRANCH)) for f in t]
    as_struct = _struct([(name, convert) for name, convert, _ in members])
    names = [name for name, _, _ in members]

    def only(member: str, value: Any) -> dict:
        return {name: value if name == member else None for name in names}

    def convert(value: Any) -> dict:
        if isinstance(value, dict) and value.keys() <= set(names):
            return as_struct(value)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            record_name, record = value
            for name, member, branch in members:
                if branch == record_name.encode():
                    try:
                        return only(name, member(record))
                    except DoesNotFit as err:
                        err.path.insert(0, f".{name}")
                        raise
            raise DoesNotFit(f"the union has no record {record_name}")
        for name, member, _ in members:
            try:
                return only(name, member(value))
            except DoesNotFit:
                continue
        raise DoesNotFit(f"fits no branch of the union {t}")

    return convert


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.date, dt.datetime, uuid.UUID, decimal.Decimal)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
