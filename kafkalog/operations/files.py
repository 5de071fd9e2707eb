"""What every command reads and writes besides the log directory: its topic configuration
(`--config-file`, `--topic-config-dir`, `--config`, `--topic-config`) and its JSON report, each a local
path or an object-store URI."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from ..config import (
    ConfigResolver,
    did_you_mean,
    parse_config_file,
    parse_java_properties,
    resolver_from,
    topic_properties,
)
from ..errors import ConfigError
from ..storage.fs import LogFileSystem
from ..storage.logdir import LogDir

log = logging.getLogger("kafkalog")


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
    return resolver_from(properties, settings, topic_settings, file=config_file)


def check_topic_settings(resolver: ConfigResolver, log_dir: LogDir) -> None:
    """Settings for a topic `log_dir` does not hold change nothing. Typed ones (`--topic-config`,
    the resolver's `typed_topics`) are an error: the user meant a topic here, likely misspelt.
    A file's are a warning: a cluster's configuration names the topics of every broker, and a log
    directory holds some (Kafka's internal topics, which a configuration often sets, are not named)."""
    held = log_dir.topics
    absent = sorted(set(resolver.per_topic) - held)
    typed = [t for t in absent if t in resolver.typed_topics]
    if typed:
        raise ConfigError(
            f"--topic-config {typed[0]}:...: no partition of topic {typed[0]!r} in this log directory"
            + did_you_mean(typed[0], held),
            file=log_dir.path,
        )
    named = [t for t in absent if not t.startswith("__")]
    if named:
        shown = ", ".join(_with_closest(t, held) for t in named[:5])
        log.warning(
            "the configuration sets %d topic(s) with no partition in %s, whose settings change nothing: %s%s",
            len(named),
            log_dir.path,
            shown,
            ", ..." if len(named) > 5 else "",
        )


def _with_closest(topic: str, held: set[str]) -> str:
    hint = did_you_mean(topic, held)
    return f"{topic!r} ({hint[2:]})" if hint else repr(topic)


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
