"""kafkalog: compact, retain, purge and verify Kafka logs outside a running broker.

    import kafkalog

    spark = kafkalog.session()                               # the active SparkSession, else local[2]
    df = kafkalog.read(spark, "/var/lib/kafka/data")         # the records, as Spark's Kafka source has them
    config = kafkalog.resolver_from(settings=["cleanup.policy=compact"])   # or {"cleanup.policy": "compact"}
    result = kafkalog.compact(spark, "/var/lib/kafka/data", config=config, now=1700100000000, dry_run=True)
    result.to_dict()

Every command has one shape, `kafkalog.X(spark, log_dir, *, config=..., now=..., **options)`, and a
result with `to_dict()` (kafkalog/api.py): compact, plan, retain, purge, validate, export, txn_report
and verify_purge.

Importing the package imports neither pyspark nor any layer: each name below is imported on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name: (module, attribute). Looked up by name, not imported here, so that `import kafkalog` stays light
# (no pyspark, no JVM) and this module stays below every layer (cli/ and operations/purge.py read
# __version__ from it): tests/test_layers.py checks each entry.
_FRONT_DOOR = {
    "compact": ("kafkalog.api", "compact"),
    "plan": ("kafkalog.api", "plan"),
    "retain": ("kafkalog.api", "retain"),
    "purge": ("kafkalog.api", "purge"),
    "validate": ("kafkalog.api", "validate"),
    "export": ("kafkalog.api", "export"),
    "txn_report": ("kafkalog.api", "txn_report"),
    "verify_purge": ("kafkalog.api", "verify_purge"),
    "topic_table": ("kafkalog.operations.export", "topic_table"),
    "read": ("kafkalog.spark", "read_log"),
    "register": ("kafkalog.spark", "register"),
    "session": ("kafkalog.spark.session", "local_session"),
    "local_session": ("kafkalog.spark.session", "local_session"),
    "resolver_from": ("kafkalog.config", "resolver_from"),
    "LogDir": ("kafkalog.storage.logdir", "LogDir"),
    "KafkaLogError": ("kafkalog.errors", "KafkaLogError"),
}

__all__ = list(_FRONT_DOOR)


def __getattr__(name: str):
    if name not in _FRONT_DOOR:
        raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
    module, attribute = _FRONT_DOOR[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # the next lookup finds it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
