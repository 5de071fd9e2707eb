"""kafkalog: compact, retain, purge and verify Kafka logs outside a running broker."""

__version__ = "0.1.0"
