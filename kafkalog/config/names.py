"""Apache Kafka 4.x's configuration names: every topic and broker name it defines, the prefixes under
which it reads names it does not list, and the names 4.0 removed. kafkalog accepts each (and ignores
the ones it has no use for); a name not here is unknown (definitions.py says what is done with it)."""

from __future__ import annotations

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
