"""How `kafkalog export` decodes keys and values: its options turned into spark/decode.py's
`decode_records` (the one decoding path), the schemas found offline, and the records that do not
decode split off into a dead-letter table.

Formats (`--key-format`, `--value-format`): ``bytes`` (or ``binary``, left as they are), ``string``
(UTF-8), ``json`` (a Spark DDL schema, or one inferred from every value), and Confluent's wire format
``avro``, ``protobuf`` and ``json-schema`` (a reader schema by id or subject; default the subject
Confluent's TopicNameStrategy names, ``<topic>-key`` or ``<topic>-value``). Their schemas come from
``--schema-dir`` or a reachable Schema Registry (``--schema-registry URL``) when given, else from the
log dir's own Schema Registry topic (``--schemas-topic``, default ``_schemas``).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from ..codec.schema_registry import SchemaRegistry
from ..codec.value_format import CONFLUENT_FORMATS, ValueFormat
from ..errors import ConfigError
from ..extras import require
from ..spark.decode import DECODE_ERROR, ENVELOPES, ON_ERROR, OPERATION, decode_records, json_format
from ..spark.topic_table import COLUMNS
from ..storage.logdir import LogDir
from ..storage.schemas import HttpSchemaRegistry, load_schema_dir, read_schemas_partition

# the options' names, and the codec's kinds they stand for
VALUE_FORMATS = {
    "bytes": "binary",
    "binary": "binary",
    "string": "string",
    "json": "json",
    "avro": "avro",
    "protobuf": "protobuf",
    "json-schema": "jsonschema",
}
SCHEMAS_TOPIC = "_schemas"
# the modules of the `formats` extra each format decodes with (json-schema values are read as JSON)
_FORMAT_MODULES = {"avro": ("fastavro",), "protobuf": ("google.protobuf", "grpc_tools")}
DEAD_LETTER_SUFFIX = "_dead_letters"
RAW = {"key": "_rawKey", "value": "_rawValue"}  # the bytes a dead letter keeps


@dataclass(frozen=True)
class Decoding:
    """What export decodes, and how (the options of `kafkalog export`, see the module's docstring).

    key_schema, value_schema: for json a Spark DDL string or DataType; for the Confluent formats a
        schema id (an int, or its digits) or a subject.
    envelope: ``debezium``: values are Debezium change events; the table holds their rows.
    on_decode_error: ``fail`` (the export stops, naming topic, partition and offset) or
        ``dead-letter`` (the record goes to the dead-letter table, `dead_letter_path`).
    """

    key_format: str = "bytes"
    value_format: str = "bytes"
    key_schema: object = None
    value_schema: object = None
    schemas_topic: str | None = None
    schema_dir: str | None = None
    schema_registry_url: str | None = None
    envelope: str | None = None
    on_decode_error: str = "fail"
    dead_letter: str | None = None

    def __post_init__(self) -> None:
        for side in ("key", "value"):
            name = getattr(self, f"{side}_format")
            if name not in VALUE_FORMATS:
                raise ConfigError(f"{side} format {name!r}: expected one of {', '.join(VALUE_FORMATS)}")
            if getattr(self, f"{side}_schema") is not None and VALUE_FORMATS[name] in ("binary", "string"):
                raise ConfigError(
                    f"a {side} schema is for json, avro, protobuf or json-schema, not {name}: "
                    f"drop it or change --{side}-format"
                )
        if self.envelope is not None and self.envelope not in ENVELOPES:
            raise ConfigError(f"envelope {self.envelope!r}: expected one of {', '.join(ENVELOPES)}")
        if self.envelope is not None and self.kinds["value"] == "binary":
            raise ConfigError("a Debezium envelope is read from decoded values: give --value-format too")
        if self.on_decode_error not in ON_ERROR:
            raise ConfigError(f"on decode error {self.on_decode_error!r}: expected one of {', '.join(ON_ERROR)}")
        if self.on_decode_error == "dead-letter" and not self.decodes:
            raise ConfigError("--on-decode-error dead-letter with nothing decoded: give --key-format or --value-format")
        if self.dead_letter is not None and self.on_decode_error != "dead-letter":
            raise ConfigError("a dead-letter path is for --on-decode-error dead-letter: give that, or drop the path")
        sources = [
            option
            for option, value in (
                ("--schemas-topic", self.schemas_topic),
                ("--schema-dir", self.schema_dir),
                ("--schema-registry", self.schema_registry_url),
            )
            if value is not None
        ]
        confluent = any(k in CONFLUENT_FORMATS for k in self.kinds.values())
        if not confluent and sources:
            raise ConfigError(f"{sources[0]} is for avro, protobuf or json-schema keys or values")
        if len(sources) > 1:
            raise ConfigError(f"give the schemas by one of {' or '.join(sources)}, not several")
        url = self.schema_registry_url
        if url is not None and urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"--schema-registry {url!r}: expected an http:// or https:// URL")
        for kind in sorted(set(self.kinds.values()) & _FORMAT_MODULES.keys()):
            for module in _FORMAT_MODULES[kind]:
                require(module, f"decoding {kind} keys or values")

    @property
    def kinds(self) -> dict[str, str]:
        return {"key": VALUE_FORMATS[self.key_format], "value": VALUE_FORMATS[self.value_format]}

    @property
    def decodes(self) -> bool:
        return any(k != "binary" for k in self.kinds.values()) or self.envelope is not None

    def dead_letter_path(self, output: str) -> str | None:
        """Where the records that do not decode go: `dead_letter`, else the output's path + ``_dead_letters``."""
        if self.on_decode_error != "dead-letter":
            return None
        return self.dead_letter or output.rstrip("/") + DEAD_LETTER_SUFFIX

    def with_table_schema(self, held) -> Decoding:
        """For an incremental run: json columns without a given schema take the table's (a StructType),
        so that the new rows meet the columns the table has. With an envelope the table holds the rows
        `after` carries: the events are read as plain Debezium envelopes (schemas.enable=false) of them."""
        from dataclasses import replace

        from pyspark.sql import types as T

        given = {}
        for side in ("key", "value"):
            if self.kinds[side] == "json" and getattr(self, f"{side}_schema") is None:
                schema = held[side].dataType
                if side == "value" and self.envelope is not None:
                    schema = T.StructType(
                        [
                            T.StructField("before", schema),
                            T.StructField("after", schema),
                            T.StructField("op", T.StringType()),
                        ]
                    )
                given[f"{side}_schema"] = schema
        return replace(self, **given) if given else self


def schema_registry(decoding: Decoding, log_dir) -> SchemaRegistry | None:
    """The schemas the Confluent formats read with: the schema directory or the Schema Registry at the
    URL, else the log dir's schemas topic; None when no format needs one."""
    asked = [
        f"--{side}-format {decoding.kinds[side]}"
        for side in ("key", "value")
        if decoding.kinds[side] in CONFLUENT_FORMATS
    ]
    if not asked:
        return None
    if decoding.schema_dir is not None:
        return load_schema_dir(decoding.schema_dir)
    if decoding.schema_registry_url is not None:
        return HttpSchemaRegistry(decoding.schema_registry_url)
    topic = decoding.schemas_topic or SCHEMAS_TOPIC
    log = log_dir if isinstance(log_dir, LogDir) else LogDir.open(str(log_dir))
    if (topic, 0) not in set(log.topic_partitions):
        raise ConfigError(
            f"{' and '.join(asked)} need the writers' schemas, and this log dir has no {topic!r} topic: give "
            "--schema-dir DIR (files <id>.avsc, <id>.proto, <id>.json), --schema-registry URL or --schemas-topic "
            "NAME (the registry's kafkastore.topic)",
            file=log.path,
        )
    return read_schemas_partition(log.path, topic)


def _format(spark, decoding: Decoding, side: str, topic: str) -> ValueFormat | None:
    kind, schema = decoding.kinds[side], getattr(decoding, f"{side}_schema")
    if kind == "binary":
        return None  # left as bytes
    if kind == "string":
        return ValueFormat("string")
    if kind == "json":
        if schema is None:
            return ValueFormat("json")  # inferred from every value by decode_records
        if isinstance(schema, str):
            return json_format(spark, schema)
        from pyspark.sql.pandas.types import to_arrow_type

        return ValueFormat("json", json_type=to_arrow_type(schema, timezone="UTC"))
    if schema is None:
        return ValueFormat(kind).for_topic(topic, is_key=side == "key")
    text = str(schema)
    if text.lstrip("-").isdigit():
        return ValueFormat(kind, schema_id=int(text))
    return ValueFormat(kind, subject=text)


def decoded(spark, rows, decoding: Decoding, topic: str, registry: SchemaRegistry | None):
    """`rows` (records with the table's columns) with key and value decoded through `decode_records`.
    With an envelope the `_operation` column says upsert or delete; with dead letters `_decodeError`
    says why a row did not decode, and `_rawKey`/`_rawValue` keep its bytes (`split_dead_letters`).
    `registry`: `schema_registry`'s."""
    if not decoding.decodes:
        return rows
    formats = {side: _format(spark, decoding, side, topic) for side in ("key", "value")}
    if decoding.on_decode_error == "dead-letter":
        for side, raw in RAW.items():
            rows = rows.withColumn(raw, rows[side])
    return decode_records(
        rows,
        key=formats["key"],
        value=formats["value"],
        registry=registry,
        on_error=decoding.on_decode_error,
        envelope=decoding.envelope,
    )


def split_dead_letters(df):
    """(the rows that decoded, as the table has them; the records that did not: the table's columns
    with the key and value bytes as the log holds them, and `error`, why)."""
    from pyspark.sql import functions as F

    failed = F.col(DECODE_ERROR).isNotNull()
    good = df.where(~failed).drop(DECODE_ERROR, *RAW.values())
    dead = df.where(failed).select(
        *[F.col(RAW[c]).alias(c) if c in RAW else F.col(c) for c in COLUMNS], F.col(DECODE_ERROR).alias("error")
    )
    return good, dead


def deleted_after_decoding(df, decoding: Decoding):
    """Latest mode: a Debezium delete (op ``d``) deletes its key as a tombstone does (told before
    decoding); a value that did not decode (a dead letter) deletes nothing."""
    from pyspark.sql import functions as F

    from ..storage.tables import DELETED

    if decoding.envelope is None:
        return df
    return df.withColumn(DELETED, F.col(DELETED) | F.coalesce(F.col(OPERATION) == "delete", F.lit(False))).drop(
        OPERATION
    )
