"""Confluent Schema Registry's store, rebuilt from the records of its `_schemas` topic (sans-IO).

The registry keeps everything in one compacted topic and rebuilds its state by replaying it
(`KafkaStoreMessageHandler` in confluentinc/schema-registry). Keys and values are JSON:

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` -> ``{"subject","version","id","schema",
  "schemaType" (absent: AVRO),"references":[{"name","subject","version"}],"deleted"}``: a version is
  registered, or soft-deleted (``deleted: true``); a null value (tombstone) hard-deletes it.
* ``DELETE_SUBJECT`` -> ``{"subject","version"}``: versions 1..version of the subject are soft-deleted.
* ``CLEAR_SUBJECT`` -> ``{"subject"}``: the subject's soft-deleted versions are dropped.
* ``NOOP``, ``CONFIG``, ``MODE``, ``ASSOC``, ``CONTEXT``: compatibility, modes and bookkeeping that
  say nothing about which schema an id stands for; read past on purpose.

A schema id decodes as long as one version registered with it is still in the store, soft-deleted or
not: Confluent's docs say of a soft delete that "the API only deletes the version and the underlying
schema ID would still be available for any lookup" (docs.confluent.io, "Delete Schemas in Confluent
Platform"), and GET /schemas/ids/{id} keeps serving it, which is how consumers still read the data
written with it; only a hard delete (the tombstone) or CLEAR_SUBJECT forgets the version. The
registry's in-memory cache does the same: `schemaDeleted` keeps the id's subject-version,
`schemaTombstoned` removes it and drops the id when none is left.

Subjects qualified with a context (``:.ctx:subject``) have ids of their own; the wire format carries
no context, so `SchemaRegistry.schema` answers for the default context only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SchemaRegistryError, UndecodableValueError

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
# key types that do not change which schema an id or a subject-version stands for
IGNORED_KEY_TYPES = frozenset({"NOOP", "CONFIG", "MODE", "ASSOC", "CONTEXT"})


@dataclass(frozen=True)
class SchemaReference:
    """An import (Protobuf), a named type (Avro) or a $ref (JSON Schema) resolved by subject and version."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    schema_type: str  # AVRO, PROTOBUF or JSON
    schema: str
    references: tuple[SchemaReference, ...] = ()


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    schema: RegisteredSchema
    deleted: bool = False


class SchemaRegistry:
    """Schemas by id, as Schema Registry serves them to deserializers, and the versions of each subject."""

    def __init__(self, versions: Iterable[SubjectVersion] = (), schemas: Iterable[RegisteredSchema] = ()):
        self.versions = {(v.subject, v.version): v for v in versions}
        self.by_id = {s.id: s for s in schemas}
        for v in self.versions.values():
            if not v.subject.startswith(":."):  # a qualified subject lives in a context of its own
                self.by_id[v.schema.id] = v.schema

    def schema(self, schema_id: int) -> RegisteredSchema:
        try:
            return self.by_id[schema_id]
        except KeyError:
            raise UndecodableValueError(
                f"schema id {schema_id} is not in the registry (never registered there, or hard-deleted)"
            ) from None

    def version(self, subject: str, version: int) -> SubjectVersion:
        try:
            return self.versions[(subject, version)]
        except KeyError:
            raise SchemaRegistryError(f"subject {subject!r} has no version {version} in the registry") from None

    def latest(self, subject: str) -> SubjectVersion:
        """The subject's newest version that is not deleted, as GET /subjects/S/versions/latest answers."""
        live = [v for (s, _), v in self.versions.items() if s == subject and not v.deleted]
        if not live:
            raise SchemaRegistryError(
                f"subject {subject!r} has no live version in the registry; give the reader schema by its id"
            )
        return max(live, key=lambda v: v.version)

    def referenced(self, schema: RegisteredSchema) -> list[tuple[str, RegisteredSchema]]:
        """The schemas `schema` references, by the name it uses for each, transitively and each before
        the schemas that reference it (the order Avro's named types and protoc's imports need)."""
        found: dict[str, RegisteredSchema] = {}

        def visit(s: RegisteredSchema, path: tuple[int, ...]) -> None:
            for ref in s.references:
                target = self.version(ref.subject, ref.version).schema
                if target.id in path:
                    raise SchemaRegistryError(f"schema id {target.id} references itself through {ref.name!r}")
                if ref.name not in found:
                    visit(target, (*path, target.id))
                    found[ref.name] = target

        visit(schema, (schema.id,))
        return list(found.items())


class SchemasTopicReader:
    """Replays `_schemas` records, in offset order, into a `SchemaRegistry`."""

    def __init__(self) -> None:
        self._store: dict[tuple[str, int], SubjectVersion] = {}

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record; a SchemaRegistryError names what is wrong (the caller adds file and offset)."""
        fields = _json_object(key, "key")
        if fields is None:
            raise SchemaRegistryError("a _schemas record without a key")
        keytype = fields.get("keytype")
        if keytype == "SCHEMA":
            self._schema(_subject_version(fields, "key"), _json_object(value, "value"))
        elif keytype in IGNORED_KEY_TYPES:
            return
        elif keytype in ("DELETE_SUBJECT", "CLEAR_SUBJECT"):
            body = _json_object(value, "value")
            if body is None:  # the registry ignores tombstones of these keys
                return
            if keytype == "DELETE_SUBJECT":
                subject, up_to = _subject_version(body, "DELETE_SUBJECT value")
                self._delete_subject(subject, up_to)
            else:
                self._clear_subject(_text(body, "subject", "CLEAR_SUBJECT value"))
        else:
            raise SchemaRegistryError(f"unknown _schemas key type {keytype!r} (known: SCHEMA, DELETE_SUBJECT, ...)")

    def registry(self) -> SchemaRegistry:
        return SchemaRegistry(self._store.values())

    def _schema(self, key: tuple[str, int], body: dict | None) -> None:
        if body is None:  # a hard delete
            self._store.pop(key, None)
            return
        schema_id = body.get("id")
        if not isinstance(schema_id, int) or isinstance(schema_id, bool):
            raise SchemaRegistryError(f"SCHEMA value for {key[0]!r} version {key[1]} has no integer id")
        schema = schema_from_json(body, schema_id)
        self._store[key] = SubjectVersion(key[0], key[1], schema, deleted=body.get("deleted") is True)

    def _delete_subject(self, subject: str, up_to: int) -> None:
        for (s, version), v in list(self._store.items()):
            if s == subject and version <= up_to and not v.deleted:
                self._store[(s, version)] = SubjectVersion(s, version, v.schema, deleted=True)

    def _clear_subject(self, subject: str) -> None:
        # ":.ctx:" with no subject name clears the whole context, as the registry's matchingSubjectPredicate
        whole_context = subject.startswith(":.") and subject.endswith(":")
        for (s, version), v in list(self._store.items()):
            if v.deleted and (s == subject or (whole_context and s.startswith(subject))):
                del self._store[(s, version)]


def read_schemas_topic(records: Iterable[tuple[bytes | None, bytes | None]]) -> SchemaRegistry:
    """The registry that replaying `records` ((key, value) of the `_schemas` topic, offset order) builds."""
    reader = SchemasTopicReader()
    for number, (key, value) in enumerate(records):
        try:
            reader.apply(key, value)
        except SchemaRegistryError as err:
            raise SchemaRegistryError(f"_schemas record {number}: {err.message}") from None
    return reader.registry()


def schema_from_json(body: dict, schema_id: int) -> RegisteredSchema:
    """Schema `schema_id` from a JSON object with "schema", "schemaType" (absent: AVRO) and
    "references": a `_schemas` value, or the registry's answer to GET /schemas/ids/{id}."""
    refs = body.get("references") or []
    if not isinstance(refs, list):
        raise SchemaRegistryError(f"schema id {schema_id}: references is not a list")
    return RegisteredSchema(
        id=schema_id,
        schema_type=body.get("schemaType") or "AVRO",
        schema=_text(body, "schema", f"schema id {schema_id}"),
        references=tuple(_reference(r, schema_id) for r in refs),
    )


def _json_object(data: bytes | None, what: str) -> dict | None:
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise SchemaRegistryError(f"_schemas {what} is not JSON: {err}") from None
    if not isinstance(parsed, dict):
        raise SchemaRegistryError(f"_schemas {what} is JSON but not an object: {bytes(data)[:80]!r}")
    return parsed


def _text(fields: dict, name: str, what: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str):
        raise SchemaRegistryError(f"{what}: {name!r} is missing or not a string")
    return value


def _subject_version(fields: dict, what: str) -> tuple[str, int]:
    version = fields.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaRegistryError(f"{what}: 'version' is missing or not an integer")
    return _text(fields, "subject", what), version


def _reference(ref: object, schema_id: int) -> SchemaReference:
    if not isinstance(ref, dict):
        raise SchemaRegistryError(f"schema id {schema_id}: a reference is not an object: {ref!r}")
    name = _text(ref, "name", f"schema id {schema_id} reference")
    subject, version = _subject_version(ref, f"schema id {schema_id} reference {name!r}")
    return SchemaReference(name, subject, version)
