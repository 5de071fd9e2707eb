"""The examples each command's --help ends with."""

from __future__ import annotations

# Each command's --help ends with these: real command lines, on the README's generated sample.
EXAMPLES = {
    "generate": [
        "kafkalog generate sample --preset demo --config-out sample.properties",
        "kafkalog generate small --preset small --seed 7 --manifest small.json",
    ],
    "dump": [
        "kafkalog dump sample/customers-0/00000000000000000000.log --records | head",
        "kafkalog dump sample/__consumer_offsets-0 --offsets-decoder",
        "kafkalog dump sample/payments-0 --txn-index --snapshot",
        "kafkalog dump /var/lib/kafka/data/__cluster_metadata-0 --records --cluster-metadata-decoder",
    ],
    "validate": [
        "kafkalog validate sample --config-file sample.properties",
        "kafkalog validate /var/lib/kafka/data --fail-on error --json > report.json",
    ],
    "plan": [
        "kafkalog plan sample --config-file sample.properties --now 1700100000000",
        "kafkalog plan sample --config cleanup.policy=compact --force --topic customers",
    ],
    "compact": [
        "kafkalog compact sample --config-file sample.properties --output compacted",
        "kafkalog compact /var/lib/kafka/data --config-file server.properties --report compact.json",
    ],
    "retain": [
        "kafkalog retain sample --config-file sample.properties --dry-run",
        "kafkalog retain sample --delete-records offsets.json --truncate-below-start --output retained",
    ],
    "purge": [
        "kafkalog purge sample --keys gdpr-keys.txt --ledger /audit/purges --secret-file secret --dry-run",
        "kafkalog purge sample --keys keys.parquet --ledger /audit/purges --secret-file secret --output purged",
        "kafkalog purge sample --keys gdpr-keys.txt --ledger /audit/purges --secret-file secret "
        "--table lake/users --table lake/users_changelog --dry-run",
    ],
    "verify-purge": [
        "kafkalog verify-purge /data/broker-1 /data/broker-2 /data/broker-3 --ledger /audit/purges --secret-file s",
        "kafkalog verify-purge purged --ledger /audit/purges --secret-file secret --run RUN_ID --json > check.json",
        "kafkalog verify-purge sample --ledger /audit/purges --secret-file secret --table lake/users",
    ],
    "evidence": [
        "kafkalog evidence build --ledger /audit/purges --verify /data/broker-1 /data/broker-2 --secret-file secret "
        "--signing-key evidence.key --output evidence.json --markdown evidence.md",
        "kafkalog evidence verify evidence.json --public-key evidence.pub",
    ],
    "txn-report": ["kafkalog txn-report sample --now 1700100000000", "kafkalog txn-report /var/lib/kafka/data --json"],
    "repartition": [
        "kafkalog repartition sample --topic orders --partitions 6 --output moved --to-topic orders6 "
        "--topic-id 5S3jf0CYQvOB6ysFZbFhAw --offset-map orders6-map --group-offsets orders6-groups",
        "kafkalog repartition /var/lib/kafka/data --topic orders --partitions 12 --to-topic orders12 "
        "--output /var/lib/kafka/data --metadata /var/lib/kafka/meta --group-offsets groups",
    ],
    "log-dirs": [
        "kafkalog log-dirs /var/lib/kafka/data-1 /var/lib/kafka/data-2",
        "kafkalog log-dirs sample --topic orders",
    ],
    "get-offsets": [
        "kafkalog get-offsets sample",
        "kafkalog get-offsets sample --topic 'orders|payments' --time earliest",
        "kafkalog get-offsets sample --topic customers --partitions 0 --time 1700050000000",
    ],
    "configs": ["kafkalog configs sample --config-file sample.properties --topic customers"],
    "export": [
        "kafkalog export sample --topic customers --output customers.delta --value-format json",
        "kafkalog export sample --topic customers --output before-deploy --format parquet --as-of-time 1700050000000",
        "kafkalog export /var/lib/kafka/data --topic orders --output /lake/orders --incremental",
    ],
    "jars": ["kafkalog jars fetch", "kafkalog jars fetch --to kafkalog-jars   # then KAFKALOG_JARS_DIR=kafkalog-jars"],
}
