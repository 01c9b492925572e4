"""Apache Kafka 4.4 as the fault harness's control: three KRaft nodes (broker and controller
each) in network namespaces of their own, plus one for the clients, met by the same
workloads, nemesis and checker as kgate's cluster (cluster.py). A checker that flags Kafka
is wrong, or Kafka is.

Replicated as a Kafka user who wants acknowledged writes to survive one lost node runs it:
replication factor 3, min.insync.replicas 2, unclean leader election off (Kafka's default).
Brokers leave the quorum's view after 4 s without a heartbeat, as kgate's brokers leave
ZooKeeper's in the harness. Faults on ZooKeeper, object storage, clocks and local WAL disks
have no counterpart here; the nemesis draws from ``KINDS``.
"""
import os

from conformance.kafka_broker import KafkaBroker, Quorum, cluster_id

from .network import Host, Network

KINDS = ("kill-broker", "pause-broker", "restart-broker", "isolate-broker", "majority-minority", "bridge",
         "grow-partitions", "move-partition")
SETTINGS = {
    "default.replication.factor": 3, "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 6,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "share.coordinator.state.topic.replication.factor": 3, "share.coordinator.state.topic.min.isr": 2,
    "broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 1000,
}
JVM = ["-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
       "-XX:+ExitOnOutOfMemoryError"]


class KafkaNode:
    """One node as the nemesis handles a broker: killed, paused, stopped and started again."""

    def __init__(self, broker: KafkaBroker):
        self.broker = broker

    @property
    def process(self):
        return self.broker.process

    @property
    def log_path(self) -> str:
        return str(self.broker.log_path)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.broker.process = None

    def stop(self) -> None:
        self.broker.stop()

    def restart(self, timeout: float = 120) -> None:
        self.broker.launch()
        self.broker.wait_ready(timeout)


class KafkaFaultCluster:
    def __init__(self, base_dir: str, network: Network, brokers: int = 3):
        self.base_dir = base_dir
        self.network = network
        self.broker_hosts: list[Host] = [network.add(f"k{i + 1}") for i in range(brokers)]
        self.zk_hosts: list[Host] = []  # the quorum is the brokers themselves
        self.client = network.add("client")
        voters = {i + 1: host.address for i, host in enumerate(self.broker_hosts)}
        formatted = cluster_id()
        self.brokers = [KafkaNode(KafkaBroker(os.path.join(base_dir, f"broker-{node}"), dict(SETTINGS),
                                              jvm_options=JVM,
                                              quorum=Quorum(node, voters, formatted, tuple(host.wrap()))))
                        for (node, _), host in zip(voters.items(), self.broker_hosts)]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.broker.bootstrap for node in self.brokers)

    def start(self) -> "KafkaFaultCluster":
        """Every node launched before any is waited for: none serves until a majority votes."""
        for node in self.brokers:
            node.broker.launch()
        for node in self.brokers:
            node.broker.wait_ready(180)
        return self

    @staticmethod
    def elect_preferred(admin, partition) -> None:
        """After a reassignment that put another broker first: Kafka moves leadership to it only
        by an election (kafka-leader-election.sh); the reordering itself copies nothing."""
        admin.elect_leaders(0, {partition.topic: [partition.partition]})

    def stop(self) -> None:
        for node in self.brokers:
            node.kill()
