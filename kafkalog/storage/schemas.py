"""Schemas from files: Schema Registry's `_schemas` partition in a log dir, a directory of schema
files, and Protobuf schemas compiled to descriptors.

`read_schemas_partition` replays the `_schemas` topic's one partition (the registry's
kafkastore.topic, `_schemas` unless configured) as the registry does on start-up.

A schema directory holds one file per schema id, named by the id that Confluent's wire format
carries and by the schema's type: ``<id>.avsc`` (Avro), ``<id>.proto`` (Protobuf), ``<id>.json``
(JSON Schema), for example ``17.avsc``. Any other entry is an error, not skipped: a misnamed file
would otherwise leave its id undecodable with no word why. Schemas from a directory carry no
references (use the `_schemas` topic for schemas that import others).

Schema Registry stores Protobuf schemas as .proto text, which Python's protobuf cannot parse, so
`compile_protobuf` runs protoc (the one `grpcio-tools` bundles, with its well-known types such as
google/protobuf/timestamp.proto) into a FileDescriptorSet that the codec decodes with.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

from ..codec.schema_registry import RegisteredSchema, SchemaRegistry, SchemasTopicReader
from ..codec.value_format import PROTOBUF_FILE
from ..errors import SchemaRegistryError
from .fs import LogFileSystem
from .logdir import LogDir

SCHEMA_FILE_TYPES = {".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}
_SCHEMA_FILE = re.compile(r"^(-?\d+)(\.avsc|\.proto|\.json)$")


def read_schemas_partition(log_dir: str, topic: str = "_schemas") -> SchemaRegistry:
    """The registry the `topic`-0 partition of `log_dir` holds; an error names the segment and offset."""
    reader = SchemasTopicReader()
    for path, batch in LogDir.open(log_dir).partition(topic, 0).batches():
        if batch.is_control:
            continue
        if batch.is_transactional:  # Schema Registry writes with a plain producer: not its records
            raise SchemaRegistryError("a transactional batch in the schemas topic", file=path, offset=batch.base_offset)
        for record in batch.records():
            try:
                reader.apply(record.key, record.value)
            except SchemaRegistryError as err:
                raise err.located(file=path, offset=record.offset) from None
    return reader.registry()


def load_schema_dir(path: str) -> SchemaRegistry:
    """The schemas of a directory of ``<id>.avsc``, ``<id>.proto`` and ``<id>.json`` files (local or URI)."""
    fs, root = LogFileSystem.for_path(path)
    if not fs.is_dir(root):
        raise SchemaRegistryError("not a directory of schema files", file=path)
    schemas = []
    for entry in fs.list_dir(root):
        match = _SCHEMA_FILE.match(entry.name)
        if entry.is_dir or not match:
            raise SchemaRegistryError(
                "not a schema file: name schema files <id>.avsc, <id>.proto or <id>.json", file=entry.path
            )
        try:
            text = fs.read_bytes(entry.path).decode("utf-8")
        except UnicodeDecodeError as err:
            raise SchemaRegistryError(f"not UTF-8 text: {err}", file=entry.path) from None
        schemas.append(RegisteredSchema(int(match.group(1)), SCHEMA_FILE_TYPES[match.group(2)], text))
    return SchemaRegistry(schemas=schemas)


def compile_protobuf_schemas(registry: SchemaRegistry) -> dict[int, bytes | str]:
    """Every Protobuf schema of `registry` compiled (`compile_protobuf`), by id, for `ValueDecoder`'s
    descriptor_sets; a schema protoc refuses maps to protoc's message, which its values then report."""
    compiled: dict[int, bytes | str] = {}
    for schema in registry.by_id.values():
        if schema.schema_type == "PROTOBUF":
            try:
                compiled[schema.id] = compile_protobuf(registry, schema)
            except SchemaRegistryError as err:
                compiled[schema.id] = err.message
    return compiled


def compile_protobuf(registry: SchemaRegistry, schema: RegisteredSchema) -> bytes:
    """The serialized FileDescriptorSet of a Protobuf schema (file `PROTOBUF_FILE`) with everything it imports."""
    import importlib.resources

    from grpc_tools import protoc

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="kafkalog-proto-") as tmp:
        for name, text in [*((n, s.schema) for n, s in registry.referenced(schema)), (PROTOBUF_FILE, schema.schema)]:
            target = os.path.join(tmp, name)
            if os.path.commonpath([tmp, os.path.abspath(target)]) != tmp:
                raise SchemaRegistryError(f"schema id {schema.id}: reference name {name!r} leaves its directory")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(tmp, "descriptor_set.pb")
        args = ["protoc", f"-I{tmp}", f"-I{well_known}", "--include_imports", f"--descriptor_set_out={out}"]
        args.append(os.path.join(tmp, PROTOBUF_FILE))
        # in process (milliseconds); protoc writes its complaint to the C stderr, so a failure runs it
        # again in a child process for the message
        if protoc.main(args) != 0:
            run = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args[1:]], capture_output=True, cwd=tmp)
            message = run.stderr.decode("utf-8", "replace").strip().replace(PROTOBUF_FILE, f"schema id {schema.id}")
            raise SchemaRegistryError(f"protoc cannot compile schema id {schema.id}: {message}")
        with open(out, "rb") as f:
            return f.read()
