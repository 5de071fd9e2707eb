"""What every command reads and writes besides the log directory: its topic configuration
(`--config-file`, `--topic-config-dir`, `--config`, `--topic-config`) and its JSON report, each a local
path or an object-store URI."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..config import ConfigResolver, parse_config_file, parse_java_properties, resolver_from, topic_properties
from ..errors import ConfigError
from ..storage.fs import LogFileSystem


def load_config(
    config_file: str | None = None,
    topic_config_dir: str | None = None,
    settings: Sequence[str] = (),
    topic_settings: Sequence[str] = (),
) -> ConfigResolver:
    """The topic configuration from a Kafka-style properties file (a broker's `server.properties`
    or `kafka-configs.sh --describe --all` output), a directory of `<TOPIC>.properties` files, and
    `KEY=VALUE` / `TOPIC:KEY=VALUE` settings, each over the one before."""
    properties = {}
    if config_file:
        fs, path = LogFileSystem.for_path(config_file)
        properties = parse_config_file(fs.read_bytes(path).decode("utf-8"), file=path)
    if topic_config_dir:
        properties.update(_topic_config_dir(topic_config_dir))
    return resolver_from(properties, settings, topic_settings)


def _topic_config_dir(path_or_uri: str) -> dict[str, str]:
    fs, path = LogFileSystem.for_path(path_or_uri)
    if not fs.is_dir(path):
        raise ConfigError("topic configuration directory does not exist or is not a directory", file=path)
    properties = {}
    for entry in sorted(fs.list_dir(path), key=lambda e: e.name):
        if not entry.is_dir and entry.name.endswith(".properties"):
            topic = entry.name[: -len(".properties")]
            text = fs.read_bytes(entry.path).decode("utf-8")
            properties.update(topic_properties(topic, parse_java_properties(text), file=entry.path))
    return properties


def camel_keys(value):
    """`value` with every dict key in camelCase (`dry_run` -> `dryRun`), lists and nested dicts included:
    the key casing of every JSON report, as Kafka's tools and the DataFrames' columns name fields."""
    if isinstance(value, dict):
        return {_camel(k) if isinstance(k, str) else k: camel_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [camel_keys(v) for v in value]
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def write_report(path_or_uri: str, report: dict) -> None:
    """A command's report as JSON, local or in object storage."""
    fs, path = LogFileSystem.for_path(path_or_uri)
    fs.write_bytes(path, (json.dumps(report, indent=2) + "\n").encode("utf-8"))
