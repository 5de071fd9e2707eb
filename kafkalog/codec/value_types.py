"""The Arrow type of decoded keys and values, and decoded values made to fit it (no Spark, no I/O).

Each schema language maps onto Arrow the way Spark's own readers map it onto Spark types
(`from_avro`, `from_protobuf`, `from_json`), so that a column keeps its type from Arrow to Spark to
Delta or Iceberg:

* Avro (`avro_type`): records -> structs, arrays -> lists, maps -> maps, a union with null -> its
  other branch, nullable; any other union -> a struct of ``member0``, ``member1``, ... with the
  branch that was written set (Spark's `from_avro` names them so); enums -> strings; bytes and
  fixed -> binary; date, timestamp-millis/micros (UTC), local-timestamp-millis/micros and decimal
  logical types -> date, timestamp and decimal; time-millis/micros -> microseconds of the day (int64,
  Spark has no time type).
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
    from google.protobuf.descriptor import FieldDescriptor as F

    descriptor = message.DESCRIPTOR
    if descriptor.full_name == TIMESTAMP_MESSAGE:
        return _EPOCH + dt.timedelta(seconds=message.seconds, microseconds=message.nanos // 1000)
    if descriptor.full_name in _WRAPPERS:
        return message.value
    row: dict[str, Any] = {}
    for field in descriptor.fields:
        value = getattr(message, field.name)
        if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == F.TYPE_MESSAGE:
                row[field.name] = {k: protobuf_value(v) for k, v in value.items()}
            elif value_field.type == F.TYPE_ENUM:
                row[field.name] = {k: _enum_name(value_field, v) for k, v in value.items()}
            else:
                row[field.name] = dict(value)
        elif _is_repeated(field):
            row[field.name] = [_protobuf_single(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            row[field.name] = None
        else:
            row[field.name] = _protobuf_single(field, value)
    return row


def _protobuf_single(field: Any, value: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return protobuf_value(value)
    if field.type == F.TYPE_ENUM:
        return _enum_name(field, value)
    return value


def _enum_name(field: Any, number: int) -> str:
    # an open enum keeps numbers it does not name; they stay readable as their number
    known = field.enum_type.values_by_number.get(number)
    return known.name if known is not None else str(number)


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
    """A decoded value that its column's type cannot hold; says where and why."""


_INT_RANGES = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


def conform(value: Any, t: pa.DataType, path: str = "$") -> Any:
    """`value` as `pa.array([...], type=t)` takes it, or DoesNotFit naming the first place it does not.
    A struct reads the fields it has and leaves out others, as a reader schema does."""
    if value is None:
        return None
    if t == JSON_TEXT:
        return json.dumps(value, default=_json_default)
    if pa.types.is_string(t):
        if isinstance(value, (str, uuid.UUID)):
            return str(value)
        raise DoesNotFit(f"{path}: expected a string, got {type(value).__name__}")
    if pa.types.is_binary(t):
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise DoesNotFit(f"{path}: expected bytes, got {type(value).__name__}")
    if pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
        raise DoesNotFit(f"{path}: expected a boolean, got {type(value).__name__}")
    if t in _INT_RANGES:
        bits = _INT_RANGES[t]
        if isinstance(value, int) and not isinstance(value, bool) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return value
        if isinstance(value, dt.time):  # Avro's time logical types, as microseconds of the day
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        raise DoesNotFit(f"{path}: expected a {bits}-bit integer, got {value!r:.40}")
    if pa.types.is_floating(t):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise DoesNotFit(f"{path}: expected a number, got {type(value).__name__}")
    if pa.types.is_decimal(t):
        if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
            return decimal.Decimal(value)
        raise DoesNotFit(f"{path}: expected a decimal, got {type(value).__name__}")
    if pa.types.is_date(t):
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        raise DoesNotFit(f"{path}: expected a date, got {type(value).__name__}")
    if pa.types.is_timestamp(t):
        if isinstance(value, dt.datetime):
            return value
        raise DoesNotFit(f"{path}: expected a timestamp, got {type(value).__name__}")
    if pa.types.is_list(t):
        if isinstance(value, (list, tuple)):
            return [conform(v, t.value_type, f"{path}[{i}]") for i, v in enumerate(value)]
        raise DoesNotFit(f"{path}: expected an array, got {type(value).__name__}")
    if pa.types.is_map(t):
        if isinstance(value, dict):
            return [(conform(k, t.key_type, path), conform(v, t.item_type, f"{path}[{k!r}]")) for k, v in value.items()]
        raise DoesNotFit(f"{path}: expected a map, got {type(value).__name__}")
    if pa.types.is_struct(t):
        if _is_union(t) and not (isinstance(value, dict) and value.keys() <= {f.name for f in t}):
            return _conform_union(value, t, path)
        if isinstance(value, dict):
            return {f.name: conform(value.get(f.name), f.type, f"{path}.{f.name}") for f in t}
        raise DoesNotFit(f"{path}: expected an object, got {type(value).__name__}")
    raise DoesNotFit(f"{path}: no conversion to {t}")


def _is_union(t: pa.DataType) -> bool:
    return t.num_fields > 0 and [f.name for f in t] == [f"member{i}" for i in range(t.num_fields)]


def _conform_union(value: Any, t: pa.DataType, path: str) -> dict:
    """An Avro union's value in its branch, the other members null. A record comes as (its name,
    the record) from the reader and goes to the member of that name; any other value goes to the
    first member it fits (the reader does not say which of int and long, say, it was written as)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        name, record = value
        for f in t:
            if f.metadata and f.metadata.get(UNION_BRANCH) == name.encode():
                return {g.name: conform(record, f.type, f"{path}.{f.name}") if g.name == f.name else None for g in t}
        raise DoesNotFit(f"{path}: the union has no record {name}")
    for i, f in enumerate(t):
        try:
            fitted = conform(value, f.type, f"{path}.member{i}")
        except DoesNotFit:
            continue
        return {g.name: fitted if g.name == f.name else None for g in t}
    raise DoesNotFit(f"{path}: fits no branch of the union {t}")


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.date, dt.datetime, uuid.UUID, decimal.Decimal)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
