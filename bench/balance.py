"""Self-balancing: how far one broker given every hot partition falls back towards the mean,
how fast, by how many moves; and how long ownership takes to follow a broker lost or added.

    .venv/bin/python -m bench.balance [--runs 3] [--rate 1000] [--value-size 1024] [--timeout 60]

The benchmark starts a ZooKeeper and three brokers over one shared ``file:`` directory
(127.0.0.1, free ports, stopped by PID at the end) with the balancer's test pace (a load
report and a round every second, two moves a round, a 4 s cooldown, 10% tolerance) and
``zookeeper.session.timeout.ms`` 4000. In every run:

- a fresh topic of 6 partitions, every one placed on broker 0 with
  AlterPartitionReassignments; an idempotent acks=all confluent-kafka producer writes
  ``--rate`` records/s of ``--value-size`` bytes to it, and a consumer reads them back, so
  each partition carries bytes in and out;
- each broker's load is its bytes in and out of that topic per second over a 2 s window,
  from its own Prometheus counters (not the balancer's reports). The spread is the largest
  distance of a broker's load from the mean, in percent of the mean: before, the balancer
  off (all on broker 0: 200%);
- the balancer is switched on (the cluster-wide dynamic config); time to balance: until
  the first 1 s window with every broker within 20% of the mean; then the spread over the
  next 2 s window, and the moves made (``kgate_balancer_moves_total`` on broker 0, the
  controller, which plans);
- lost: a fresh 6-partition topic, broker 2 killed with SIGKILL: seconds until Metadata
  names the owners the hash gives among brokers 0 and 1 for each partition; added: broker 2
  started again: seconds from its start until it owns its hashed share again (its process
  start included). The session timeout bounds the first.

Printed: each figure's median over the runs, with min and max.
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPartition
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from kgate.metadata.assignment import assign
from tests.support.cluster import AckedProducer, KgateCluster, spread
from tests.support.member_process import wait_for
from tests.support.ports import free_ports
from tests.support.scrape import scrape, value
from tests.support.wire import Wire
from tests.support.zookeeper import ZooKeeperServer

PARTITIONS = 6
BALANCED = 0.2
BALANCER = {"kgate.balancer.load.report.interval.ms": 1000, "kgate.balancer.interval.ms": 1000,
            "kgate.balancer.max.moves": 2, "kgate.balancer.move.cooldown.ms": 4000,
            "kgate.balancer.tolerance.percent": 10}
FIGURES = {
    "before_spread_pct": "spread before, balancer off (%)",
    "balance_s": "time to balance (s)",
    "after_spread_pct": "spread after (%)",
    "moves": "moves made",
    "lost_s": "broker lost: owners moved (s)",
    "added_s": "broker added: owners moved (s)",
}


def set_balancer(cluster: KgateCluster, enabled: bool) -> None:
    """IncrementalAlterConfigs on the cluster default (confluent-kafka's admin names none)."""
    IAC = IncrementalAlterConfigsRequest.AlterConfigsResource
    with Wire(cluster.brokers[0].bootstrap) as wire:
        answer = wire.call(IncrementalAlterConfigsRequest(resources=[IAC(resource_type=4, resource_name="", configs=[
            IAC.AlterableConfig(name="kgate.balancer.enable", config_operation=0, value=str(enabled).lower())])],
            validate_only=False), 1)
    assert answer.responses[0].error_code == 0, answer


def moves_made(cluster: KgateCluster) -> float:
    samples = scrape(cluster.brokers[0].metrics_url)
    return sum(value(samples, "kgate_balancer_moves_total", reason=reason) for reason in ("load", "count"))


def create(cluster: KgateCluster, name: str) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    cluster.wait_leaders(name, PARTITIONS, set(cluster.brokers))


def reader(bootstrap: str, topic: str, stop: threading.Event) -> threading.Thread:
    def run():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                             "topic.metadata.refresh.interval.ms": 1000})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        while not stop.is_set():
            consumer.consume(1000, timeout=0.2)
        consumer.close()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def balancing(cluster: KgateCluster, admin: KafkaAdminClient, number: int, args) -> dict[str, float]:
    topic = f"hot-{number}"
    create(cluster, topic)
    admin.alter_partition_reassignments({KafkaPartition(topic, p): [0] for p in range(PARTITIONS)})
    wait_for(lambda: set(cluster.leaders(topic).values()) == {0}, 30, "every partition on broker 0")
    producer = AckedProducer("confluent", cluster.bootstrap, topic, int(args.rate * (args.timeout + 20)),
                             per_second=args.rate, value_size=args.value_size,
                             **{"enable.idempotence": True}).start()
    stop = threading.Event()
    consuming = reader(cluster.bootstrap, topic, stop)
    try:
        wait_for(lambda: len(producer.acked) > args.rate, 30, "acknowledgements")
        figures = {"before_spread_pct": 100 * spread(cluster.load_over(topic, 2))}
        moves = moves_made(cluster)
        set_balancer(cluster, True)
        began = time.monotonic()
        wait_for(lambda: spread(cluster.load_over(topic, 1)) <= BALANCED, args.timeout, "balance")
        figures["balance_s"] = time.monotonic() - began
        figures["after_spread_pct"] = 100 * spread(cluster.load_over(topic, 2))
        figures["moves"] = moves_made(cluster) - moves
    finally:
        set_balancer(cluster, False)
        producer.stop().join(120)
        stop.set()
        consuming.join(10)
    if producer.failed:
        raise SystemExit(f"the producer failed: {producer.failed[:3]}")
    return figures


def failover(cluster: KgateCluster, number: int) -> dict[str, float]:
    topic = f"owners-{number}"
    create(cluster, topic)

    def owned_by(brokers):
        want = dict(enumerate(assign(topic, PARTITIONS, brokers)))
        return lambda: cluster.leaders(topic) == want
    began = time.monotonic()
    cluster.brokers[2].kill()
    wait_for(owned_by([0, 1]), 60, "the survivors to own every partition", interval=0.1)
    lost = time.monotonic() - began
    began = time.monotonic()
    cluster.brokers[2].restart(timeout=60)
    wait_for(owned_by([0, 1, 2]), 60, "broker 2 to own its share again", interval=0.1)
    return {"lost_s": lost, "added_s": time.monotonic() - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="records per second to the hot topic")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed to balance")
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="kgate-balance-bench-") as base:
        zookeeper = ZooKeeperServer(os.path.join(base, "zk"), free_ports(1)[0]).start().wait_serving()
        cluster = KgateCluster(base, zookeeper.address, "/bench", **BALANCER)
        admin = None
        try:
            for node_id in range(3):
                cluster.start_broker(node_id, **{"kgate.metrics.listener": "127.0.0.1:0"})
            cluster.wait_live({0, 1, 2})
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), request_timeout_ms=15_000)
            for number in range(args.runs):
                began = time.monotonic()
                figures = balancing(cluster, admin, number, args) | failover(cluster, number)
                runs.append(figures)
                print(f"run {number + 1} ({time.monotonic() - began:.0f} s): "
                      + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), file=sys.stderr, flush=True)
        finally:
            if admin is not None:
                admin.close()
            for broker in cluster.brokers.values():
                if broker.alive():
                    broker.stop()
            zookeeper.stop()
    print(f"3 brokers, {PARTITIONS} hot partitions all on broker 0, {args.rate} x {args.value_size} B records/s "
          f"in and read back; balanced: every broker within {BALANCED:.0%} of the mean; "
          f"zookeeper.session.timeout.ms 4000; medians of {args.runs} runs (min-max)")
    for key, label in FIGURES.items():
        values = [r[key] for r in runs]
        print(f"{label:<36}{statistics.median(values):>8.1f} ({min(values):.1f}-{max(values):.1f})")


if __name__ == "__main__":
    main()
