"""kafkalog on Spark: log directories as DataFrames.

    from kafkalog.spark import local_session, read_records, narrow_scan, segment_inventory

    spark = local_session()                         # or the session a cluster job was given
    df = spark.read.format("kafkalog").load("/var/lib/kafka/data")   # == read_records(spark, ...)
    keys = narrow_scan(spark, "/var/lib/kafka/data", topics=["orders"], start_offset=1000)

Importing this package does not import pyspark; the functions that need it do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..scan.inventory import IOStats, list_segments
    from ..scan.reader import read_task
    from ..scan.scan_plan import ScanFilter, WorkUnit, plan_scan
    from ..scan.views import BATCHES_SCHEMA, NARROW_SCHEMA, RECORDS_SCHEMA
    from .offsets import committed_offsets_df
    from .scan import ScanMetrics, narrow_scan, read_batches, read_records, segment_inventory
    from .session import local_session

# Where each name this package offers is defined: imported when first asked for, so that an executor's
# task, which imports one module of the package (kafkalog.spark.repartition, say), imports only what
# that module needs (not the session's launcher, the offsets' DataFrame, ...).
_EXPORTS = {
    "IOStats": "..scan.inventory",
    "list_segments": "..scan.inventory",
    "read_task": "..scan.reader",
    "ScanFilter": "..scan.scan_plan",
    "WorkUnit": "..scan.scan_plan",
    "plan_scan": "..scan.scan_plan",
    "BATCHES_SCHEMA": "..scan.views",
    "NARROW_SCHEMA": "..scan.views",
    "RECORDS_SCHEMA": "..scan.views",
    "committed_offsets_df": ".offsets",
    "ScanMetrics": ".scan",
    "narrow_scan": ".scan",
    "read_batches": ".scan",
    "read_records": ".scan",
    "segment_inventory": ".scan",
    "local_session": ".session",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def register(spark) -> None:
    """Register the `kafkalog` data source format in `spark` (`local_session` does this). A session kafkalog
    did not start needs it before `format("kafkalog")`: a Spark Connect session (Databricks serverless and
    shared clusters) fails with DATA_SOURCE_NOT_FOUND without it."""
    from .datasource import register as _register

    _register(spark)


def read_log(spark, path: str, **options):
    """The records of the log dir (or partition directory, or segment) at `path`: the DataFrame
    `spark.read.format("kafkalog").options(**options).load(path)` gives, with the format registered first."""
    register(spark)
    return spark.read.format("kafkalog").options(**options).load(path)


__all__ = [
    "local_session",
    "register",
    "read_log",
    "segment_inventory",
    "list_segments",
    "IOStats",
    "narrow_scan",
    "read_records",
    "read_batches",
    "plan_scan",
    "read_task",
    "ScanFilter",
    "ScanMetrics",
    "WorkUnit",
    "NARROW_SCHEMA",
    "RECORDS_SCHEMA",
    "BATCHES_SCHEMA",
    "committed_offsets_df",
]
