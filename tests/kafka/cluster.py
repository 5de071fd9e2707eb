"""A real Apache Kafka 4.x cluster for tests/kafka: one KRaft controller and three brokers on 127.0.0.1,
every node a `Broker` (broker.py) whose roles and quorum are set here.

    from tests.kafka.cluster import Cluster

    cluster = Cluster(tools, "/tmp/cluster")   # formatted storage, one cluster id
    cluster.start()                            # every node at once; returns when all serve
    tools.produce(cluster.bootstrap, runs=[...], topics=[{"name": "t", "replication_factor": 3}])
    cluster.stop()                             # every broker at once, controlled shutdown
    ... rewrite each broker's log_dir with kafkalog ...
    cluster.start()

The controller is a node of its own, not a role of the brokers: with every broker stopped (to rewrite
their log dirs offline) it keeps the quorum. Three combined nodes lose it as they stop, and a broker
still in its controlled shutdown then waits for a controller that is gone (up to five minutes:
KafkaBroker.shutdown's default, BrokerServer.shutdown).
The controller runs from the first start to `close()`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .broker import Broker, KafkaTools

BROKER_HEAP = "-Xmx320m"
CONTROLLER_HEAP = "-Xmx192m"
CONTROLLER_ID = 0


def cluster_properties(replication_factor: int) -> dict[str, str]:
    """The brokers' settings for topics of `replication_factor` copies, also Kafka's internal ones,
    whose writes (acks=all) need all but one in sync."""
    min_isr = str(max(1, replication_factor - 1))
    factor = str(replication_factor)
    return {
        "default.replication.factor": factor,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


class Cluster:
    """`size` brokers (node ids 1..size) in `base_dir/broker-N`, and their controller (node id 0) in
    `base_dir/controller`. `overrides` are more server.properties entries of every broker."""

    def __init__(self, tools: KafkaTools, base_dir: str | Path, *, size: int = 3, overrides: dict | None = None):
        base = Path(base_dir)
        self.tools = tools
        self.controller = Broker(
            tools, base / "controller", node_id=CONTROLLER_ID, format_storage=False, heap=CONTROLLER_HEAP
        )
        voters = f"{CONTROLLER_ID}@127.0.0.1:{self.controller.controller_port}"
        self.controller.configure(
            {
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller.controller_port}",
                "advertised.listeners": None,
                "inter.broker.listener.name": None,
            }
        )
        self.brokers = [
            Broker(tools, base / f"broker-{n}", node_id=n, format_storage=False, heap=BROKER_HEAP)
            for n in range(1, size + 1)
        ]
        for broker in self.brokers:
            broker.cluster_id = self.controller.cluster_id
            broker.configure(
                {
                    "process.roles": "broker",
                    "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
                    "controller.quorum.voters": voters,
                    **cluster_properties(size),
                    **(overrides or {}),
                }
            )
        _each(lambda node: node.format(), self.nodes)

    @property
    def nodes(self) -> list[Broker]:
        return [self.controller, *self.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def log_dirs(self) -> list[Path]:
        return [b.log_dir for b in self.brokers]

    def start(self, timeout: float = 180) -> None:
        """Start every node that is not running, all at once, and wait until each serves (a broker
        serves once the controller registered and unfenced it)."""
        stopped = [n for n in self.nodes if not n.running]
        for node in stopped:
            node.launch()
        _each(lambda node: node.wait_started(timeout), stopped)

    def stop(self, timeout: float = 120) -> list[bool]:
        """Controlled shutdown of every broker at once (the controller keeps running); returns, per
        broker, whether it left its clean shutdown marker."""
        running = [b for b in self.brokers if b.running]
        for broker in running:
            broker.begin_stop()
        _each(lambda broker: broker.wait_stopped(timeout), running)
        return [b.clean_shutdown_marker for b in self.brokers]

    def close(self) -> None:
        """Stop every broker, then the controller (killed when they do not stop)."""
        _each(Broker.close, self.brokers)
        self.controller.close()


def _each(action, nodes) -> list:
    """`action` on every node in parallel threads (each mostly waits on a JVM); the first error raised."""
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        return list(pool.map(action, nodes))


def start_cluster(base_dir: str | Path) -> Cluster:
    """A cluster in `base_dir` started (its KafkaTools on kafka_libs()'s jars), killed again when it
    does not start."""
    from .broker import kafka_libs

    base = Path(base_dir)
    cluster = Cluster(KafkaTools(kafka_libs(), base / "tools"), base / "cluster")
    try:
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    return cluster
