"""Faults on a seeded random schedule: each drawn, applied, held a few seconds, then healed,
so a seed names one sequence of faults (its timing still moves with the machine's load).
"""
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError

from .cluster import FaultCluster
from .kafka_cluster import KafkaFaultCluster


@dataclass
class Fault:
    name: str
    heal: Callable[[], None]


def _signal(process, sig: int) -> None:
    if process is not None and process.poll() is None:
        process.send_signal(sig)


class Nemesis:
    KINDS = ("kill-broker", "pause-broker", "restart-broker", "kill-zookeeper", "pause-zookeeper", "isolate-broker",
             "isolate-zookeeper", "broker-from-zookeeper", "broker-from-storage", "majority-minority", "bridge",
             "pause-storage", "storage-delay", "storage-loss", "clock-jump",
             "wal-disk-full", "grow-partitions", "move-partition")

    def __init__(self, cluster: FaultCluster | KafkaFaultCluster, seed: int, kinds: tuple[str, ...] = KINDS, log=print):
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.kinds = kinds
        self.log = log
        self.applied: list[str] = []

    def run(self, seconds: float, hold: tuple[float, float] = (3, 10), rest: tuple[float, float] = (2, 6)) -> None:
        """Faults one at a time until ``seconds`` have passed; everything healed on return."""
        until = time.monotonic() + seconds
        while time.monotonic() + hold[0] < until:
            fault = self.inject(self.rng.choice(self.kinds))
            self.applied.append(fault.name)
            self.log(f"nemesis: {fault.name}")
            try:
                time.sleep(min(self.rng.uniform(*hold), max(0.0, until - time.monotonic())))
            finally:
                fault.heal()
                self.log(f"nemesis: healed {fault.name}")
            time.sleep(min(self.rng.uniform(*rest), max(0.0, until - time.monotonic())))

    def inject(self, kind: str) -> Fault:
        return getattr(self, "_" + kind.replace("-", "_"))()

    def _pick(self, items):
        index = self.rng.randrange(len(items))
        return index, items[index]

    def _kill_broker(self) -> Fault:
        i, broker = self._pick(self.cluster.brokers)
        broker.kill()
        return Fault(f"kill -9 broker {i + 1}", lambda: broker.restart(timeout=120))

    def _restart_broker(self) -> Fault:
        """A clean stop (SIGTERM): its partitions move to the others, and move back at its start."""
        i, broker = self._pick(self.cluster.brokers)
        broker.stop()
        return Fault(f"SIGTERM broker {i + 1}", lambda: broker.restart(timeout=120))

    def _pause_broker(self) -> Fault:
        i, broker = self._pick(self.cluster.brokers)
        _signal(broker.process, signal.SIGSTOP)
        return Fault(f"SIGSTOP broker {i + 1}", lambda: _signal(broker.process, signal.SIGCONT))

    def _kill_zookeeper(self) -> Fault:
        i, server = self._pick(self.cluster.ensemble.servers)
        if server.process is not None:
            server.process.kill()
            server.process.wait()
        server.process = None
        return Fault(f"kill -9 zookeeper {i + 1}", server.start)

    def _pause_zookeeper(self) -> Fault:
        i, server = self._pick(self.cluster.ensemble.servers)
        _signal(server.process, signal.SIGSTOP)
        return Fault(f"SIGSTOP zookeeper {i + 1}", lambda: _signal(server.process, signal.SIGCONT))

    def _isolate(self, hosts) -> Fault:
        _, host = self._pick(hosts)
        self.cluster.network.isolate(host)
        return Fault(f"isolate {host.name} (link down)", self.cluster.network.heal)

    def _isolate_broker(self) -> Fault:
        return self._isolate(self.cluster.broker_hosts)

    def _isolate_zookeeper(self) -> Fault:
        return self._isolate(self.cluster.zk_hosts)

    def _broker_from_zookeeper(self) -> Fault:
        _, host = self._pick(self.cluster.broker_hosts)
        self.cluster.network.cut(host, self.cluster.zk_hosts)
        return Fault(f"{host.name} cut from every ZooKeeper node", self.cluster.network.heal)

    def _broker_from_storage(self) -> Fault:
        _, host = self._pick(self.cluster.broker_hosts)
        self.cluster.network.cut(host, [self.cluster.s3_host])
        return Fault(f"{host.name} cut from object storage", self.cluster.network.heal)

    def _servers(self) -> list:
        servers = self.cluster.zk_hosts + self.cluster.broker_hosts
        self.rng.shuffle(servers)
        return servers

    def _majority_minority(self) -> Fault:
        servers = self._servers()
        minority, majority = servers[:len(servers) // 2 - 1 or 1], servers[len(servers) // 2 - 1 or 1:]
        self.cluster.network.partition(minority, majority)
        return Fault(f"partition {sorted(h.name for h in minority)} | {sorted(h.name for h in majority)}",
                     self.cluster.network.heal)

    def _bridge(self) -> Fault:
        """Two halves that cannot talk, and one node between them that talks to both."""
        servers = self._servers()
        half = len(servers) // 2
        left, bridge, right = servers[:half], servers[half], servers[half + 1:]
        for host in left:
            self.cluster.network.cut(host, right)
        return Fault(f"bridge {sorted(h.name for h in left)} <{bridge.name}> {sorted(h.name for h in right)}",
                     self.cluster.network.heal)

    def _pause_storage(self) -> Fault:
        _signal(self.cluster.seaweedfs.process, signal.SIGSTOP)
        return Fault("SIGSTOP object storage", lambda: _signal(self.cluster.seaweedfs.process, signal.SIGCONT))

    def _storage_delay(self) -> Fault:
        delay = self.rng.choice([50, 200, 1000])
        self.cluster.set_proxy(delay_ms=delay, jitter_ms=delay)
        return Fault(f"object storage delayed {delay}-{2 * delay} ms", lambda: self.cluster.set_proxy(delay_ms=0,
                                                                                                        jitter_ms=0))

    def _storage_loss(self) -> Fault:
        loss = self.rng.choice([0.01, 0.05, 0.2])
        self.cluster.set_proxy(loss=loss)
        return Fault(f"object storage connections reset with p={loss} per chunk",
                     lambda: self.cluster.set_proxy(loss=0))

    def _clock_jump(self) -> Fault:
        seconds = self.rng.choice([-300, -30, 30, 300, 3600])
        self.cluster.jump_clock(seconds)
        return Fault(f"broker {len(self.cluster.brokers)} wall clock {seconds:+d} s",
                     lambda: self.cluster.jump_clock(0))

    def _wal_disk_full(self) -> Fault:
        used = self.cluster.fill_wal_disk(True)
        return Fault(f"broker 2's local WAL disk full ({used} used)", lambda: self.cluster.fill_wal_disk(False))

    def _grow_partitions(self) -> Fault:
        """CreatePartitions through the admin API: the cap per broker changes, so partitions that
        clients are writing and reading change owners."""
        topic = self.rng.choice(["idem", "txn-in", "txn-out"])
        bootstrap = self.cluster.bootstrap

        def grow() -> int:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            count = len(admin.list_topics(topic, timeout=10).topics[topic].partitions) + 1
            admin.create_partitions([NewPartitions(topic, count)])[topic].result(30)
            return count
        try:
            return Fault(f"{topic} grown to {self.cluster.client.call(grow, timeout=90)} partitions", lambda: None)
        except KafkaException as exc:
            return Fault(f"{topic} not grown: {exc}", lambda: None)

    def _move_partition(self) -> Fault:
        """AlterPartitionReassignments through the admin API, as kafka-reassign-partitions.sh
        sends it: a partition clients are writing and reading gets another leader, its replica
        list reordered with the drawn broker first (kgate's owner is the first; Kafka elects it).
        The move stays, as an operator's would."""
        topic = self.rng.choice(["idem", "txn-in", "txn-out"])
        which, where = self.rng.random(), self.rng.random()
        bootstrap = self.cluster.bootstrap

        def move() -> str:
            metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
            partitions = metadata.topics[topic].partitions
            index = int(which * len(partitions))
            leader, replicas = partitions[index].leader, partitions[index].replicas
            others = sorted(broker for broker in metadata.brokers if broker != leader)
            target = others[int(where * len(others))]
            admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30_000)
            partition = TopicPartition(topic, index)
            try:
                refused = admin.alter_partition_reassignments(
                    {partition: [target, *(replica for replica in replicas if replica != target)]}).get(partition)
                if refused is not None:
                    raise refused(f"reassignment of {topic}-{index} to broker {target}")
                self.cluster.elect_preferred(admin, partition)
            finally:
                admin.close()
            return f"{topic}-{index} moved from broker {leader} to broker {target}"
        try:
            return Fault(self.cluster.client.call(move, timeout=90), lambda: None)
        except (KafkaException, KafkaError) as exc:
            return Fault(f"{topic} not moved: {exc!r}", lambda: None)
