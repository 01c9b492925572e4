"""kgate mirror beside MirrorMaker 2: replication throughput beside a plain producer, and
end-to-end lag at a fixed rate.

    .venv/bin/python -m bench.mirror [--runs 3] [--records 50000] [--lag-seconds 10] [--rate-mb-s 20] [--no-mm2]

Each run starts one ZooKeeper (the mirror's state) and two kgate brokers (dc1, dc2; temporary
data directories, stopped by PID), then:

- baseline: one confluent-kafka producer (acks=all, idempotent, linger 5 ms) writes
  ``--records`` 1 KiB records into dc2, timed from the first send to the last ack;
- mirror: the same number of 1 KiB records already on dc1; one worker (a process) is
  started with a route dc1 -> dc2 and timed from the first copied record's arrival on dc2
  to the last one's (``setup_s``: from the route's creation to that first arrival: target
  topic creation, assignment, the worker's clients connecting);
- lag: a producer paced at ``--rate-mb-s`` into dc1 for ``--lag-seconds`` with values
  stamped with their send time, a consumer on dc2's copy: p50/p99 from send to arrival;
- the same copy and lag through MirrorMaker 2 (connect-mirror, dedicated mode, the JVM
  options ``bin/connect-mirror-maker.sh`` gives it; installed by scripts/setup-ecosystem)
  on its own topics of the same two brokers, after kgate mirror's worker has stopped:
  ``mm2_*`` figures, and ``kgate_vs_mm2``, kgate mirror's copy rate over MM2's, run by run.

Prints medians over the runs with min and max, and the mirror/baseline ratio taken run by run;
``worker_cpu_us_per_record`` is the worker process's CPU (user + system) over the copy, per
record: the figure that shows per-record work in the copy path whatever else loads the machine.
"""
import argparse
import json
import os
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.run_figures import print_runs
from tests.support.broker_process import BrokerProcess
from tests.support.mirror import MirrorWorker, mirror_command, write_config
from tests.support.mirror_maker import SOURCE, TARGET, MirrorMaker
from tests.support.ports import free_ports
from tests.support.zookeeper import ZooKeeperServer

VALUE = 1024
PARTITIONS = 8
# MirrorMaker 2's JVM as bin/connect-mirror-maker.sh starts it (its heap, kafka-run-class.sh's GC options).
MM2_JVM = ["-Xms256m", "-Xmx2g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
           "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
# New topics found within a second, as kgate mirror finds a route's topics at once.
MM2_SETTINGS = {"refresh.topics.interval.seconds": "1", "sync.topic.configs.enabled": "false",
                "sync.topic.acls.enabled": "false", "emit.checkpoints.enabled": "false"}


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, count: int, rate_bytes_s: float | None = None) -> float:
    """Seconds from the first send to the last acknowledgement; values start with the send time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 1024 * 1024})
    padding = b"x" * (VALUE - 8)
    start = time.perf_counter()
    for i in range(count):
        if rate_bytes_s:
            ahead = start + i * VALUE / rate_bytes_s - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                producer.produce(topic, struct.pack(">d", time.time()) + padding, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - start


def end_total(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        return sum(max(0, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                   for p in range(PARTITIONS))
    except Exception:
        return 0
    finally:
        consumer.close()


def wait_total(bootstrap: str, topic: str, count: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while end_total(bootstrap, topic) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: fewer than {count} records after {timeout} s")
        time.sleep(0.05)
    return time.perf_counter()


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_assigned(config: str, topic: str, timeout: float) -> None:
    """Until the worker copies every partition of ``topic`` (so the lag run measures copying, not set-up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = json.loads(mirror_command(config, "status", "--output", "json").stdout or "[]")
        if sum(1 for r in rows if r["topic"] == topic and r["lag_records"] is not None) == PARTITIONS:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} not assigned within {timeout} s")


def lag_percentiles(bootstrap: str, topic: str, count: int, timeout: float) -> tuple[float, float]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lag", "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    lags, deadline = [], time.monotonic() + timeout
    try:
        while len(lags) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    lags.append(time.time() - struct.unpack(">d", message.value()[:8])[0])
    finally:
        consumer.close()
    lags.sort()
    return lags[len(lags) // 2], lags[min(len(lags) - 1, int(len(lags) * 0.99))]


def lag_run(dc1: str, dc2: str, source: str, copy: str, args, copying) -> tuple[float, float]:
    """The lag of a copy at ``--rate-mb-s``: one stamped record first, waited for on the copy (the
    copier has the topic), then the paced ones; the first's lag is one of about 200,000."""
    count = int(args.rate_mb_s * 1e6 / VALUE * args.lag_seconds)
    produce(dc1, source, 1)
    copying()
    wait_total(dc2, copy, 1, 120)
    reader = {}
    thread = threading.Thread(target=lambda: reader.update(
        p=lag_percentiles(dc2, copy, count + 1, args.lag_seconds + 60)))
    thread.start()
    produce(dc1, source, count, rate_bytes_s=args.rate_mb_s * 1e6)
    thread.join()
    return reader["p"]


def mm2_run(base: str, dc1: str, dc2: str, run_id: str, args) -> dict:
    """MirrorMaker 2 copying ``--records`` already on dc1, then the paced lag run, on topics of its own."""
    source_topic, lag_topic = f"mm2-copied-{run_id}", f"mm2-lagged-{run_id}"
    create(dc1, source_topic)
    create(dc1, lag_topic)
    produce(dc1, source_topic, args.records)
    mirror_maker = MirrorMaker(Path(base) / "mm2", dc1, dc2, {
        **MM2_SETTINGS, f"{SOURCE}->{TARGET}.topics": f"{source_topic},{lag_topic}"}, jvm=MM2_JVM)
    started_at = time.perf_counter()
    mirror_maker.start()
    try:
        copy = f"{SOURCE}.{source_topic}"  # DefaultReplicationPolicy: <source alias>.<topic>
        started = wait_total(dc2, copy, 1, 180)
        cpu_started = cpu_seconds(mirror_maker.process.pid)
        finished = wait_total(dc2, copy, args.records, 600)
        cpu_used = cpu_seconds(mirror_maker.process.pid) - cpu_started
        p50, p99 = lag_run(dc1, dc2, lag_topic, f"{SOURCE}.{lag_topic}", args, lambda: None)
    finally:
        mirror_maker.stop()
    return {"mm2_mb_s": args.records * VALUE / (finished - started) / 1e6, "mm2_setup_s": started - started_at,
            "mm2_cpu_us_per_record": cpu_used / args.records * 1e6, "mm2_lag_p50_s": p50, "mm2_lag_p99_s": p99}


def one_run(base: str, args) -> dict:
    zookeeper = ZooKeeperServer(os.path.join(base, "zk"), free_ports(1)[0]).start().wait_serving()
    brokers = {alias: BrokerProcess(os.path.join(base, alias)).start() for alias in ("dc1", "dc2")}
    worker = None
    try:
        config = write_config(os.path.join(base, "mirror.toml"), zookeeper.address, "/bench",
                              {a: b.bootstrap for a, b in brokers.items()}, **{"zookeeper.session.timeout.ms": 4000})
        dc1, dc2 = brokers["dc1"].bootstrap, brokers["dc2"].bootstrap
        run_id = uuid.uuid4().hex[:6]
        baseline_topic, source_topic, lag_topic = f"plain-{run_id}", f"copied-{run_id}", f"lagged-{run_id}"
        create(dc2, baseline_topic)
        baseline = args.records * VALUE / produce(dc2, baseline_topic, args.records) / 1e6
        create(dc1, source_topic)
        produce(dc1, source_topic, args.records)
        worker = MirrorWorker(config, "bench").start()
        routed = time.perf_counter()
        assert mirror_command(config, "routes", "add", "--source", "dc1", "--target", "dc2",
                              "--topics", f"copied-{run_id},lagged-{run_id}").returncode == 0
        started = wait_total(dc2, f"dc1.{source_topic}", 1, 60)
        cpu_started = cpu_seconds(worker.process.pid)
        finished = wait_total(dc2, f"dc1.{source_topic}", args.records, 600)
        cpu_used = cpu_seconds(worker.process.pid) - cpu_started
        mirrored = args.records * VALUE / (finished - started) / 1e6
        create(dc1, lag_topic)
        p50, p99 = lag_run(dc1, dc2, lag_topic, f"dc1.{lag_topic}", args,
                           lambda: wait_assigned(config, lag_topic, 60))
        figures = {"baseline_mb_s": baseline, "mirror_mb_s": mirrored, "ratio": mirrored / baseline,
                   "setup_s": started - routed, "worker_cpu_us_per_record": cpu_used / args.records * 1e6,
                   "lag_p50_s": p50, "lag_p99_s": p99}
        worker.stop()
        worker = None
        if args.mm2:
            figures |= mm2_run(base, dc1, dc2, run_id, args)
            figures |= {"mm2_ratio": figures["mm2_mb_s"] / baseline,
                        "kgate_vs_mm2": figures["mirror_mb_s"] / figures["mm2_mb_s"]}
        return figures
    finally:
        if worker is not None:
            worker.stop()
        for broker in brokers.values():
            broker.stop()
        zookeeper.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument("--rate-mb-s", type=float, default=20.0)
    parser.add_argument("--no-mm2", dest="mm2", action="store_false",
                        help="leave MirrorMaker 2 out (it needs scripts/setup-ecosystem)")
    args = parser.parse_args()
    runs = []
    for number in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="kgate-mirror-bench-") as base:
            runs.append(one_run(base, args))
        print(f"run {number + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in runs[-1].items()), file=sys.stderr)
    print_runs(runs)


if __name__ == "__main__":
    main()
