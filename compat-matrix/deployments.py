"""What a row runs against: one broker of its own, or a 3-broker cluster of its own
(over a shared directory, or over S3 with a data directory per broker).

Either way the row gets a PLAINTEXT and a SASL_PLAINTEXT listener, the matrix's SASL
user, and the metrics endpoints whose request counters say which request versions
each cell used. A cluster shares one ZooKeeper ensemble (started once per run) but has
a chroot and a ledger directory of its own; its clients bootstrap through one broker,
a different one from row to row, and find the others through Metadata.
"""
import itertools
import os

import cells
from tests.support import warm_start
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import KgateCluster

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "kgate.metrics.listener": "127.0.0.1:0",
            # KIP-848 members hear of a new target at their next heartbeat (Kafka: every 5 s).
            "group.consumer.heartbeat.interval.ms": 500,
            "num.partitions": cells.PARTITIONS}
LISTENERS = ("SASL_PLAINTEXT",)


def _add_user(*where: str) -> None:
    warm_start.run(["users", *where, "--create", "add", cells.USER, "--password", cells.PASSWORD], timeout=60,
                   check=True)


class SingleNode:
    def __init__(self, scratch: str, entry_format: str):
        self.data_dir = os.path.join(scratch, "broker")
        self.entry_format = entry_format
        self.brokers: list[BrokerProcess] = []

    def start(self) -> cells.Broker:
        _add_user("--data-dir", self.data_dir)
        broker = BrokerProcess(self.data_dir, dict(SETTINGS, **{"entry.format": self.entry_format}),
                               listeners=LISTENERS).start()
        self.brokers = [broker]
        return cells.Broker(broker.bootstrap, broker.address("SASL_PLAINTEXT"), (broker.metrics_url,),
                            self.entry_format)

    def alive(self) -> bool:
        return all(broker.alive() for broker in self.brokers)

    def dead_log(self) -> str:
        """The last log line of a broker that exited."""
        return next((_tail(b.log_path) for b in self.brokers if not b.alive()), "")

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.alive():
                broker.stop()


class Cluster(SingleNode):
    _rows = itertools.count()

    def __init__(self, scratch: str, entry_format: str, zookeeper: str, storage: str | None = None):
        """``storage``: the brokers' ``--storage`` (default: a shared directory in ``scratch``)."""
        super().__init__(scratch, entry_format)
        self.cluster = KgateCluster(scratch, zookeeper, f"/compat-{os.path.basename(scratch)}", size=3,
                                    storage=storage, **SETTINGS, **{"entry.format": entry_format})

    def start(self) -> cells.Broker:
        _add_user("--metadata", self.cluster.metadata)
        for node_id in range(self.cluster.size):
            self.cluster.start_broker(node_id, listeners=LISTENERS)
        self.brokers = list(self.cluster.brokers.values())
        self.cluster.wait_live(set(self.cluster.brokers))
        bootstrap = self.brokers[next(self._rows) % len(self.brokers)]
        return cells.Broker(bootstrap.bootstrap, bootstrap.address("SASL_PLAINTEXT"),
                            tuple(b.metrics_url for b in self.brokers), self.entry_format)


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            lines = [line.strip() for line in fh if line.strip()]
        return lines[-1][-300:] if lines else "no log"
    except OSError:
        return "no log"
