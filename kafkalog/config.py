"""Kafka's topic configuration: names, defaults, broker synonyms and validation.

A topic's effective configuration is built as Kafka builds it: Kafka's defaults, overridden by the
broker's `log.*` settings, overridden by settings for every topic, overridden by a topic's own.
Values are validated with Kafka's rules, and the error says the rule, as Kafka's ConfigException does.
Two names of the KIP-68 proposal are added for consumed retention (never part of Kafka).

Every topic and broker configuration name Kafka 4.x defines is accepted (the lists below); the ones
kafkalog has no use for are ignored. A name Kafka does not define is refused where it is typed
(`--config`, `--topic-config`), with the closest known name suggested; in a configuration file it is
a warning and the name is ignored, as Kafka's broker logs "The configuration 'x' was supplied but
isn't a known config" and starts (a Confluent Platform `server.properties` holds `confluent.*` names).
`parse_config_file` reads a configuration exported from a cluster as it is: a `server.properties` or
the output of `kafka-configs.sh --describe [--all]`.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, KafkaLogError

log = logging.getLogger("kafkalog.config")

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
MIB = 1024 * 1024

# -- Kafka's configuration names -------------------------------------------------------------------------
# Apache Kafka 4.x's own definitions, read from its released jars (org.apache.kafka:kafka_2.13 and
# its modules) of 4.0.0, 4.1.0, 4.2.0 and 4.3.1 (a name any of them defines is here):
# - topic names: LogConfig.configNames() (storage: org.apache.kafka.storage.internals.log.LogConfig,
#   the names of org.apache.kafka.common.config.TopicConfig, and LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG
#   since 4.1);
# - broker names: KafkaConfig.configDef(), which is AbstractKafkaConfig.CONFIG_DEF, the merge of the
#   classes named below (4.3.1's grouping), plus DynamicConfig.Broker's dynamic-only quota names.
KAFKA_TOPIC_CONFIG_NAMES = frozenset(
    """
    cleanup.policy compression.gzip.level compression.lz4.level compression.type compression.zstd.level
    delete.retention.ms file.delete.delay.ms flush.messages flush.ms follower.replication.throttled.replicas
    index.interval.bytes internal.segment.bytes leader.replication.throttled.replicas local.retention.bytes
    local.retention.ms max.compaction.lag.ms max.message.bytes message.timestamp.after.max.ms
    message.timestamp.before.max.ms message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms
    min.insync.replicas preallocate remote.log.copy.disable remote.log.delete.on.disable remote.storage.enable
    retention.bytes retention.ms segment.bytes segment.index.bytes segment.jitter.ms segment.ms
    unclean.leader.election.enable
""".split()
)

KAFKA_BROKER_CONFIG_NAMES_BY_CLASS = {
    "RemoteLogManagerConfig": """
        log.local.retention.bytes log.local.retention.ms remote.fetch.max.wait.ms
        remote.list.offsets.request.timeout.ms remote.log.index.file.cache.total.size.bytes
        remote.log.index.file.cache.ttl.ms remote.log.manager.copier.thread.pool.size
        remote.log.manager.copy.max.bytes.per.second remote.log.manager.copy.quota.window.num
        remote.log.manager.copy.quota.window.size.seconds remote.log.manager.expiration.thread.pool.size
        remote.log.manager.fetch.max.bytes.per.second remote.log.manager.fetch.quota.window.num
        remote.log.manager.fetch.quota.window.size.seconds remote.log.manager.follower.thread.pool.size
        remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.max.ms
        remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter
        remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
        remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
        remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
        remote.log.reader.max.pending.tasks remote.log.reader.threads remote.log.storage.manager.class.name
        remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
        remote.log.storage.system.enable""",
    "ServerConfigs": """
        authorizer.class.name background.threads broker.id broker.rack compression.gzip.level
        compression.lz4.level compression.type compression.zstd.level config.providers
        controlled.shutdown.enable delete.topic.enable early.start.listeners fetch.max.bytes
        max.incremental.fetch.session.cache.slots max.request.partition.size.limit message.max.bytes
        num.io.threads num.replica.alter.log.dirs.threads request.timeout.ms
        socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms unstable.api.versions.enable
        unstable.feature.versions.enable""",
    "KRaftConfigs": """
        broker.heartbeat.interval.ms broker.session.timeout.ms controller.listener.names
        controller.performance.always.log.threshold.ms controller.performance.sample.period.ms
        initial.broker.registration.timeout.ms node.id process.roles sasl.mechanism.controller.protocol
        server.max.startup.time.ms""",
    "MetadataLogConfig": """
        internal.metadata.delete.delay.millis internal.metadata.log.segment.bytes
        internal.metadata.max.batch.size.in.bytes metadata.log.dir
        metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
        metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
        metadata.max.retention.bytes metadata.max.retention.ms""",
    "SocketServerConfigs": """
        advertised.listeners connection.failed.authentication.delay.ms connections.max.idle.ms
        listener.security.protocol.map listeners max.connection.creation.rate max.connections
        max.connections.per.ip max.connections.per.ip.overrides num.network.threads queued.max.request.bytes
        queued.max.requests socket.listen.backlog.size socket.receive.buffer.bytes socket.request.max.bytes
        socket.send.buffer.bytes""",
    "ReplicationConfigs": """
        auto.leader.rebalance.enable controller.socket.timeout.ms default.replication.factor
        delete.records.purgatory.purge.interval.requests fetch.purgatory.purge.interval.requests
        follower.fetch.last.tiered.offset.enable inter.broker.listener.name
        leader.imbalance.check.interval.seconds num.replica.fetchers producer.purgatory.purge.interval.requests
        replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
        replica.fetch.response.max.bytes replica.fetch.wait.max.ms replica.high.watermark.checkpoint.interval.ms
        replica.lag.time.max.ms replica.selector.class replica.socket.receive.buffer.bytes
        replica.socket.timeout.ms security.inter.broker.protocol unclean.leader.election.enable
        unclean.leader.election.interval.ms""",
    "GroupCoordinatorConfig": """
        group.consumer.assignment.interval.ms group.consumer.assignors group.consumer.heartbeat.interval.ms
        group.consumer.max.assignment.interval.ms group.consumer.max.heartbeat.interval.ms
        group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
        group.consumer.min.assignment.interval.ms group.consumer.min.heartbeat.interval.ms
        group.consumer.min.session.timeout.ms group.consumer.regex.refresh.interval.ms
        group.consumer.session.timeout.ms group.coordinator.append.linger.ms
        group.coordinator.background.threads group.coordinator.cached.buffer.max.bytes
        group.coordinator.rebalance.protocols group.coordinator.threads group.initial.rebalance.delay.ms
        group.max.session.timeout.ms group.max.size group.min.session.timeout.ms
        group.share.assignment.interval.ms group.share.assignors group.share.heartbeat.interval.ms
        group.share.initialize.retry.interval.ms group.share.max.assignment.interval.ms
        group.share.max.heartbeat.interval.ms group.share.max.session.timeout.ms group.share.max.size
        group.share.min.assignment.interval.ms group.share.min.heartbeat.interval.ms
        group.share.min.session.timeout.ms group.share.session.timeout.ms group.streams.assignment.interval.ms
        group.streams.heartbeat.interval.ms group.streams.initial.rebalance.delay.ms
        group.streams.max.assignment.interval.ms group.streams.max.heartbeat.interval.ms
        group.streams.max.session.timeout.ms group.streams.max.size group.streams.max.standby.replicas
        group.streams.min.assignment.interval.ms group.streams.min.heartbeat.interval.ms
        group.streams.min.session.timeout.ms group.streams.num.standby.replicas group.streams.session.timeout.ms
        offset.metadata.max.bytes offsets.commit.timeout.ms offsets.load.buffer.size
        offsets.retention.check.interval.ms offsets.retention.minutes offsets.topic.compression.codec
        offsets.topic.num.partitions offsets.topic.replication.factor offsets.topic.segment.bytes""",
    "CleanerConfig": """
        log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms log.cleaner.enable
        log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second
        log.cleaner.max.compaction.lag.ms log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms
        log.cleaner.threads""",
    "LogConfig.SERVER_CONFIG_DEF": """
        alter.config.policy.class.name auto.create.topics.enable cordoned.log.dirs
        create.topic.policy.class.name log.cleanup.policy log.dir log.dir.failure.timeout.ms log.dirs
        log.flush.interval.messages log.flush.interval.ms log.flush.offset.checkpoint.interval.ms
        log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes
        log.index.size.max.bytes log.initial.task.delay.ms log.message.timestamp.after.max.ms
        log.message.timestamp.before.max.ms log.message.timestamp.type log.preallocate log.retention.bytes
        log.retention.check.interval.ms log.retention.hours log.retention.minutes log.retention.ms
        log.roll.hours log.roll.jitter.hours log.roll.jitter.ms log.roll.ms log.segment.bytes
        log.segment.delete.delay.ms min.insync.replicas num.partitions num.recovery.threads.per.data.dir""",
    "ShareGroupConfig": """
        group.share.delivery.count.limit group.share.max.delivery.count.limit
        group.share.max.partition.max.record.locks group.share.max.record.lock.duration.ms
        group.share.max.share.sessions group.share.min.delivery.count.limit
        group.share.min.partition.max.record.locks group.share.min.record.lock.duration.ms
        group.share.partition.max.record.locks group.share.persister.class.name
        group.share.record.lock.duration.ms share.fetch.purgatory.purge.interval.requests""",
    "ShareCoordinatorConfig": """
        share.coordinator.append.linger.ms share.coordinator.cached.buffer.max.bytes
        share.coordinator.cold.partition.snapshot.interval.ms share.coordinator.load.buffer.size
        share.coordinator.snapshot.update.records.per.snapshot share.coordinator.state.topic.compression.codec
        share.coordinator.state.topic.min.isr share.coordinator.state.topic.num.partitions
        share.coordinator.state.topic.prune.interval.ms share.coordinator.state.topic.replication.factor
        share.coordinator.state.topic.segment.bytes share.coordinator.threads share.coordinator.write.timeout.ms""",
    "TransactionLogConfig": """
        producer.id.expiration.check.interval.ms producer.id.expiration.ms
        transaction.partition.verification.enable transaction.state.log.load.buffer.size
        transaction.state.log.min.isr transaction.state.log.num.partitions
        transaction.state.log.replication.factor transaction.state.log.segment.bytes""",
    "TransactionStateManagerConfig": """
        transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
        transaction.remove.expired.transaction.cleanup.interval.ms transaction.two.phase.commit.enable
        transactional.id.expiration.ms""",
    "QuorumConfig": """
        controller.quorum.append.linger.ms controller.quorum.auto.join.enable
        controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
        controller.quorum.election.timeout.ms controller.quorum.fetch.max.bytes
        controller.quorum.fetch.snapshot.max.bytes controller.quorum.fetch.timeout.ms
        controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.quorum.voters""",
    "MetricConfigs": """
        kafka.metrics.polling.interval.secs kafka.metrics.reporters metric.reporters metrics.num.samples
        metrics.recording.level metrics.sample.window.ms telemetry.max.bytes""",
    "QuotaConfig": """
        alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
        client.quota.callback.class controller.quota.window.num controller.quota.window.size.seconds
        quota.window.num quota.window.size.seconds replication.quota.window.num
        replication.quota.window.size.seconds""",
    "BrokerSecurityConfigs": """
        connections.max.reauth.ms principal.builder.class sasl.client.callback.handler.class
        sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
        sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
        sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
        sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
        sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
        sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms sasl.mechanism.inter.broker.protocol
        sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
        sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
        sasl.oauthbearer.assertion.claim.jti.include sasl.oauthbearer.assertion.claim.nbf.seconds
        sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
        sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
        sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
        sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
        sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
        sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
        sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
        sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class sasl.oauthbearer.scope
        sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
        sasl.server.callback.handler.class sasl.server.max.receive.size security.providers ssl.allow.dn.changes
        ssl.allow.san.changes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
        ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
        ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location ssl.keystore.password
        ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider ssl.secure.random.implementation
        ssl.trustmanager.algorithm ssl.truststore.certificates ssl.truststore.location ssl.truststore.password
        ssl.truststore.type""",
    "DelegationTokenManagerConfigs": """
        delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
        delegation.token.max.lifetime.ms delegation.token.secret.key""",
    "AddPartitionsToTxnConfig": """
        add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms""",
    "DynamicConfig.Broker (dynamic only)": """
        follower.replication.throttled.rate leader.replication.throttled.rate
        replica.alter.log.dirs.io.max.bytes.per.second""",
    "4.0 to 4.2 only (removed in a later 4.x)": """
        group.coordinator.new.enable group.share.enable group.share.max.groups
        internal.metadata.max.fetch.size.in.bytes metadata.log.segment.min.bytes share.fetch.max.fetch.records""",
}
KAFKA_BROKER_CONFIG_NAMES = frozenset(n for names in KAFKA_BROKER_CONFIG_NAMES_BY_CLASS.values() for n in names.split())
# Configurations of Kafka's own plugins that a server.properties holds beside the broker's: the
# StandardAuthorizer's (org.apache.kafka.metadata.authorizer.StandardAuthorizer, KRaft's authorizer).
KAFKA_PLUGIN_CONFIG_NAMES = frozenset({"super.users", "allow.everyone.if.no.acl.found"})
# Prefixes under which Kafka reads configurations it does not name one by one: per listener
# (ListenerName.configPrefix), config providers (AbstractConfig.CONFIG_PROVIDERS_CONFIG), metrics
# context (CommonClientConfigs.METRICS_CONTEXT_PREFIX); and the remote storage and remote log metadata
# managers' own configurations, under the prefix these two broker settings name (their defaults here).
KAFKA_CONFIG_PREFIXES = ("listener.name.", "config.providers.", "metrics.context.")
REMOTE_LOG_PREFIX_CONFIGS = {
    "remote.log.storage.manager.impl.prefix": "rsm.config.",
    "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
}
# Names Kafka 3.9.1 defines and 4.0 removed (ZooKeeper mode, message format v0/v1 settings, ...): an
# export from a 3.x cluster still has them. Accepted with a note, and ignored, as Kafka 4.x would.
KAFKA_REMOVED_IN_4_0 = frozenset(
    """
    auto.include.jmx.reporter broker.id.generation.enable control.plane.listener.name
    controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms delegation.token.master.key
    eligible.leader.replicas.enable inter.broker.protocol.version leader.imbalance.per.broker.percentage
    log.message.downconversion.enable log.message.format.version log.message.timestamp.difference.max.ms
    message.downconversion.enable message.format.version message.timestamp.difference.max.ms
    offsets.commit.required.acks password.encoder.cipher.algorithm password.encoder.iterations
    password.encoder.key.length password.encoder.keyfactory.algorithm password.encoder.old.secret
    password.encoder.secret reserved.broker.max.id zookeeper.clientCnxnSocket zookeeper.connect
    zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests zookeeper.metadata.migration.enable
    zookeeper.metadata.migration.min.batch.size zookeeper.session.timeout.ms zookeeper.set.acl
    zookeeper.ssl.cipher.suites zookeeper.ssl.client.enable zookeeper.ssl.crl.enable
    zookeeper.ssl.enabled.protocols zookeeper.ssl.endpoint.identification.algorithm
    zookeeper.ssl.keystore.location zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type
    zookeeper.ssl.ocsp.enable zookeeper.ssl.protocol zookeeper.ssl.truststore.location
    zookeeper.ssl.truststore.password zookeeper.ssl.truststore.type
""".split()
)


# -- the settings kafkalog uses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # "long", "int", "double", "list", "string", "boolean"
    default: object
    check: Callable[[object], str | None] = lambda v: None  # returns the broken rule, or None
    broker: tuple[str, ...] = ()  # broker synonyms, highest priority first
    broker_scale: tuple[int, ...] = ()  # multiplier of each synonym (minutes and hours)


def at_least(low):
    return lambda v: None if v >= low else f"Value must be at least {low}"


def between(low, high):
    return lambda v: (
        None
        if low <= v <= high
        else f"Value must be no more than {high}"
        if v > high
        else f"Value must be at least {low}"
    )


def one_of(*allowed):
    return lambda v: (
        None
        if all(x in allowed for x in (v if isinstance(v, list) else [v]))
        else f"String must be one of: {', '.join(allowed)}"
    )


KEYS = {
    k.name: k
    for k in [
        ConfigKey("cleanup.policy", "list", ["delete"], one_of("compact", "delete"), ("log.cleanup.policy",)),
        ConfigKey(
            "retention.ms",
            "long",
            604_800_000,
            at_least(-1),
            ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
            (1, 60_000, 3_600_000),
        ),
        ConfigKey("retention.bytes", "long", -1, broker=("log.retention.bytes",)),
        # Kafka 4.0's LogConfig: segment.bytes at least 14 (LegacyRecord.RECORD_OVERHEAD_V0); 4.1+ raised
        # it to 1 MiB and added internal.segment.bytes (below) for small segments. The lower 4.0 bound is
        # kept, so that a 4.0 cluster's topic settings are read as they are; log.segment.bytes is 1 MiB
        # at least in every 4.x (BROKER_RULES).
        ConfigKey("segment.bytes", "int", 1_073_741_824, at_least(14), ("log.segment.bytes",)),
        # Kafka 4.1+ (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG, no validator): when set, the segment size
        # instead of segment.bytes (LogConfig.segmentSize()); TopicConfig.segment_bytes is that size.
        ConfigKey("internal.segment.bytes", "int", None),
        ConfigKey("segment.ms", "long", 604_800_000, at_least(1), ("log.roll.ms", "log.roll.hours"), (1, 3_600_000)),
        ConfigKey(
            "segment.jitter.ms", "long", 0, at_least(0), ("log.roll.jitter.ms", "log.roll.jitter.hours"), (1, 3_600_000)
        ),
        ConfigKey("segment.index.bytes", "int", 10_485_760, at_least(4), ("log.index.size.max.bytes",)),
        ConfigKey("index.interval.bytes", "int", 4096, at_least(0), ("log.index.interval.bytes",)),
        ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, between(0, 1), ("log.cleaner.min.cleanable.ratio",)),
        ConfigKey("min.compaction.lag.ms", "long", 0, at_least(0), ("log.cleaner.min.compaction.lag.ms",)),
        ConfigKey("max.compaction.lag.ms", "long", LONG_MAX, at_least(1), ("log.cleaner.max.compaction.lag.ms",)),
        ConfigKey("delete.retention.ms", "long", 86_400_000, at_least(0), ("log.cleaner.delete.retention.ms",)),
        ConfigKey("file.delete.delay.ms", "long", 60_000, at_least(0), ("log.segment.delete.delay.ms",)),
        ConfigKey("max.message.bytes", "int", 1_048_588, at_least(0), ("message.max.bytes",)),
        ConfigKey(
            "message.timestamp.type",
            "string",
            "CreateTime",
            one_of("CreateTime", "LogAppendTime"),
            ("log.message.timestamp.type",),
        ),
        ConfigKey(
            "compression.type",
            "string",
            "producer",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            ("compression.type",),
        ),
        ConfigKey("preallocate", "boolean", False, broker=("log.preallocate",)),
        # A broker setting in Kafka (TransactionLogConfig, an int), per topic in kafkalog.
        ConfigKey("producer.id.expiration.ms", "int", 86_400_000, at_least(1), ("producer.id.expiration.ms",)),
        # KIP-68 (proposal only): consumed retention, with forced retention.ms as the backstop.
        ConfigKey("retention.commitoffset.enable", "boolean", False, broker=("log.retention.commitoffset.enable",)),
        ConfigKey("retention.commitoffset.ms", "long", -1, at_least(-1), ("log.retention.commitoffset.ms",)),
        # KIP-405 tiered storage: local retention of a topic with remote.storage.enable; -2 means "as
        # retention.ms / retention.bytes" (LogConfig.localRetentionMs(), localRetentionBytes()).
        ConfigKey("remote.storage.enable", "boolean", False),
        ConfigKey("remote.log.copy.disable", "boolean", False),
        ConfigKey("local.retention.ms", "long", -2, at_least(-2), ("log.local.retention.ms",)),
        ConfigKey("local.retention.bytes", "long", -2, at_least(-2), ("log.local.retention.bytes",)),
        # KIP-280 (accepted, never shipped): which record of a key compaction keeps (rules/compaction_strategy.py)
        ConfigKey(
            "compaction.strategy",
            "string",
            "offset",
            one_of("offset", "timestamp", "header"),
            ("log.cleaner.compaction.strategy",),
        ),
        ConfigKey("compaction.strategy.header", "string", "", broker=("log.cleaner.compaction.strategy.header",)),
    ]
}
# The broker synonyms' own definitions where they differ from their topic name's (KafkaConfig's types
# and validators: hours and minutes are ints; log.segment.bytes is at least 1 MiB in every 4.x).
BROKER_RULES = {
    "log.segment.bytes": ("int", at_least(MIB)),
    "log.roll.hours": ("int", at_least(1)),
    "log.roll.jitter.hours": ("int", at_least(0)),
    "log.retention.hours": ("int", None),
    "log.retention.minutes": ("int", None),
}

# Every name kafkalog accepts, by where it may stand.
TOPIC_NAMES = KAFKA_TOPIC_CONFIG_NAMES | set(KEYS)
# the topic names among those removed in 4.0 (TopicConfig's), accepted and ignored where topic names stand
REMOVED_TOPIC_NAMES = frozenset(
    {"message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms"}
)
BROKER_NAMES = KAFKA_BROKER_CONFIG_NAMES | KAFKA_PLUGIN_CONFIG_NAMES | {s for k in KEYS.values() for s in k.broker}
_USED_BROKER_NAMES = {s for k in KEYS.values() for s in k.broker}
# broker synonym -> its topic name, for the hint when a broker name stands where a topic name must
_TOPIC_OF_SYNONYM = {s: k.name for k in KEYS.values() for s in k.broker if s != k.name}


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class TopicConfig:
    """The effective configuration of one topic; attribute names are Kafka's with '_' for '.'.

    `segment_bytes` is the segment size Kafka uses (LogConfig.segmentSize()): internal.segment.bytes
    when that is set, else segment.bytes."""

    cleanup_policy: tuple = ("delete",)
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    internal_segment_bytes: int | None = None
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    preallocate: bool = False
    producer_id_expiration_ms: int = 86_400_000
    retention_commitoffset_enable: bool = False
    retention_commitoffset_ms: int = -1
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    compaction_strategy: str = "offset"
    compaction_strategy_header: str = ""

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def get(self, name: str):
        return getattr(self, _attr(name))

    def as_properties(self) -> dict[str, str]:
        return {name: format_value(KEYS[name], self.get(name)) for name in KEYS if self.get(name) is not None}


def parse_value(key: ConfigKey, raw: str, source: str, *, type: str | None = None):
    """A value from text, as Kafka's ConfigDef parses it, validated."""
    text = raw.strip()
    type = type or key.type
    value: int | float | bool | list[str] | str
    try:
        if type in ("long", "int"):
            value = int(text)
            limit = LONG_MAX if type == "long" else INT_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
        elif type == "double":
            value = float(text)
        elif type == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError
            value = text.lower() == "true"
        elif type == "list":
            value = [part.strip().lower() for part in text.split(",") if part.strip()]
        else:
            value = text
    except ValueError:
        raise ConfigError(
            f"Invalid value {raw} for configuration {key.name}: expected a {type} (from {source})"
        ) from None
    problem = key.check(value)
    if problem:
        raise ConfigError(f"Invalid value {raw} for configuration {key.name}: {problem} (from {source})")
    return value


def format_value(key: ConfigKey, value) -> str:
    if key.type == "list":
        return ",".join(value)
    if key.type == "boolean":
        return str(value).lower()
    return str(value)


class ConfigResolver:
    """Layers configuration as Kafka does: defaults < broker `log.*` < every topic < one topic.

    `broker` holds broker names (server.properties'), `topics_default` and `per_topic` topic names.
    Every name is checked against Kafka's (unknown ones are refused); names kafkalog has no use for
    are kept and ignored."""

    def __init__(
        self,
        broker: Mapping[str, str] | None = None,
        topics_default: Mapping[str, str] | None = None,
        per_topic: Mapping[str, Mapping[str, str]] | None = None,
        *,
        typed_topics: Iterable[str] = (),
    ):
        self.broker = dict(broker or {})
        # the topics of per_topic a user typed (--topic-config), not read from a file: a log dir
        # without one of them is an error, where a file may well name the topics of other log dirs
        self.typed_topics = frozenset(typed_topics)
        self.topics_default = dict(topics_default or {})
        self.per_topic = {t: dict(v) for t, v in (per_topic or {}).items()}
        self._check_names()
        for topic in [None, *self.per_topic]:  # fail early, naming the bad setting
            self.for_topic(topic)

    def _check_names(self) -> None:
        prefixes = remote_log_prefixes(self.broker)
        for name, _value in self.broker.items():
            if name not in BROKER_NAMES and not name.startswith(prefixes) and name not in KAFKA_REMOVED_IN_4_0:
                raise unknown_name(name, "broker", BROKER_NAMES | TOPIC_NAMES)
            if name not in _USED_BROKER_NAMES:
                _note_ignored(name, "broker")
        for where, layer in [
            ("every topic", self.topics_default),
            *((f"topic {t}", layer) for t, layer in self.per_topic.items()),
        ]:
            for name in layer:
                _topic_name(name, where)
                if name not in KEYS:
                    _note_ignored(name, where)

    def for_topic(self, topic: str | None) -> TopicConfig:
        values: dict[str, Any] = {}
        for name, key in KEYS.items():
            value = self._broker_value(key)
            for layer, source in (
                (self.topics_default, "--config"),
                (self.per_topic.get(topic, {}) if topic is not None else {}, f"topic {topic}"),
            ):
                if name in layer:
                    value = parse_value(key, layer[name], source)
            if value is not None:
                values[_attr(name)] = tuple(value) if key.type == "list" else value
        if values.get("internal_segment_bytes") is not None:  # LogConfig.segmentSize()
            values["segment_bytes"] = values["internal_segment_bytes"]
        config = TopicConfig(**values)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({config.max_compaction_lag_ms})" + (f" for topic {topic}" if topic else "")
            )
        if (
            config.retention_commitoffset_enable
            and config.retention_ms >= 0
            and config.retention_commitoffset_ms > config.retention_ms
        ):
            raise ConfigError(
                f"retention.commitoffset.ms ({config.retention_commitoffset_ms}) must not exceed "
                f"retention.ms ({config.retention_ms})" + (f" for topic {topic}" if topic else "")
            )
        return config

    def values_of(self, name: str) -> Mapping[str, object]:
        """One setting for any topic, as a mapping topic -> value (resolved on lookup)."""
        return _TopicValues(self, _attr(_known(name, name)))

    def _broker_value(self, key: ConfigKey):
        scales = key.broker_scale or (1,) * len(key.broker)
        for synonym, scale in zip(key.broker, scales):
            if synonym in self.broker:
                own_type, own_check = BROKER_RULES.get(synonym, (None, None))
                unchecked = dataclasses.replace(key, name=synonym, check=own_check or (lambda v: None))
                value = parse_value(unchecked, self.broker[synonym], synonym, type=own_type)
                if key.type in ("long", "int") and scale != 1:
                    value *= scale
                if key.name == "retention.ms" and value < 0:  # any negative broker retention means unlimited
                    value = -1
                problem = key.check(value)
                if problem:
                    raise ConfigError(f"Invalid value {self.broker[synonym]} for configuration {synonym}: {problem}")
                return value
        return key.default


class _TopicValues(Mapping):
    def __init__(self, resolver: ConfigResolver, attr: str):
        self.resolver, self.attr = resolver, attr

    def __getitem__(self, topic):
        return getattr(self.resolver.for_topic(topic), self.attr)

    def __iter__(self):
        return iter(self.resolver.per_topic)

    def __len__(self):
        return len(self.resolver.per_topic)


# -- names: known, unknown, ignored ----------------------------------------------------------------------


def remote_log_prefixes(broker: Mapping[str, str] = {}) -> tuple[str, ...]:
    """The prefixes under which Kafka reads configurations it does not name: KAFKA_CONFIG_PREFIXES and
    the remote storage and remote log metadata managers' (as `broker` sets them, else the defaults)."""
    return KAFKA_CONFIG_PREFIXES + tuple(
        broker.get(name, default) or default for name, default in REMOTE_LOG_PREFIX_CONFIGS.items()
    )


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """`; did you mean 'x'?` with the known name closest to `name` (a configuration's, a topic's, an
    option's; letter case aside), or "" when none is at least `cutoff` alike (difflib's ratio)."""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=cutoff)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


class UnknownTopicConfig(ConfigError):
    """A name that stands where a topic configuration must and that Kafka does not define."""


def unknown_name(name: str, where: str, candidates: Iterable[str], file: str | None = None) -> ConfigError:
    """The error for a name Kafka does not define, with the closest known name."""
    return ConfigError(
        f"unknown configuration {name!r} ({where}): Apache Kafka 4.x defines no such topic or "
        f"broker configuration{did_you_mean(name, candidates)}",
        file=file,
    )


def warn_unknown(err: KafkaLogError) -> None:
    """A name a configuration file holds and Kafka does not define: ignored with a warning, as
    Kafka's broker logs "The configuration 'x' was supplied but isn't a known config" and starts."""
    log.warning("%s (ignored: in a file an unknown name is a warning, as in Kafka; typed with --config, an error)", err)


def _topic_name(name: str, where: str, file: str | None = None) -> str:
    """`name` if it is a topic configuration name, else the error (a broker name gets its topic name)."""
    if name in TOPIC_NAMES or name in REMOVED_TOPIC_NAMES:
        return name
    if name in _TOPIC_OF_SYNONYM:
        raise ConfigError(
            f"{name!r} ({where}) is a broker configuration; the topic configuration is {_TOPIC_OF_SYNONYM[name]!r}",
            file=file,
        )
    if name in BROKER_NAMES or name in KAFKA_REMOVED_IN_4_0:
        raise ConfigError(f"{name!r} ({where}) is a broker configuration, not a topic configuration", file=file)
    raise UnknownTopicConfig(
        f"unknown topic configuration {name!r} ({where}): Apache Kafka 4.x defines no such topic "
        f"configuration{did_you_mean(name, TOPIC_NAMES)}",
        file=file,
    )


def _known(name: str, source: str) -> str:
    """A setting kafkalog uses (a topic name of KEYS)."""
    if name not in KEYS:
        _topic_name(name, f"in {source!r}")
        raise ConfigError(
            f"topic configuration {name!r} (in {source!r}) has no effect in kafkalog; it uses: "
            f"{', '.join(sorted(KEYS))}"
        )
    return name


def _note_ignored(name: str, where: str) -> None:
    if name in KAFKA_REMOVED_IN_4_0:
        log.info("configuration %s (%s) was removed in Kafka 4.0; ignored", name, where)
    else:
        log.debug("configuration %s (%s) does not change what kafkalog does; ignored", name, where)


# -- the command line's forms -----------------------------------------------------------------------------


def parse_topic_setting(text: str) -> tuple[str, str, str]:
    """`TOPIC:key=value` (the --topic-config form) → (topic, key, value); key a topic name. A topic
    name has no ':' (Kafka's rule), a value may have some (`leader.replication.throttled.replicas`)."""
    topic, sep, setting = text.partition(":")
    name, eq, value = setting.partition("=")
    if not sep or not topic or not eq:
        raise ConfigError(f"expected TOPIC:key=value, got {text!r}")
    return topic, _topic_name(name.strip(), f"in {text!r}"), value


def parse_setting(text: str) -> tuple[str, str]:
    """`key=value` (the --config form) → (key, value); key a topic or a broker name."""
    name, eq, value = text.partition("=")
    if not eq:
        raise ConfigError(f"expected key=value, got {text!r}")
    name = name.strip()
    if (
        name not in TOPIC_NAMES
        and name not in BROKER_NAMES
        and name not in KAFKA_REMOVED_IN_4_0
        and not name.startswith(remote_log_prefixes())
    ):
        raise unknown_name(name, f"in {text!r}", TOPIC_NAMES | BROKER_NAMES)
    return name, value


def resolver_from(
    properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    settings: Sequence[str] = (),
    topic_settings: Sequence[str] = (),
    *,
    file: str | None = None,
) -> ConfigResolver:
    """Build a resolver from a configuration file's entries (`parse_config_file`), `--config` and
    `--topic-config` arguments.

    In a file, broker names (`log.retention.hours`, `listeners`, ...) are broker settings, topic names
    (`cleanup.policy`) apply to every topic, and `topic.<TOPIC>.<name>` overrides one topic. With
    `--config`, a topic name applies to every topic and a broker name is a broker setting (over the
    file's). A name Kafka does not define is refused in `settings` and `topic_settings` (typed by a
    user), and a warning in `properties` (a file, named by `file`: Kafka's broker warns and starts).
    The topics `topic_settings` name are the resolver's `typed_topics`."""
    broker: dict[str, str] = {}
    topics_default: dict[str, str] = {}
    per_topic: dict[str, dict[str, str]] = {}
    properties = dict(properties)
    prefixes = remote_log_prefixes(properties)

    def place(name: str, value: str, where: str, typed: bool) -> None:
        if name.startswith("topic."):
            try:
                topic, config_name = _split_topic_key(name[len("topic.") :])
            except ConfigError as err:
                if typed:
                    raise
                warn_unknown(err)
                return
            per_topic.setdefault(topic, {})[config_name] = value
        elif name in TOPIC_NAMES:
            topics_default[name] = value
        elif name in BROKER_NAMES or name in KAFKA_REMOVED_IN_4_0 or name.startswith(prefixes):
            broker[name] = value
        elif typed:
            raise unknown_name(name, where, TOPIC_NAMES | BROKER_NAMES)
        else:
            warn_unknown(unknown_name(name, where, TOPIC_NAMES | BROKER_NAMES))

    for name, value in properties.items():
        place(name, value, f"in {file or 'the configuration file'}", typed=False)
    for text in settings:
        name, value = parse_setting(text)
        place(name, value, f"in {text!r}", typed=True)
    typed_topics = set()
    for text in topic_settings:
        topic, name, value = parse_topic_setting(text)
        per_topic.setdefault(topic, {})[name] = value
        typed_topics.add(topic)
    return ConfigResolver(broker, topics_default, per_topic, typed_topics=typed_topics)


def topic_properties(topic: str, properties: Mapping[str, str], file: str | None = None) -> dict[str, str]:
    """One topic's own file (`<TOPIC>.properties`: topic config names, no prefix) as the
    `topic.<TOPIC>.<name>` entries of a properties file. A name Kafka does not define is a warning
    (a file, as in Kafka), a broker name an error (it is known, and would set nothing here)."""
    out = {}
    for name, value in properties.items():
        try:
            _topic_name(name, f"for topic {topic}")
        except UnknownTopicConfig as err:
            warn_unknown(err.located(file=file))
            continue
        except ConfigError as err:
            raise ConfigError(
                f"unknown topic configuration {name} for topic {topic}: a topic's file holds topic "
                f"config names; {err.message}",
                file=file,
            ) from None
        out[f"topic.{topic}.{name}"] = value
    return out


def _split_topic_key(rest: str) -> tuple[str, str]:
    for name in sorted(TOPIC_NAMES | REMOVED_TOPIC_NAMES, key=len, reverse=True):
        if rest.endswith("." + name) and len(rest) > len(name) + 1:
            return rest[: -len(name) - 1], name
    # the closest `<TOPIC>.<topic name>` reading, for the hint
    best = max(
        (
            (difflib.SequenceMatcher(None, rest[i + 1 :], n).ratio(), rest[:i], n)
            for i, c in enumerate(rest)
            if c == "." and i
            for n in TOPIC_NAMES
        ),
        default=(0, "", ""),
    )
    hint = f"; did you mean topic.{best[1]}.{best[2]}?" if best[0] >= 0.6 else ""
    raise ConfigError(
        f"topic.{rest}: expected topic.<TOPIC>.<topic config name>, and Apache Kafka 4.x defines "
        f"no topic configuration this ends with{hint}"
    )


# -- configuration files exported from a cluster -------------------------------------------------------------


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
                _topic_name(name, f"{where}, topic {section[1]}", file=file)
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
