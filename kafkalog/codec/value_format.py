"""Keys and values decoded by their format: raw bytes, UTF-8 strings, JSON, and Confluent's wire
format with Avro, Protobuf or JSON Schema (sans-IO: bytes in, Python values out).

A column has one type, a decoded key or value one writer schema: the type is the reader schema's
(`ValueFormat.schema_id`, or the latest live version of `ValueFormat.subject`) and each value is read
with the schema its id names, then made to fit the reader's type: Avro by Avro's schema resolution
(fastavro), Protobuf and JSON Schema by field name (a field the reader does not have is left out, one
it has and the writer has not is null). `ValueDecoder.decode` raises UndecodableValueError naming
what is wrong; the caller adds topic, partition and offset and stops, or routes the record to a
dead-letter table (`decode_or_error`).

Protobuf schemas arrive compiled (`storage.schemas.compile_protobuf_schemas`: .proto text needs
protoc), as serialized FileDescriptorSets by schema id, in which the schema itself is the file
`PROTOBUF_FILE` (or, for a schema protoc refused, protoc's message).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..errors import KafkaLogError, SchemaRegistryError, UndecodableValueError
from . import confluent
from .schema_registry import RegisteredSchema, SchemaRegistry
from .value_types import (
    DoesNotFit,
    avro_type,
    conform,
    json_schema_type,
    protobuf_type,
    protobuf_value,
)

FORMATS = ("binary", "string", "json", "avro", "protobuf", "jsonschema")
CONFLUENT_FORMATS = {"avro": "AVRO", "protobuf": "PROTOBUF", "jsonschema": "JSON"}
# the name a compiled schema's own file has in its FileDescriptorSet; no reference can be named so
PROTOBUF_FILE = "__kafkalog_schema__.proto"


@dataclass(frozen=True)
class ValueFormat:
    """How a key or a value is encoded, and what gives its column's type.

    kind: one of FORMATS (``jsonschema`` is Confluent's JSON Schema format, ``json`` plain JSON).
    schema_id, subject: the Confluent formats' reader schema (one of the two; `for_topic` fills the
        subject as Confluent's TopicNameStrategy names it).
    message: Protobuf's reader message by full name (default: the reader schema's first message).
    json_type: plain JSON's column type (None: the caller infers it, `value_types.infer_json_type`).
    """

    kind: str
    schema_id: int | None = None
    subject: str | None = None
    message: str | None = None
    json_type: pa.DataType | None = None

    def __post_init__(self) -> None:
        if self.kind not in FORMATS:
            raise KafkaLogError(f"unknown format {self.kind!r}; known: {', '.join(FORMATS)}")
        unused = [
            name
            for name, given, applies in (
                ("schema_id", self.schema_id is not None, self.kind in CONFLUENT_FORMATS),
                ("subject", self.subject is not None, self.kind in CONFLUENT_FORMATS),
                ("message", self.message is not None, self.kind == "protobuf"),
                ("json_type", self.json_type is not None, self.kind == "json"),
            )
            if given and not applies
        ]
        if unused:
            raise KafkaLogError(f"format {self.kind!r} takes no {' or '.join(unused)}: it would do nothing")
        if self.schema_id is not None and self.subject is not None:
            raise KafkaLogError("give the reader schema by schema_id or by subject, not both")

    def for_topic(self, topic: str, is_key: bool) -> ValueFormat:
        """This format with the subject Confluent's default TopicNameStrategy gives, where none is set."""
        if self.kind not in CONFLUENT_FORMATS or self.schema_id is not None or self.subject is not None:
            return self
        return replace(self, subject=f"{topic}-{'key' if is_key else 'value'}")


class ValueDecoder:
    """Decodes keys or values of one `ValueFormat` into Python values that fit `arrow_type`.

    Picklable: Spark ships it to executors, which build their Avro readers and Protobuf classes lazily."""

    def __init__(
        self,
        fmt: ValueFormat,
        registry: SchemaRegistry | None = None,
        descriptor_sets: Mapping[int, bytes | str] | None = None,
    ):
        self.format = fmt
        self.registry = registry if registry is not None else SchemaRegistry()
        # kept as given: a registry asked over HTTP compiles each schema as it is looked up
        self.descriptor_sets = descriptor_sets if descriptor_sets is not None else {}
        self._cache: dict[Any, Any] = {}
        self.arrow_message: str | None = None
        self.reader: RegisteredSchema | None = None
        if fmt.kind in CONFLUENT_FORMATS:
            self.reader = self._reader_schema()
        self.arrow_type = self._arrow_type()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cache": {}}  # parsed schemas and generated classes stay where they were made

    # -- the column's type --

    def _reader_schema(self) -> RegisteredSchema:
        fmt = self.format
        if fmt.schema_id is not None:
            schema = self.registry.schema(fmt.schema_id)
        elif fmt.subject is not None:
            schema = self.registry.latest(fmt.subject).schema
        else:
            raise KafkaLogError(f"format {fmt.kind!r} needs a reader schema: a schema_id or a subject")
        if schema.schema_type != CONFLUENT_FORMATS[fmt.kind]:
            raise KafkaLogError(f"schema id {schema.id} is {schema.schema_type}, not {CONFLUENT_FORMATS[fmt.kind]}")
        return schema

    def _arrow_type(self) -> pa.DataType:
        kind = self.format.kind
        if kind == "binary":
            return pa.binary()
        if kind == "string":
            return pa.string()
        if kind == "json":
            if self.format.json_type is None:
                raise KafkaLogError("format 'json' needs json_type: give one, or infer it from the values")
            return self.format.json_type
        assert self.reader is not None
        if kind == "avro":
            return avro_type(self._avro_schema(self.reader.id))
        if kind == "protobuf":
            reader = self._reader_message()
            self.arrow_message = reader.full_name  # the one message type the column holds
            return protobuf_type(reader)
        try:
            return json_schema_type(json.loads(self.reader.schema))
        except ValueError as err:
            raise KafkaLogError(f"schema id {self.reader.id} is not JSON: {err}") from None

    # -- decoding --

    def decode(self, data: bytes | None) -> Any:
        """The value `data` stands for, fitted to `arrow_type`; None for None (a tombstone)."""
        if data is None:
            return None
        kind = self.format.kind
        if kind == "binary":
            return bytes(data)
        try:
            if kind == "string":
                return bytes(data).decode("utf-8")
            if kind == "json":
                return conform(json.loads(data), self.arrow_type)
            if kind == "avro":
                return conform(self._decode_avro(data), self.arrow_type)
            if kind == "protobuf":
                return conform(self._decode_protobuf(data), self.arrow_type)
            confluent.read_schema_id(data)
            return conform(json.loads(data[confluent.HEADER_SIZE :]), self.arrow_type)
        except UnicodeDecodeError as err:
            raise UndecodableValueError(f"not UTF-8: {err.reason}", position=err.start) from None
        except json.JSONDecodeError as err:
            raise UndecodableValueError(f"not JSON: {err.msg} at character {err.pos}") from None
        except DoesNotFit as err:
            raise UndecodableValueError(f"does not fit the column type at {err}") from None

    def decode_or_error(self, data: bytes | None) -> tuple[Any, str | None]:
        """(value, None), or (None, why not) for a value that does not decode."""
        try:
            return self.decode(data), None
        except UndecodableValueError as err:
            return None, str(err)

    def _writer(self, schema_id: int) -> RegisteredSchema:
        schema = self.registry.schema(schema_id)
        expected = CONFLUENT_FORMATS[self.format.kind]
        if schema.schema_type != expected:
            raise UndecodableValueError(f"schema id {schema_id} is {schema.schema_type}, not {expected}")
        return schema

    # Avro

    def _avro_schema(self, schema_id: int) -> Any:
        key = ("avro", schema_id)
        if key not in self._cache:
            import fastavro

            schema = self.registry.schema(schema_id)
            named: dict = {}
            try:
                for _, ref in self.registry.referenced(schema):
                    fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)
                self._cache[key] = fastavro.parse_schema(json.loads(schema.schema), named_schemas=named)
            except SchemaRegistryError as err:  # a reference that is not in the registry
                raise UndecodableValueError(f"schema id {schema_id}: {err.message}") from None
            except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as err:
                raise UndecodableValueError(f"schema id {schema_id} is not an Avro schema: {err}") from None
        return self._cache[key]

    def _decode_avro(self, data: bytes) -> Any:
        import fastavro

        schema_id = confluent.read_schema_id(data)
        writer = self._avro_schema(self._writer(schema_id).id)
        assert self.reader is not None
        reader = None if schema_id == self.reader.id else self._avro_schema(self.reader.id)
        payload = io.BytesIO(data[confluent.HEADER_SIZE :])
        try:
            # a union of several records returns (name, record): conform puts it in its member
            value = fastavro.schemaless_reader(
                payload, writer, reader, return_record_name=True, return_record_name_override=True
            )
        except EOFError:
            raise UndecodableValueError(f"the Avro payload ends inside a value of schema id {schema_id}") from None
        except (ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError) as err:
            raise UndecodableValueError(
                f"Avro payload does not decode with schema id {schema_id}: {type(err).__name__}: {err}"
            ) from None
        except fastavro.read.SchemaResolutionError as err:
            raise UndecodableValueError(f"schema id {schema_id} does not resolve to the reader's: {err}") from None
        left = len(data) - confluent.HEADER_SIZE - payload.tell()
        if left:
            raise UndecodableValueError(f"{left} bytes after the Avro value of schema id {schema_id}")
        return value

    # Protobuf

    def _protobuf_file(self, schema_id: int) -> tuple[Any, Any]:
        """(the pool, the FileDescriptorProto) of a compiled Protobuf schema."""
        key = ("protobuf", schema_id)
        if key not in self._cache:
            from google.protobuf import descriptor_pb2, descriptor_pool

            compiled = self.descriptor_sets.get(schema_id)
            if not isinstance(compiled, bytes):
                why = compiled or "no descriptor set was given for it"
                raise UndecodableValueError(f"Protobuf schema id {schema_id} is not compiled: {why}")
            files = descriptor_pb2.FileDescriptorSet.FromString(compiled).file
            pool = descriptor_pool.DescriptorPool()
            for f in files:
                pool.Add(f)
            self._cache[key] = pool, next(f for f in files if f.name == PROTOBUF_FILE)
        return self._cache[key]

    def _message(self, schema_id: int, indexes: tuple[int, ...]) -> Any:
        """The descriptor of the message that Confluent's message indexes point at in a schema."""
        pool, file = self._protobuf_file(schema_id)
        names = [file.package] if file.package else []
        messages = list(file.message_type)
        for index in indexes:
            # Confluent counts the messages declared in the .proto text: map entries are not among them
            declared = [m for m in messages if not m.options.map_entry]
            if index >= len(declared):
                raise UndecodableValueError(f"message indexes {list(indexes)} are not in schema id {schema_id}")
            names.append(declared[index].name)
            messages = list(declared[index].nested_type)
        return pool.FindMessageTypeByName(".".join(names))

    def _reader_message(self) -> Any:
        assert self.reader is not None
        if self.format.message is None:
            return self._message(self.reader.id, confluent.FIRST_MESSAGE)
        pool, _ = self._protobuf_file(self.reader.id)
        try:
            return pool.FindMessageTypeByName(self.format.message)
        except KeyError:
            raise KafkaLogError(f"schema id {self.reader.id} has no message {self.format.message!r}") from None

    def _decode_protobuf(self, data: bytes) -> Any:
        from google.protobuf import message_factory
        from google.protobuf.message import DecodeError

        schema_id = confluent.read_schema_id(data)
        self._writer(schema_id)
        indexes, start = confluent.read_message_indexes(data)
        key = ("class", schema_id, indexes)
        if key not in self._cache:
            self._cache[key] = message_factory.GetMessageClass(self._message(schema_id, indexes))
        cls = self._cache[key]
        if cls.DESCRIPTOR.full_name != self.arrow_message:
            raise UndecodableValueError(
                f"schema id {schema_id} message {cls.DESCRIPTOR.full_name}, the column holds {self.arrow_message}"
            )
        try:
            message = cls.FromString(data[start:])
        except DecodeError as err:
            raise UndecodableValueError(f"Protobuf payload does not decode with schema id {schema_id}: {err}") from None
        return protobuf_value(message)
