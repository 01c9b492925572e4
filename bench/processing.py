"""kgate.processing: throughput with a slow async handler, and its cost per record beside a plain loop.

Two figures, each the median of ``--runs`` runs against one kgate broker:

- ``50 ms handler``: an ``async`` handler that sleeps 50 ms, at concurrency 1,000 over
  16 partitions, every record a key of its own. The ceiling is concurrency / latency
  (20,000 records/s); what falls short of it is the framework's (and the broker's) cost.
- ``no-op handler`` beside ``plain loop``: the processor with a handler that does nothing,
  and a plain confluent-kafka loop in the same group setup (subscribe, consume, touch
  key and value, commit every second) over the same topic in the same run. The
  difference of their times per record is the framework's overhead per record; process
  CPU per record is printed too.

Records/s is counted from the first record handled to the last, so the group's join is
not in it. Each run reads the topic from the start under a fresh group id.

    .venv/bin/python -m bench.processing --records 100000 --runs 3
"""
import argparse
import asyncio
import statistics
import sys
import tempfile
import time

import confluent_kafka

from bench.produce_consume import create_topic
from kgate.processing import Processor
from tests.support.broker_process import BrokerProcess
from tests.support.processing import BROKER_SETTINGS, produce_keyed


def processor_run(bootstrap: str, topic: str, group: str, expected: int, handler_s: float, concurrency: int,
                  max_seconds: float) -> tuple[float, float]:
    """(records/s, process CPU microseconds per record) of one processor run."""
    app = Processor(bootstrap, group, [topic], concurrency=concurrency, max_records=max(10_000, 4 * concurrency),
                    config={"auto.offset.reset": "earliest"})
    seen = {"count": 0, "first": 0.0, "last": 0.0, "cpu": 0.0}

    def count() -> None:
        now = time.perf_counter()
        if not seen["count"]:
            seen["first"], seen["cpu"] = now, time.process_time()
        seen["count"] += 1
        seen["last"] = now
        if seen["count"] == expected:
            seen["cpu"] = time.process_time() - seen["cpu"]
            app.stop()

    if handler_s:
        @app.handler
        async def handle(record):
            await asyncio.sleep(handler_s)
            count()
    else:
        @app.handler
        async def handle(record):
            count()

    async def run() -> None:
        await asyncio.wait_for(app.run_async(), max_seconds)

    asyncio.run(run())
    if seen["count"] < expected:
        raise RuntimeError(f"processor handled {seen['count']} of {expected} within {max_seconds} s")
    return (expected - 1) / (seen["last"] - seen["first"]), seen["cpu"] / expected * 1e6


def plain_run(bootstrap: str, topic: str, group: str, expected: int, max_seconds: float) -> tuple[float, float]:
    """The same reading without the framework: subscribe, consume, touch, commit every second."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "fetch.queue.backoff.ms": 0})
    consumer.subscribe([topic])
    count, size, first, last, cpu, committed_at = 0, 0, 0.0, 0.0, 0.0, time.monotonic()
    deadline = time.monotonic() + max_seconds
    try:
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.1):
                if message.error():
                    continue
                if not count:
                    first, cpu = time.perf_counter(), time.process_time()
                size += len(message.key() or b"") + len(message.value() or b"")
                count += 1
            last = time.perf_counter()
            if time.monotonic() - committed_at > 1:
                consumer.commit(asynchronous=True)
                committed_at = time.monotonic()
        cpu = time.process_time() - cpu
    finally:
        consumer.close()
    if count < expected:
        raise RuntimeError(f"plain loop read {count} of {expected} within {max_seconds} s")
    return (expected - 1) / (last - first), cpu / expected * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=1_000)
    parser.add_argument("--handler-ms", type=float, default=50.0)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)

    figures: dict[str, list[tuple[float, float]]] = {"slow": [], "noop": [], "plain": []}
    with tempfile.TemporaryDirectory(prefix="kgate-bench-processing-") as work_dir:
        broker = BrokerProcess(f"{work_dir}/broker", BROKER_SETTINGS).start()
        try:
            topic = create_topic(broker.bootstrap, args.partitions)
            produce_keyed(broker.bootstrap, topic, args.records, keys=args.records, value_size=args.value_size)
            for run in range(args.runs):
                common = (broker.bootstrap, topic)
                figures["slow"].append(processor_run(*common, f"slow-{run}", args.records, args.handler_ms / 1000,
                                                     args.concurrency, args.max_seconds))
                figures["noop"].append(processor_run(*common, f"noop-{run}", args.records, 0, args.concurrency,
                                                     args.max_seconds))
                figures["plain"].append(plain_run(*common, f"plain-{run}", args.records, args.max_seconds))
                print(f"run {run + 1}/{args.runs}: " + ", ".join(
                    f"{name} {f[-1][0]:,.0f} records/s ({f[-1][1]:.1f} us CPU/record)" for name, f in figures.items()),
                    flush=True)
        finally:
            broker.stop()
    ceiling = args.concurrency / (args.handler_ms / 1000)
    labels = {"slow": f"{args.handler_ms:g} ms handler, concurrency {args.concurrency}", "noop": "no-op handler",
              "plain": "plain consumer loop"}
    print(f"\n{args.records:,} records of {args.value_size} B, {args.partitions} partitions; "
          f"medians of {args.runs} runs")
    for name, label in labels.items():
        rates = [rate for rate, _cpu in figures[name]]
        print(f"  {label:42} {statistics.median(rates):>10,.0f} records/s (min {min(rates):,.0f}, "
              f"max {max(rates):,.0f}), CPU {statistics.median(c for _r, c in figures[name]):.1f} us/record")
    slow = statistics.median(rate for rate, _cpu in figures["slow"])
    print(f"  50 ms handler / ceiling (concurrency/latency {ceiling:,.0f}/s): {slow / ceiling:.2f}")
    overhead = [1e6 / n[0] - 1e6 / p[0] for n, p in zip(figures["noop"], figures["plain"])]
    cpu_overhead = [n[1] - p[1] for n, p in zip(figures["noop"], figures["plain"])]
    ratios = [p[0] / n[0] for n, p in zip(figures["noop"], figures["plain"])]
    print(f"  framework overhead per record (no-op minus plain, run by run): {statistics.median(overhead):.1f} us "
          f"wall, {statistics.median(cpu_overhead):.1f} us CPU; plain/no-op rate {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
