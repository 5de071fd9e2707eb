"""`spark.read.format("kafkalog").load(LOG_DIR)`: a Spark 4 Python data source over a log directory.

It returns the records view (Spark's Kafka source schema plus kafkalog's batch fields, see
`kafkalog.scan.views.RECORDS_SCHEMA`). Options (all optional; names are case-insensitive, as
Spark's are, and an unknown name fails ``load()`` with the closest known one). Spark's Kafka source
options keep Spark's names and meanings:

======================================  =============================================================================
``subscribe``                           comma-separated topic names (kafkalog's ``topics`` is the same)
``subscribePattern``                    topics whose whole name matches the pattern (Python's ``re``: Java's regex
                                        syntax for the common cases; possessive quantifiers and ``\\p{...}`` differ)
``assign``                              JSON ``{"topic": [0, 1]}``: these partitions only
``startingOffsets``                     ``earliest`` (default) or JSON ``{"topic": {"0": 23, "1": -2}}`` (-2:
                                        earliest), every selected partition named, as Spark requires
``endingOffsets``                       ``latest`` (default) or JSON as above, exclusive (-1: latest)
``startingTimestamp``,                  epoch ms, for every partition or per partition (JSON as above): reading starts
``startingOffsetsByTimestamp``          at the first offset whose record's timestamp is at least it (Kafka's
                                        offsetsForTimes, through each segment's time index); none is an error, or
                                        with ``startingOffsetsByTimestampStrategy=latest`` the partition's end
``endingTimestamp``,                    the same, where reading stops (exclusive); none: the partition's end
``endingOffsetsByTimestamp``
``includeHeaders``                      ``false``: no ``headers`` column (kafkalog's default is ``true``, Spark's
                                        ``false``)
``kafka.isolation.level``               ``read_committed``: no control record and no record of an aborted
                                        transaction (each segment's ``.txnindex``), and nothing from the last
                                        stable offset on (producer state: snapshot and replay, as a broker loads it)
``failOnDataLoss``                      ``false`` only: kafkalog reads the offsets the log dir holds
``minPartitions``                       lower the task size so that at least this many tasks exist where the data
                                        allows (4)
======================================  =============================================================================

At most one of ``topics``, ``subscribe``, ``subscribePattern`` and ``assign`` (none: every topic),
and at most one option for where reading starts and one for where it ends. A topic or partition
the options name that the log dir does not hold is an error naming the closest topic (Spark's
source reads nothing for a missing topic; offline, a typo is the likelier cause). Options that mean
nothing for files are accepted with a warning: the streaming ones (``maxOffsetsPerTrigger``...,
which Spark's batch source ignores too), ``maxRecordsPerPartition``, ``groupIdPrefix``, the consumer's
polling and fetching, and every other ``kafka.*`` (``kafka.bootstrap.servers``...) but a misspelt
``kafka.isolation.level``, which is an error. kafkalog's ``startingOffset`` / ``endingOffset`` and Spark's
``startingOffsets`` / ``endingOffsets`` are one letter apart: a value of the other's kind is an error
naming it. kafkalog's own:

====================  ===================================================================================
``topics``            comma-separated topic names
``partitions``        comma-separated partition numbers (of every selected topic)
``startingOffset``    first offset to read, inclusive (every selected partition)
``endingOffset``      offset to stop before, exclusive (every selected partition)
``view``              ``records`` (default), ``narrow`` (the compaction view) or ``batches`` (one row per batch)
``maxBytesPerTask``   bytes per task, and the size above which a segment is cut at index entries (64 MiB)
``packUnits``         ``true`` (default) packs small segments into one task; ``false``: one partition per work unit
``verifyCrc``         ``true`` (default) checks each batch's CRC before decoding it
``pushdown``          take filters on topic, partition and offset from the query (default: see below)
``remoteStorageDir``  tiered storage: a LocalTieredStorage directory (on the log dir's filesystem) whose
                      remote segments are read before each partition's local ones, each offset once
====================  ===================================================================================

Offsets and timestamps are resolved when a query is planned (`source_options.Selection.resolve`),
from the log dir as it is then; segments outside the resolved offsets are never opened. Spark's
Kafka source never returns control records; kafkalog's records view does (``isControl``), except
with ``read_committed``. Column pruning is not possible: Spark 4's Python data source API tells a
reader no query's columns, so every record is decoded whole (``includeHeaders=false`` only drops the
column).

Filters in the query on ``topic`` (=, IN), ``partition`` (=, IN) and ``offset`` (=, <, <=, >, >=;
``IN`` prunes by its smallest and largest value and stays with Spark) prune segments before any is
opened, exactly as the options do; the two combine, and ``explain("formatted")`` lists the pushed
ones (Spark's ``PushedFilters``; the Python data source API has no description of its own). Pushdown
needs ``spark.sql.python.filterPushdown.enabled``, which `register` turns on, and a Spark that keeps
pushed state per scan. Spark 4.1 to 4.3 do not: they store the read planned during pushdown on the
data source instance that a DataFrame and every DataFrame derived from it share, and a later query
with no filter to push reuses it, so after ``df.filter("partition = 1").count()`` the query
``df.count()`` would read only partition 1. Nothing in Python can prevent that (no Python code runs
when that later query is planned), so there `register` leaves pushdown off and refuses
``pushdown=true``; so does a Spark Connect client, which cannot check its server (it has no JVM
gateway). Options always prune, whatever the Spark version.

``spark.readStream.format("kafkalog")`` reads a log dir that grows, in micro-batches whose offsets are
Kafka's, in the form of Spark's Kafka source's (``{"topic": {"0": next offset}}``): each micro-batch
lists the log dir again and reads every partition up to its end (with ``read_committed``, its last
stable offset). ``startingOffsets`` (and the timestamp options) say where a new query starts, as in
Spark, but the default is ``earliest`` (Spark's streaming default is ``latest``); ending options are
refused, as Spark refuses them in a stream; a partition that appears is read from its first offset.

`partitions()` returns one InputPartition per task of `plan_scan`: a work unit (a segment or a byte
range of a large one) or, with ``packUnits``, several small ones. `read()` yields Arrow record batches.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from .. import tuning
from ..errors import ConfigError
from ..scan.inventory import open_log_dir
from ..scan.reader import read_task
from ..scan.scan_plan import ScanFilter, plan_scan
from ..scan.source_options import (
    EARLIEST_KIND,
    LATEST,
    LATEST_KIND,
    Bound,
    Selection,
    bool_option,
    checked,
    int_option,
)
from ..scan.views import SCHEMAS
from ..storage.segment import log_end_offset
from .context import spark_context
from .scan import spark_schema

NAME = "kafkalog"
DEFAULT_MIN_PARTITIONS = 4
_VIEWS = {"records": "records", "narrow": "narrow", "keys": "narrow", "batches": "batches"}


def view_of(options) -> str:
    view = str(options.get("view", "records")).strip().lower()
    if view not in _VIEWS:
        raise ConfigError(f"option view must be one of {sorted(_VIEWS)}, not {view!r}")
    if "includeheaders" in options and _VIEWS[view] != "records":
        raise ConfigError(f"option includeHeaders applies to the records view, not to view={view}")
    return _VIEWS[view]


def include_headers(options) -> bool:
    """Whether the records view has its headers column: kafkalog's default is true (Spark's false)."""
    return bool_option(options, "includeHeaders", True)


def schema_of(options):
    """The Spark schema of the (checked) options' view."""
    schema = SCHEMAS[view_of(options)]
    if schema is SCHEMAS["records"] and not include_headers(options):
        schema = schema.remove(schema.get_field_index("headers"))
    return spark_schema(schema)


class KafkaLogPartition(InputPartition):
    """One task: a tuple of work units and the filter they were planned with.

    `read()` takes the filter from here, not from the reader: Spark may hand the same reader
    object, with filters pushed for another query over the same relation, to a later read."""

    def __init__(self, index: int, units: tuple, flt: ScanFilter):
        super().__init__(index)
        self.units = units
        self.flt = flt


class KafkaLogReader(DataSourceReader):
    """Plans on the driver (metadata only) and decodes each partition's units on an executor."""

    def __init__(self, options, view: str, streaming: bool = False):
        path = options.get("path")
        if not path:
            raise ConfigError('the kafkalog data source needs a log directory: .load("LOG_DIR")')
        self.root = str(path)
        self.view = view
        self.selection = Selection.of(options, streaming)
        self.flt = self.selection.listing_filter()
        self.headers = include_headers(options)
        self.max_bytes = int_option(options, "maxBytesPerTask") or tuning.MAX_BYTES_PER_TASK
        self.min_partitions = int_option(options, "minPartitions") or DEFAULT_MIN_PARTITIONS
        self.pack = bool_option(options, "packUnits", True)
        self.verify_crc = bool_option(options, "verifyCrc", True)
        self.remote_storage = options.get("remotestoragedir")

    def partitions(self):
        plan = plan_scan(
            self.root,
            self.flt,
            max_bytes_per_task=self.max_bytes,
            min_tasks=self.min_partitions,
            pack=self.pack,
            remote_storage=self.remote_storage,
            resolve=self.selection.resolve,
        )
        return [KafkaLogPartition(i, task, plan.flt) for i, task in enumerate(plan.tasks)]

    def read(self, partition):
        units = getattr(partition, "units", None)
        if not units:  # Spark reads one empty partition when there is nothing to read
            return iter(())
        batches = read_task(self.root, units, self.view, partition.flt, verify_crc=self.verify_crc)
        # Spark's Kafka source without includeHeaders has no headers column; the codec decodes them anyway
        return batches if self.headers else (batch.drop_columns(["headers"]) for batch in batches)


class KafkaLogStreamReader(DataSourceStreamReader):
    """`readStream` over a log dir that grows: micro-batches between offsets that are Kafka's, in the
    form of Spark's Kafka source's, {"topic": {"partition": the next offset to read}}. The log dir is
    listed anew for each micro-batch; a partition that appears is read from its first offset."""

    def __init__(self, options, view: str):
        self.batch = KafkaLogReader(options, view, streaming=True)  # the settings and `read`
        # where a micro-batch ends: the partitions and, with read_committed, the last stable offsets
        # (a start by timestamp matters to the first offsets only)
        self.ends = replace(self.batch.selection, starting=Bound(EARLIEST_KIND))

    def initialOffset(self) -> dict:
        selection, opened = self.batch.selection, open_log_dir(self.batch.root)
        flt = selection.resolve(opened)
        offsets: dict = {}
        for topic, number in sorted(flt.topic_partitions or ()):
            segments = opened.partition(topic, number).segments
            starting = selection.starting
            given: dict = starting.value if starting.kind == "offsets" else {}  # type: ignore[assignment]
            if starting.kind == LATEST_KIND or given.get((topic, number)) == LATEST:
                offset = log_end_offset(segments)
            else:
                start = flt.for_partition(topic, number).start_offset
                offset = start if start is not None else segments[0].base_offset if segments else 0
            offsets.setdefault(topic, {})[str(number)] = offset
        return offsets

    def latestOffset(self, start=None, limit=None) -> dict:
        # Spark 4.2 passes the start and a read limit (admission control), 4.1 neither: all that is there
        opened = open_log_dir(self.batch.root)
        flt = self.ends.resolve(opened)
        offsets: dict = {}
        for topic, number in sorted(flt.topic_partitions or ()):
            end = log_end_offset(opened.partition(topic, number).segments)
            stable = flt.for_partition(topic, number).end_offset  # with read_committed, the last stable offset
            if self.ends.read_committed and stable is not None:
                end = min(end, stable)
            offsets.setdefault(topic, {})[str(number)] = end
        return offsets

    def partitions(self, start: dict, end: dict):
        ranges = tuple(
            ((topic, int(number)), start.get(topic, {}).get(number), offset)
            for topic, numbers in end.items()
            for number, offset in numbers.items()
            if start.get(topic, {}).get(number) != offset
        )
        if not ranges:
            return []
        flt = ScanFilter(topic_partitions=frozenset(key for key, _, _ in ranges), offset_ranges=ranges)
        if self.ends.read_committed:
            committed = self.ends.resolve(open_log_dir(self.batch.root))
            flt = ScanFilter(
                topic_partitions=flt.topic_partitions,
                offset_ranges=ranges,
                committed_only=True,
                aborted=committed.aborted,
            )
        plan = plan_scan(
            self.batch.root,
            flt,
            max_bytes_per_task=self.batch.max_bytes,
            min_tasks=self.batch.min_partitions,
            pack=self.batch.pack,
            remote_storage=self.batch.remote_storage,
        )
        return [KafkaLogPartition(i, task, plan.flt) for i, task in enumerate(plan.tasks)]

    def read(self, partition):
        return self.batch.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge: the log dir is only read."""


class KafkaLogPushdownReader(KafkaLogReader):
    """The reader with filter pushdown on topic, partition and offset."""

    def pushFilters(self, filters):
        offset_column = self.view in ("records", "narrow")
        for flt in filters:
            pushed = self._push(flt, offset_column)
            if pushed is None:
                yield flt  # Spark evaluates it
                continue
            narrowed, exact = pushed
            self.flt = self.flt.and_(narrowed)
            if not exact:
                yield flt

    @staticmethod
    def _push(flt, offset_column: bool) -> tuple[ScanFilter, bool] | None:
        """The ScanFilter a pushed filter amounts to and whether it is exact, or None."""
        if not isinstance(flt, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
            return None
        column = flt.attribute
        if len(column) != 1:
            return None
        name = column[0]
        if name == "topic":
            if isinstance(flt, EqualTo) and isinstance(flt.value, str):
                return ScanFilter(topics=frozenset([flt.value])), True
            if isinstance(flt, In) and all(isinstance(v, str) for v in flt.value):
                return ScanFilter(topics=frozenset(flt.value)), True
            return None
        if name not in ("partition", "offset") or (name == "offset" and not offset_column):
            return None
        values = flt.value if isinstance(flt, In) else (flt.value,)
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        if name == "partition":
            if isinstance(flt, EqualTo):
                return ScanFilter(partitions=frozenset([flt.value])), True
            if isinstance(flt, In):
                return ScanFilter(partitions=frozenset(flt.value)), True
            return None  # a range of partition numbers: listing is cheap, Spark filters the rows
        if isinstance(flt, EqualTo):
            return ScanFilter(start_offset=flt.value, end_offset=flt.value + 1), True
        if isinstance(flt, GreaterThan):
            return ScanFilter(start_offset=flt.value + 1), True
        if isinstance(flt, GreaterThanOrEqual):
            return ScanFilter(start_offset=flt.value), True
        if isinstance(flt, LessThan):
            return ScanFilter(end_offset=flt.value), True
        if isinstance(flt, LessThanOrEqual):
            return ScanFilter(end_offset=flt.value + 1), True
        if isinstance(flt, In):
            return ScanFilter(start_offset=min(values), end_offset=max(values) + 1), False
        return None


class KafkaLogDataSource(DataSource):
    """The `kafkalog` data source; see the module documentation for its options."""

    pushdown_default = True

    def __init__(self, options):
        super().__init__(options)
        # a bad option fails load(), not the first query (the log dir is read when a query is planned)
        self.checked = checked(options)
        Selection.of(self.checked, streaming=None)
        self.pushdown()

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        return schema_of(self.checked)

    def reader(self, schema):
        view = view_of(self.checked)
        return (KafkaLogPushdownReader if self.pushdown() else KafkaLogReader)(self.checked, view)

    def pushdown(self) -> bool:
        return bool_option(self.checked, "pushdown", self.pushdown_default)

    def streamReader(self, schema):
        return KafkaLogStreamReader(self.checked, view_of(self.checked))


class KafkaLogDataSourceWithoutPushdown(KafkaLogDataSource):
    """The `kafkalog` data source where Spark shares pushed-down state between scans, or where
    kafkalog cannot tell: no pushdown, and `pushdown=true` refused (it would give wrong answers)."""

    pushdown_default = False

    def pushdown(self) -> bool:
        if bool_option(self.checked, "pushdown", False):
            raise ConfigError(PUSHDOWN_REFUSED)
        return False


PUSHDOWN_REFUSED = (
    "option pushdown=true is refused: this Spark keeps the read planned for a filtered query on the data source "
    "that every query of the same load() shares (Spark 4.1 to 4.3), or kafkalog cannot check it (a Spark Connect "
    "client), so a later query of that DataFrame could read only what an earlier filter selected; filter with the "
    "options topics, partitions, startingOffset and endingOffset instead"
)


def pushdown_is_scan_scoped(spark) -> bool:
    """Whether this Spark keeps the read planned during filter pushdown in the scan (safe) rather
    than on the data source instance that derived DataFrames share (Spark 4.3.0: not safe). The
    check looks at Spark's classes through the JVM gateway; a Spark Connect client has none, and
    stays on the safe side like a layout the check does not know."""
    context = spark_context(spark)
    if context is None:
        return False
    try:
        cls = context._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
        )
        return not any(method.getName() == "setReadInfo" for method in cls.getMethods())
    except Exception:  # a layout this check does not know
        return False


def register(spark) -> None:
    """Register the `kafkalog` format in `spark` and enable Python filter pushdown, which it uses
    by default where this Spark scopes pushed state to the scan (see the module documentation)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    source = KafkaLogDataSource if pushdown_is_scan_scoped(spark) else KafkaLogDataSourceWithoutPushdown
    spark.dataSource.register(source)
