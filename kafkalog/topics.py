"""The names of the topics Kafka creates for itself; what kafkalog does with each is decided where
the rule lives (rules/retention.py, operations/compact.py, operations/dump.py)."""

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"  # the group coordinator's offsets and groups
TRANSACTION_STATE_TOPIC = "__transaction_state"  # the transaction coordinator's state
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # the share coordinator's state (KIP-932)
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"  # TopicBasedRemoteLogMetadataManager (KIP-405)
KRAFT_METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log, kept by the controller quorum
