"""Schemas from files: Schema Registry's `_schemas` partition in a log dir, a directory of schema
files, a running Schema Registry's REST API, and Protobuf schemas compiled to descriptors.

`read_schemas_partition` replays the `_schemas` topic's one partition (the registry's
kafkastore.topic, `_schemas` unless configured) as the registry does on start-up.

A schema directory holds one file per schema id, named by the id that Confluent's wire format
carries and by the schema's type: ``<id>.avsc`` (Avro), ``<id>.proto`` (Protobuf), ``<id>.json``
(JSON Schema), for example ``17.avsc``. Any other entry is an error, not skipped: a misnamed file
would otherwise leave its id undecodable with no word why. Schemas from a directory carry no
references (use the `_schemas` topic for schemas that import others).

`HttpSchemaRegistry` asks a reachable registry for each schema id as a value names it (GET
/schemas/ids/{id}) and for subject versions (GET /subjects/{subject}/versions/{version|latest}),
each answer kept for the rest of the run; Spark's executors ask it themselves (each its own cache).

Schema Registry stores Protobuf schemas as .proto text, which Python's protobuf cannot parse, so
`compile_protobuf` runs protoc (the one `grpcio-tools` bundles, with its well-known types such as
google/protobuf/timestamp.proto) into a FileDescriptorSet that the codec decodes with.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping

from ..codec.schema_registry import (
    RegisteredSchema,
    SchemaRegistry,
    SchemasTopicReader,
    SubjectVersion,
    schema_from_json,
)
from ..codec.value_format import PROTOBUF_FILE
from ..errors import SchemaRegistryError, UndecodableValueError
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


class HttpSchemaRegistry(SchemaRegistry):
    """The schemas of a Schema Registry at `url`, asked for over its REST API as they are needed and
    kept per id and per subject version. An id the registry does not know (HTTP 404) is a value that
    does not decode, as with a registry read from files; any other failure (unreachable, an error
    status, an answer that is not a schema) is a SchemaRegistryError naming the URL."""

    ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"

    def __init__(self, url: str, timeout: float = 30.0):
        super().__init__()
        self.url = url.rstrip("/")
        self.timeout = timeout

    def schema(self, schema_id: int) -> RegisteredSchema:
        if schema_id not in self.by_id:
            body = self._get(f"/schemas/ids/{int(schema_id)}")
            if body is None:
                raise UndecodableValueError(f"schema id {schema_id} is not in the Schema Registry at {self.url}")
            self.by_id[schema_id] = self._schema(body, schema_id, f"schema id {schema_id}")
        return self.by_id[schema_id]

    def version(self, subject: str, version: int) -> SubjectVersion:
        if (subject, version) not in self.versions:
            self._subject_version(subject, str(version))
        return self.versions[(subject, version)]

    def latest(self, subject: str) -> SubjectVersion:
        """The subject's newest live version, as the registry answers it now."""
        return self._subject_version(subject, "latest")

    def _subject_version(self, subject: str, version: str) -> SubjectVersion:
        body = self._get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}")
        if body is None:
            raise SchemaRegistryError(f"the Schema Registry at {self.url} has no version {version} of {subject!r}")
        what = f"subject {subject!r} version {version}"
        schema_id, number = body.get("id"), body.get("version")
        if not isinstance(schema_id, int) or not isinstance(number, int):
            raise SchemaRegistryError(f"the Schema Registry at {self.url} answered {what} without an integer id")
        found = SubjectVersion(subject, number, self._schema(body, schema_id, what))
        self.versions[(subject, number)] = found
        self.by_id.setdefault(schema_id, found.schema)
        return found

    def _schema(self, body: dict, schema_id: int, what: str) -> RegisteredSchema:
        try:
            return schema_from_json(body, schema_id)
        except SchemaRegistryError as err:
            raise SchemaRegistryError(f"the Schema Registry at {self.url} answered {what}: {err.message}") from None

    def _get(self, path: str) -> dict | None:
        """The JSON object at `path`; None for a 404."""
        request = urllib.request.Request(self.url + path, headers={"Accept": self.ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise SchemaRegistryError(f"the Schema Registry at {self.url}: GET {path}: {_http_error(err)}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            why = getattr(err, "reason", err)
            raise SchemaRegistryError(f"cannot reach the Schema Registry at {self.url}: GET {path}: {why}") from None
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SchemaRegistryError(f"the Schema Registry at {self.url}: GET {path}: the answer is not a JSON object")
        return body


def _http_error(err) -> str:
    """An error status with the registry's own message ({"error_code", "message"}) where it sent one."""
    try:
        message = json.loads(err.read()).get("message")
    except (ValueError, AttributeError, OSError):
        message = None
    return f"HTTP {err.code} {message or err.reason}"


class _CompiledOnUse(Mapping):
    """The Protobuf schemas of a registry asked for by id as values name them, each compiled when
    first looked up (`compile_protobuf_schemas`); a schema protoc refuses maps to protoc's message."""

    def __init__(self, registry: SchemaRegistry):
        self.registry = registry
        self.compiled: dict[int, bytes | str] = {}

    def __getitem__(self, schema_id: int) -> bytes | str:
        if schema_id not in self.compiled:
            try:
                self.compiled[schema_id] = compile_protobuf(self.registry, self.registry.schema(schema_id))
            except SchemaRegistryError as err:
                self.compiled[schema_id] = err.message
        return self.compiled[schema_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self.compiled)

    def __len__(self) -> int:
        return len(self.compiled)


def compile_protobuf_schemas(registry: SchemaRegistry) -> Mapping[int, bytes | str]:
    """Every Protobuf schema of `registry` compiled (`compile_protobuf`), by id, for `ValueDecoder`'s
    descriptor_sets; a schema protoc refuses maps to protoc's message, which its values then report.
    A registry asked over HTTP has no list of its schemas here: each is compiled when a value names it."""
    if isinstance(registry, HttpSchemaRegistry):
        return _CompiledOnUse(registry)
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
