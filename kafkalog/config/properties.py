"""Configuration files as a cluster writes them: a Java .properties file (a broker's server.properties,
or kafkalog's own format with `topic.<TOPIC>.<name>` entries), or the output of
`kafka-configs.sh --describe [--all]`."""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError
from .definitions import UnknownTopicConfig, check_topic_name, warn_unknown


def parse_config_file(text: str, file: str | None = None) -> dict[str, str]:
    """A `--config-file`'s entries for `resolver_from`, read as the cluster wrote it: either a Java
    .properties file (a broker's server.properties, or kafkalog's own format with `topic.<TOPIC>.<name>`
    entries), or the output of `kafka-configs.sh --describe [--all]` for topics and brokers.

    In the describe output, each `All (or Dynamic) configs for topic T are:` section fixes topic T's
    settings to the values listed (`topic.T.<name>`: what the broker reported for T, whatever their
    source); the broker-level synonyms those lines list (STATIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_BROKER_CONFIG) and the lines of `configs for broker N` and `Default configs for brokers`
    sections are broker settings, which every other topic takes. Kafka's defaults (DEFAULT_CONFIG),
    sensitive and null values are skipped; a broker setting given two values by the same source is refused."""
    lines = text.splitlines()
    first = next((line for line in lines if line.strip() and line.lstrip()[0] not in "#!"), "")
    if _HEADER.fullmatch(first.strip()) or _DEFAULT_HEADER.fullmatch(first.strip()):
        return _parse_describe(lines, file)
    return parse_java_properties(text)


def parse_java_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load: `key=value`, `key: value` or `key value`; `#` and `!` comments; a line
    ending in an odd number of backslashes continues on the next (whose leading blanks go); escapes
    (`\\t`, `\\n`, `\\uXXXX`, `\\=` ...). The last of a repeated key wins. A malformed `\\uXXXX`
    is a ConfigError, as Java refuses the file."""
    try:
        return {key: value for key, (value, _) in load_properties(text).items()}
    except ValueError as err:
        raise ConfigError(err.args[0]) from None


_LINE_END = re.compile(r"\r\n|\r|\n")  # Properties' line terminators, no others


def load_properties(text: str) -> dict[str, tuple[str, int]]:
    """`java.util.Properties.load` of `text`: key -> (value, byte position of its line); the last
    of repeated keys wins, as in Java. ValueError(message, position) for a malformed \\uXXXX escape."""
    props: dict[str, tuple[str, int]] = {}
    lines = _physical_lines(text)
    i = 0
    while i < len(lines):
        line, position = lines[i]
        i += 1
        stripped = line.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            continue
        logical = stripped
        while _continues(logical) and i < len(lines):  # an odd number of trailing backslashes
            logical = logical[:-1] + lines[i][0].lstrip(" \t\f")
            i += 1
        if _continues(logical):
            logical = logical[:-1]
        key, value = _split(logical)
        try:
            props[_unescape(key)] = (_unescape(value), position)
        except ValueError:
            raise ValueError(f"malformed \\uxxxx escape in {logical!r}; Kafka refuses the file", position) from None
    return props


def _physical_lines(text: str) -> list[tuple[str, int]]:
    out, start, byte = [], 0, 0
    for m in _LINE_END.finditer(text):
        line = text[start : m.start()]
        out.append((line, byte))
        byte += len(text[start : m.end()].encode("utf-8"))
        start = m.end()
    if start < len(text):
        out.append((text[start:], byte))
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """Key and value as Properties.load separates them: the key ends at the first unescaped '=',
    ':' or blank; blanks and then one '=' or ':' and blanks again separate it from the value."""
    i, n, escaped = 0, len(line), False
    while i < n:
        c = line[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "=: \t\f":
            break
        i += 1
    key, j = line[:i], i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        c = s[i + 1]
        if c == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(s)
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(c, c))
            i += 2
    return "".join(out)


# kafka-configs.sh --describe (kafka.admin.ConfigCommand.describeResourceConfig): a header per entity,
# then `  name=value sensitive=true|false synonyms={SOURCE:name=value, ...}` per configuration.
_HEADER = re.compile(r"(All|Dynamic) configs for (\S+) (.*) are:")
_DEFAULT_HEADER = re.compile(r"Default configs for (\S+) in the cluster are:")
_ENTRY = re.compile(
    r"\s+(?P<name>[^=\s]+)=(?P<value>.*?) sensitive=(?P<sensitive>true|false) "
    r"synonyms=\{(?P<synonyms>.*)\}\s*"
)
# ConfigEntry.ConfigSource, and how a broker setting's sources rank (KafkaConfig's dynamic layering)
_SOURCES = (
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "DYNAMIC_CLIENT_METRICS_CONFIG",
    "DYNAMIC_GROUP_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "UNKNOWN",
)
_SYNONYM = re.compile(r"(?:^|, )({}):".format("|".join(_SOURCES)))
_BROKER_RANK = {"STATIC_BROKER_CONFIG": 1, "DYNAMIC_DEFAULT_BROKER_CONFIG": 2, "DYNAMIC_BROKER_CONFIG": 3}


def _synonyms(text: str) -> list[tuple[str, str, str]]:
    """`A:n=v, B:n=v` → [(source, name, value)]."""
    marks = list(_SYNONYM.finditer(text))
    out = []
    for m, nxt in zip(marks, marks[1:] + [None]):
        body = text[m.end() : nxt.start() if nxt else len(text)]
        name, _, value = body.partition("=")
        out.append((m.group(1), name, value))
    return out


def _parse_describe(lines: list[str], file: str | None) -> dict[str, str]:
    topics: dict[str, str] = {}
    broker: dict[str, tuple[int, str, str]] = {}  # name -> (rank, value, where)

    def broker_setting(rank: int, name: str, value: str, where: str) -> None:
        if rank <= 0 or value == "null":
            return
        old = broker.get(name)
        if old is not None and old[0] == rank and old[1] != value:
            raise ConfigError(
                f"broker configuration {name} is {old[1]} ({old[2]}) and {value} ({where}): "
                "describe one broker, the one whose log directory this is",
                file=file,
            )
        if old is None or rank > old[0]:
            broker[name] = (rank, value, where)

    section: tuple[str, Any] | None = None  # ("topic", T) or ("broker", rank of a line without synonyms)
    for number, line in enumerate(lines, 1):
        where = f"line {number}"
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        header, default = _HEADER.fullmatch(stripped), _DEFAULT_HEADER.fullmatch(stripped)
        entity = header.group(2) if header else default.group(1) if default else None
        if entity is not None:
            if entity == "topic" and header:  # "Default configs for topic ..." is no header Kafka writes
                section = ("topic", header.group(3))
            elif entity in ("broker", "brokers"):
                section = ("broker", _BROKER_RANK["DYNAMIC_DEFAULT_BROKER_CONFIG"] if default else None)
            else:
                raise ConfigError(
                    f"{where}: {stripped!r}: kafkalog reads the configurations of topics and "
                    "brokers, not of " + entity + "s",
                    file=file,
                )
            continue
        entry = _ENTRY.fullmatch(line)
        if entry is None or section is None:
            raise ConfigError(
                f"{where}: expected `  name=value sensitive=... synonyms={{...}}` under a "
                f"`... configs for topic|broker ... are:` line (kafka-configs.sh --describe), got "
                f"{stripped!r}",
                file=file,
            )
        name, value, sensitive = entry.group("name"), entry.group("value"), entry.group("sensitive") == "true"
        synonyms = _synonyms(entry.group("synonyms"))
        if section[0] == "topic":
            try:
                check_topic_name(name, f"{where}, topic {section[1]}", file=file)
            except UnknownTopicConfig as err:  # a Confluent Platform cluster's confluent.* names
                warn_unknown(err)
                continue
            if not sensitive and value != "null":
                topics[f"topic.{section[1]}.{name}"] = value
            for source, synonym, synonym_value in synonyms:
                if source in _BROKER_RANK:
                    broker_setting(_BROKER_RANK[source], synonym, synonym_value, where)
        elif not sensitive:
            rank = section[1] or (_BROKER_RANK.get(synonyms[0][0], 0) if synonyms else 0)
            broker_setting(rank, name, value, where)
    return {**{name: value for name, (_, value, _) in broker.items()}, **topics}
