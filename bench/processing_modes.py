"""kgate.processing, keyed mode beside share mode: records/s of 1 to 3 processor processes.

Each processor is a process of its own running an ``async`` handler that sleeps 50 ms at
concurrency 1,000 (per process: the ceiling is processes x concurrency / latency, 20,000
records/s per process), every record a key of its own over 16 partitions of one kgate
broker. Keyed mode is a consumer group (partitions divided between the processes);
share mode a share group (every process reads every partition, records acquired one by
one). The records are written once every process has joined its group, so neither the
join nor a rebalance is in the figure; records/s runs from the first record handled, in
any process, to the last. Each run has a fresh topic and group; figures are medians of
``--runs`` runs, and share/keyed is taken run by run. ``--brokers kgate,kafka`` runs the
same against Apache Kafka 4.4 beside kgate, in the same run, as the peer.

    .venv/bin/python -m bench.processing_modes --records 40000 --runs 3 --brokers kgate,kafka
"""
import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench.produce_consume import create_topic
from conformance.kafka_broker import BROKER_JVM, KafkaBroker
from kgate.processing import Processor
from tests.support.broker_process import BrokerProcess, terminate
from tests.support.processing import BROKER_SETTINGS, produce_keyed
from tests.support.share_consumers import configure_share_group, describe_share_group

MODES = ("keyed", "share")
REPORT_S = 0.2
# The peer's groups form as kgate's do (BROKER_SETTINGS), and its single node loads a small
# __consumer_offsets rather than 50 partitions.
KAFKA_SETTINGS = {**{k: str(v) for k, v in BROKER_SETTINGS.items()}, "offsets.topic.num.partitions": "2",
                  "share.coordinator.state.topic.num.partitions": "2"}


def child(bootstrap: str, topic: str, group: str, mode: str, concurrency: int, handler_s: float) -> None:
    """A processor printing ``count first last`` (epoch seconds of its first and last handled
    record) every REPORT_S until SIGTERM."""
    app = Processor(bootstrap, group, [topic], mode=mode, concurrency=concurrency,
                    max_records=max(10_000, 4 * concurrency), config={"auto.offset.reset": "earliest"})
    seen = [0, 0.0, 0.0]

    @app.handler
    async def handle(record):
        await asyncio.sleep(handler_s)
        now = time.time()
        if not seen[0]:
            seen[1] = now
        seen[0] += 1
        seen[2] = now

    async def report() -> None:
        while True:
            print(*seen, flush=True)
            await asyncio.sleep(REPORT_S)

    async def run() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, app.stop)
        reporter = asyncio.create_task(report())
        try:
            await app.run_async()
        finally:
            reporter.cancel()
            print(*seen, flush=True)

    asyncio.run(run())


class Child:
    """A child processor whose latest report is read as it comes."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.latest = (0, 0.0, 0.0)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            count, first, last = line.split()
            self.latest = (int(count), float(first), float(last))


def members(bootstrap: str, mode: str, group: str) -> int:
    if mode == "share":
        return len(describe_share_group(bootstrap, group).members)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: its futures fail once it is gone
    try:
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    except (KafkaException, TimeoutError):  # the coordinator still loading, the group not there yet
        return 0
    return len(described.members) if described.state.name == "STABLE" else 0


def one_run(bootstrap: str, args, mode: str, processes: int) -> float:
    """Records/s of ``processes`` processors of ``mode`` over a fresh topic."""
    topic = create_topic(bootstrap, args.partitions)
    group = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
    if mode == "share":
        configure_share_group(bootstrap, group, 30_000)
    argv = [sys.executable, "-m", "bench.processing_modes", "child", bootstrap, topic, group, mode,
            str(args.concurrency), str(args.handler_ms / 1000)]
    children = [Child(argv) for _ in range(processes)]
    # A share-mode processor at concurrency 1,000 runs three share consumers (processing/share.py).
    wanted = processes * (3 if mode == "share" else 1)
    try:
        _wait(lambda: members(bootstrap, mode, group) >= wanted, args.max_seconds, f"{wanted} members")
        produce_keyed(bootstrap, topic, args.records, keys=args.records, value_size=args.value_size)
        _wait(lambda: sum(c.latest[0] for c in children) >= args.records, args.max_seconds, "every record")
    finally:
        for c in children:
            terminate(c.process, 30)
    reports = [c.latest for c in children if c.latest[0]]
    first, last = min(r[1] for r in reports), max(r[2] for r in reports)
    return (sum(r[0] for r in reports) - 1) / (last - first)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not reached within {timeout} s")
        time.sleep(REPORT_S)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["child"]:
        bootstrap, topic, group, mode, concurrency, handler_s = sys.argv[2:]
        child(bootstrap, topic, group, mode, int(concurrency), float(handler_s))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=1_000)
    parser.add_argument("--handler-ms", type=float, default=50.0)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--processes", type=int, default=3, help="1 up to this many processes")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--brokers", default="kgate", help="kgate, kafka (Apache Kafka 4.4), or both: kgate,kafka")
    args = parser.parse_args(argv)

    figures: dict[tuple[str, str, int], list[float]] = {}
    names = args.brokers.split(",")
    with tempfile.TemporaryDirectory(prefix="kgate-bench-processing-modes-") as work_dir:
        brokers = {}
        try:
            for name in names:
                brokers[name] = (KafkaBroker(f"{work_dir}/{name}", KAFKA_SETTINGS, jvm_options=BROKER_JVM)
                                 if name == "kafka" else BrokerProcess(f"{work_dir}/{name}", BROKER_SETTINGS)).start()
            for run in range(args.runs):
                for processes in range(1, args.processes + 1):
                    for name, mode in ((name, mode) for name in names for mode in MODES):
                        rate = one_run(brokers[name].bootstrap, args, mode, processes)
                        figures.setdefault((name, mode, processes), []).append(rate)
                        print(f"run {run + 1}/{args.runs}: {name}, {mode}, {processes} process(es): "
                              f"{rate:,.0f} records/s", flush=True)
        finally:
            for broker in brokers.values():
                broker.stop()
    report(args, names, figures)
    return 0


def report(args, names: list[str], figures: dict[tuple[str, str, int], list[float]]) -> None:
    ceiling = args.concurrency / (args.handler_ms / 1000)
    print(f"\n{args.records:,} records of {args.value_size} B, {args.partitions} partitions, {args.handler_ms:g} ms "
          f"handler, concurrency {args.concurrency} per process; medians of {args.runs} runs (records/s)")
    print("| processes | " + " | ".join(f"{name} keyed | {name} share | {name} share/keyed" for name in names)
          + " | ceiling |")
    print("|---:|" + "---:|---:|---:|" * len(names) + "---:|")
    for processes in range(1, args.processes + 1):
        cells = []
        for name in names:
            keyed, share = figures[(name, "keyed", processes)], figures[(name, "share", processes)]
            ratio = statistics.median(s / k for s, k in zip(share, keyed))
            cells.append(f"{statistics.median(keyed):,.0f} | {statistics.median(share):,.0f} | {ratio:.2f}")
        print(f"| {processes} | " + " | ".join(cells) + f" | {processes * ceiling:,.0f} |")


if __name__ == "__main__":
    sys.exit(main())
