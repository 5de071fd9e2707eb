"""The options of `format("kafkalog")`: their names, their values, and what they select (no Spark).

Option names are case-insensitive, as Spark's are (Spark hands a Python data source its options
with lower-case names); a name kafkalog does not know is an error that names the closest one.

Spark's Kafka source options keep Spark's names and meanings (`Selection`): one of ``subscribe``,
``subscribePattern`` and ``assign``; ``startingOffsets`` / ``endingOffsets``; the timestamp options,
resolved as Kafka's offsetsForTimes (`storage.offsets_for_times`); ``includeHeaders``;
``kafka.isolation.level``. Options that mean nothing for files are accepted with a warning
(`IGNORED`); those whose meaning kafkalog cannot give are errors.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..config import did_you_mean
from ..errors import ConfigError
from ..rules.partition_state import partition_state
from ..storage.logdir import LogDir
from ..storage.offsets_for_times import offset_for_timestamp
from ..storage.producer_state import replay_partition
from ..storage.segment import LogSegment, log_end_offset
from .scan_plan import ScanFilter

# kafkalog's own options (the data source's module documentation says what each does)
KAFKALOG_OPTIONS = (
    "topics",
    "partitions",
    "startingOffset",
    "endingOffset",
    "view",
    "maxBytesPerTask",
    "minPartitions",
    "packUnits",
    "verifyCrc",
    "pushdown",
    "remoteStorageDir",
)
# Spark's Kafka source options that kafkalog gives their meaning (minPartitions is kafkalog's too)
SPARK_KAFKA_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "includeHeaders",
    "failOnDataLoss",
    "kafka.isolation.level",
)
# Spark's Kafka source options that mean nothing here: accepted, with a warning that says why
_ALL_THERE_IS = "a micro-batch of kafkalog's stream reads all there is (a batch read ignores it, as Spark's)"
IGNORED = {
    "maxOffsetsPerTrigger": _ALL_THERE_IS,
    "minOffsetsPerTrigger": _ALL_THERE_IS,
    "maxTriggerDelay": _ALL_THERE_IS,
    "maxRecordsPerPartition": "kafkalog cuts tasks by bytes: see maxBytesPerTask",
    "groupIdPrefix": "no consumer group reads a log dir",
    "kafkaConsumer.pollTimeoutMs": "nothing is polled from a log dir",
    "fetchOffset.numRetries": "offsets are read from files, not fetched",
    "fetchOffset.retryIntervalMs": "offsets are read from files, not fetched",
}
# what Spark itself puts into the options: load(PATH) passes "path"
SPARK_OPTIONS = ("path",)
KNOWN_OPTIONS = KAFKALOG_OPTIONS + SPARK_KAFKA_OPTIONS + tuple(IGNORED) + SPARK_OPTIONS
EARLIEST, LATEST = -2, -1  # in Spark's per-partition JSON offsets
EARLIEST_KIND, LATEST_KIND = "earliest", "latest"


def checked(options: Mapping[str, object]) -> dict[str, str]:
    """The options with lower-case names (as Spark passes them); an unknown name is an error that
    suggests the closest known one, and an option that means nothing here gets a warning."""
    known = {name.lower(): name for name in KNOWN_OPTIONS}
    ignored = {name.lower(): why for name, why in IGNORED.items()}
    lowered: dict[str, str] = {}
    for name, value in options.items():
        key = name.lower()
        if key in lowered:
            raise ConfigError(f"option {name!r} is given twice (option names are case-insensitive)")
        lowered[key] = str(value)
        # a Kafka client's setting is ignored, unless it is a misspelt kafka.isolation.level, which
        # would read uncommitted records (no client setting comes that close: 0.56 at most)
        misspelt = key.startswith("kafka.") and did_you_mean(name, ["kafka.isolation.level"], cutoff=0.8)
        if key in ignored:
            warnings.warn(f"kafkalog: option {known[key]} is ignored: {ignored[key]}", stacklevel=2)
        elif key.startswith("kafka.") and key != "kafka.isolation.level" and not misspelt:
            warnings.warn(f"kafkalog: option {name} is ignored: no Kafka client reads a log dir", stacklevel=2)
        elif key not in known:
            raise ConfigError(f"unknown option {name!r} of the kafkalog data source{did_you_mean(name, KNOWN_OPTIONS)}")
    return lowered


# -- values ----------------------------------------------------------------------------------------


def _json(options: Mapping[str, str], name: str, what: str):
    try:
        return json.loads(options[name.lower()])
    except ValueError:
        raise ConfigError(f"option {name} must be JSON {what}, not {options[name.lower()]!r}") from None


def _partition_values(options: Mapping[str, str], name: str) -> dict[tuple[str, int], int]:
    """Spark's per-partition JSON, {"topic": {"0": value, ...}, ...}, as {(topic, partition): value}."""
    parsed = _json(options, name, '{"topic": {"0": value}}')
    try:
        return {(str(t), int(p)): int(v) for t, values in parsed.items() for p, v in values.items()}
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(
            f'option {name} must be JSON {{"topic": {{"0": value}}}}, not {options[name.lower()]!r}'
        ) from None


def int_option(options: Mapping[str, str], name: str, meant: str | None = None) -> int | None:
    """The integer option `name`; a value that is not one is an error, which suggests `meant` (the
    option of a name close to it that takes such values, e.g. startingOffsets for startingOffset)."""
    value = options.get(name.lower())
    if value is None or value.strip() == "":
        return None
    try:
        return int(value.strip())
    except ValueError:
        hint = f"; did you mean {meant}={value.strip()}?" if meant else ""
        raise ConfigError(f"option {name} must be an integer, not {value!r}{hint}") from None


def _names(options: Mapping[str, str], name: str) -> frozenset[str] | None:
    value = options.get(name.lower())
    return None if value is None else frozenset(item.strip() for item in value.split(",") if item.strip())


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {name} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _one_of(options: Mapping[str, str], names: Sequence[str], what: str) -> str | None:
    given = [name for name in names if name.lower() in options]
    if len(given) > 1:
        raise ConfigError(f"options {' and '.join(given)} both give {what}: give one")
    return given[0] if given else None


@dataclass(frozen=True)
class Bound:
    """Where reading starts or ends, as an option gave it: `kind` is earliest, latest, offset (one
    for every partition), offsets (per partition), timestamp (one for every partition) or
    timestamps (per partition)."""

    kind: str
    value: object = None
    option: str = ""


def _bound(options: Mapping[str, str], end: bool, streaming: bool | None) -> Bound:
    """Where reading starts or ends; `streaming` None: either read (the checks of `load()`)."""
    which = "ending" if end else "starting"
    name = _one_of(
        options,
        [f"{which}Offset", f"{which}Offsets", f"{which}Timestamp", f"{which}OffsetsByTimestamp"],
        f"where reading {'ends' if end else 'starts'}",
    )
    if name is None:
        return Bound(LATEST_KIND if end else EARLIEST_KIND)
    if end and streaming:
        raise ConfigError(f"option {name} is not allowed in a streaming read (as in Spark)")
    if name == f"{which}Offset":  # kafkalog's; Spark's is {which}Offsets, one letter away
        return Bound("offset", int_option(options, name, meant=f"{which}Offsets"), name)
    if name == f"{which}Timestamp":
        timestamp = int_option(options, name)
        if timestamp is None:
            raise ConfigError(f"option {name} must be a timestamp in epoch milliseconds")
        return Bound("timestamp", timestamp, name)
    if name == f"{which}OffsetsByTimestamp":
        return Bound("timestamps", _partition_values(options, name), name)
    text = options[name.lower()].strip()
    if text.lower() in (EARLIEST_KIND, LATEST_KIND):
        kind = text.lower()
        if kind == EARLIEST_KIND and end or kind == LATEST_KIND and not end and streaming is False:
            raise ConfigError(f"option {name}={text} is not allowed in a batch read (as in Spark)")
        return Bound(kind, None, name)
    if re.fullmatch(r"\d+", text):
        raise ConfigError(
            f'option {name} must be earliest, latest or JSON {{"topic": {{"0": offset}}}}, not {text!r}; '
            f"did you mean {which}Offset={text} (kafkalog's: one offset for every partition)?"
        )
    offsets = _partition_values(options, name)
    if any(offset < EARLIEST for offset in offsets.values()):
        raise ConfigError(f"option {name} gives a negative offset other than -2 (earliest) and -1 (latest)")
    refused = EARLIEST if end else LATEST
    if refused in offsets.values() and (end or streaming is False):
        meaning = "earliest" if end else "latest"
        raise ConfigError(f"option {name} gives {refused} ({meaning}): not allowed in a batch read (as in Spark)")
    return Bound("offsets", offsets, name)


# -- the selection ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What the options select, before the log dir is opened (`resolve` opens it)."""

    topics: frozenset | None = None  # topics or subscribe
    pattern: str | None = None  # subscribePattern
    assigned: frozenset | None = None  # assign: (topic, partition) pairs
    partitions: frozenset | None = None  # kafkalog's partitions, of every selected topic
    topic_option: str = "topics"
    starting: Bound = Bound(EARLIEST_KIND)
    ending: Bound = Bound(LATEST_KIND)
    no_match_is_latest: bool = False  # startingOffsetsByTimestampStrategy=latest
    read_committed: bool = False

    @classmethod
    def of(cls, options: Mapping[str, str], streaming: bool | None = False) -> Selection:
        """The selection the (checked) options make for a batch or a streaming read (None: either,
        the checks of `load()`); errors name the option."""
        topic_option = _one_of(options, ["topics", "subscribe", "subscribePattern", "assign"], "the topics to read")
        topics = pattern = assigned = None
        if topic_option in ("topics", "subscribe"):
            topics = _names(options, topic_option)
            if not topics:
                raise ConfigError(f"option {topic_option} names no topic")
        elif topic_option == "subscribePattern":
            pattern = options["subscribepattern"]
            try:
                re.compile(pattern)
            except re.error as err:
                raise ConfigError(f"option subscribePattern is not a regular expression: {err}") from None
        elif topic_option == "assign":
            parsed = _json(options, "assign", '{"topic": [0, 1]}')
            try:
                assigned = frozenset((str(t), int(p)) for t, ps in parsed.items() for p in ps)
            except (AttributeError, TypeError, ValueError):
                raise ConfigError(
                    f'option assign must be JSON {{"topic": [0, 1]}}, not {options["assign"]!r}'
                ) from None
        partitions = None
        if "partitions" in options:
            if assigned is not None:
                raise ConfigError("options assign and partitions both give partitions: give one")
            try:
                partitions = frozenset(int(p) for p in _names(options, "partitions") or ())
            except ValueError:
                raise ConfigError(
                    f"option partitions must be a comma-separated list, not {options['partitions']!r}"
                ) from None
            if not partitions:
                raise ConfigError("option partitions names no partition")
        if bool_option(options, "failOnDataLoss", False):
            raise ConfigError(
                "option failOnDataLoss=true cannot apply: kafkalog reads the offsets the log dir holds, as Spark does "
                "with failOnDataLoss=false; drop the option"
            )
        strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise ConfigError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        isolation = options.get("kafka.isolation.level", "read_uncommitted").strip().lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ConfigError(
                f"option kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}"
            )
        return cls(
            topics,
            pattern,
            assigned,
            partitions,
            topic_option or "topics",
            _bound(options, False, streaming),
            _bound(options, True, streaming),
            strategy == "latest",
            isolation == "read_committed",
        )

    def listing_filter(self) -> ScanFilter:
        """What is known before the log dir is listed: topics, partition numbers, pairs, and
        offsets that are the same for every partition."""
        topics = self.topics
        if self.assigned is not None:
            topics = frozenset(t for t, _ in self.assigned)
        return ScanFilter(
            topics,
            self.partitions,
            self.starting.value if self.starting.kind == "offset" else None,  # type: ignore[arg-type]
            self.ending.value if self.ending.kind == "offset" else None,  # type: ignore[arg-type]
            self.assigned,
        )

    @property
    def needs_partitions(self) -> bool:
        """Whether resolving reads partitions' files (segments, indexes, transactions)."""
        return self.read_committed or "timestamp" in self.starting.kind or "timestamp" in self.ending.kind

    def resolve(self, opened: LogDir) -> ScanFilter:
        """The filter of the selection in `opened`: topics and partitions that must be there (the
        closest topic named otherwise), per-partition offsets of JSON offsets and of timestamps, and
        the aborted transactions and last stable offset of read_committed."""
        pairs = self.topic_partitions(opened.topic_partitions)
        ranges, aborted = [], []
        checkpoints = opened.offset_checkpoints() if self.read_committed else None
        for topic, number in pairs:
            part = opened.partition(topic, number) if self.needs_partitions else None
            segments = part.segments if part is not None else []
            start = self._offset(self.starting, (topic, number), segments, end=False)
            end = self._offset(self.ending, (topic, number), segments, end=True)
            if part is not None and checkpoints is not None:  # read_committed
                stable = partition_state(part, replay_partition, **checkpoints.of((topic, number))).last_stable_offset
                end = stable if end is None else min(end, stable)
                txns = tuple((t.producer_id, t.first_offset, t.last_offset) for t in part.aborted_txns())
                aborted.append(((topic, number), txns))
            if start is not None or end is not None:
                ranges.append(((topic, number), start, end))
        return ScanFilter(
            topic_partitions=frozenset(pairs),
            offset_ranges=tuple(ranges),
            committed_only=self.read_committed,
            aborted=tuple(aborted),
        )

    def topic_partitions(self, present: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
        """The selected (topic, partition) pairs of those `present`; a topic or partition the
        options name that is not present is an error naming the closest topic."""
        topics = sorted({t for t, _ in present})
        option = self.topic_option
        if self.pattern is not None:
            chosen = [tp for tp in present if re.fullmatch(self.pattern, tp[0])]
            if not chosen:
                raise ConfigError(
                    f"option subscribePattern {self.pattern!r} matches no topic of the log dir ({_some(topics)})"
                )
            return self._with_partitions(chosen)
        if self.assigned is not None:
            missing = sorted(self.assigned - set(present))
            if missing:
                topic, number = missing[0]
                hint = "" if topic in topics else did_you_mean(topic, topics)
                raise ConfigError(
                    f"option assign names partition {topic}-{number}, which the log dir does not hold{hint}"
                )
            return sorted(self.assigned)
        if self.topics is not None:
            for topic in sorted(self.topics):
                if topic not in topics:
                    hint = did_you_mean(topic, topics)
                    raise ConfigError(f"option {option} names topic {topic!r}, which the log dir does not hold{hint}")
        return self._with_partitions([tp for tp in present if self.topics is None or tp[0] in self.topics])

    def _with_partitions(self, chosen: list[tuple[str, int]]) -> list[tuple[str, int]]:
        if self.partitions is None:
            return chosen
        numbers = {p for _, p in chosen}
        missing = sorted(self.partitions - numbers)
        if missing:
            raise ConfigError(
                f"option partitions names partition {missing[0]}, which no selected topic has in the log dir"
            )
        return [tp for tp in chosen if tp[1] in self.partitions]

    def _offset(self, bound: Bound, key: tuple[str, int], segments: list[LogSegment], *, end: bool) -> int | None:
        """The offset a bound gives one partition (None: unbounded), from the partition's segments
        for timestamps."""
        if bound.kind in (EARLIEST_KIND, LATEST_KIND, "offset"):
            return None  # unbounded, or the same for every partition (`listing_filter`)
        values: Mapping = bound.value  # type: ignore[assignment]
        if bound.kind in ("offsets", "timestamps"):
            if key not in values:
                raise ConfigError(
                    f"option {bound.option} gives no value for partition {key[0]}-{key[1]}: give every selected "
                    "partition one (as Spark requires)"
                )
            value = values[key]
        else:
            value = bound.value
        if bound.kind == "offsets":
            return None if value in (EARLIEST, LATEST) else value
        found = offset_for_timestamp(segments, value, log_start_offset=segments[0].base_offset if segments else 0)
        if found is not None:
            return found
        if end:
            return None  # no record at or after the time: read to the end, as Spark does
        if self.no_match_is_latest:
            return log_end_offset(segments)
        raise ConfigError(
            f"option {bound.option}: no record of {key[0]}-{key[1]} has a timestamp at or after {value} "
            "(startingOffsetsByTimestampStrategy=latest starts such a partition at its end)"
        )


def _some(names: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "") if names else "it holds none"
