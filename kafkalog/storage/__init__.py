"""Files of a Kafka log directory: segments, indexes, checkpoints, snapshots, swaps."""
