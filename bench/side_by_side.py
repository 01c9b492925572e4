"""kgate beside Apache Kafka 4.4 (twice) and a native peer (Tansu), and the machine's limits, in one run.

The question users ask first is how kgate compares with the broker they would otherwise
run, Apache Kafka, and how much slower a Python gateway is than a native one. Figures from
different runs on a shared machine are not comparable, so every run measures kgate, Kafka
at its default durability (the page cache, no fsync per write), Kafka with
``log.flush.interval.messages=1`` (an fsync per append: kgate's guarantee), Tansu (Rust,
memory storage) and the machine's limits (loopback TCP, write+fsync) back to back, and
each kgate/peer ratio is taken pair by pair (same run, same workload) before the median.

Workloads (OpenMessaging-Benchmark-like), each through the same librdkafka client:
- produce: 100 B and 1 KiB records x 1 and 16 partitions x acks=1/all x linger 0/5 ms;
  throughput plus p50/p99/p99.9 of the produce acknowledgement;
- end-to-end latency at a fixed rate below saturation (1 KiB records at 20 MB/s), over
  16 partitions, and over 10 active partitions of a 1,000-partition topic that one
  consumer reads whole (the fetch-session case);
- consume from the tail (consumer running while a full-speed producer writes) and from
  cold storage (offset 0 after the produce finished);
- 10 producers at once beside 1,000 idle connections;
- Kafka's own kafka-producer-perf-test / kafka-consumer-perf-test (the Java client) on
  the produce and consume workloads, printed beside librdkafka's figures;
- broker CPU seconds per GB moved and peak RSS, read from /proc for the broker's process
  and its children;
- a soak at 80% of kgate's peak produce throughput, sampling the broker's RSS.

Run from the repository root (after scripts/setup-bench and scripts/setup-kafka):
    .venv/bin/python -m bench.side_by_side [--quick] [--soak-minutes N] [--brokers kgate,kafka,...]
"""
import argparse
import functools
import glob
import itertools
import json
import multiprocessing
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

from bench.idle_connections import idle_connections
from bench.kafka_perf import consumer_perf, producer_perf
from bench.peer import TansuProcess
from bench.produce_consume import (
    MB,
    clean_up,
    consume,
    create_topic,
    finish_child,
    fsync_rate,
    fsync_throughput,
    loopback_throughput,
    machine,
    percentiles_ms,
    produce,
    start_child,
)
from conformance.kafka_broker import BROKER_JVM, KafkaBroker
from tests.support.broker_process import BrokerProcess

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "side_by_side.json"
GB = 1_000_000_000
# What a workload that did not finish raises: its figures are left out, the run goes on.
WORKLOAD_FAILURES = (RuntimeError, TimeoutError, ValueError, subprocess.SubprocessError,
                     confluent_kafka.KafkaException)
SOAK_RETENTION_BYTES = 256 * 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the broker process, seen from /proc ------------------------------------------------

def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants: a broker's figures count every process it runs."""
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        for children in glob.glob(f"/proc/{current}/task/*/children"):
            try:
                with open(children) as listing:
                    queue.extend(int(child) for child in listing.read().split())
            except OSError:  # the thread or process ended while we looked
                continue
    return pids


def cpu_seconds(pid: int) -> float:
    """User+system CPU seconds the process and its descendants have used so far."""
    total = 0.0
    for member in process_tree(pid):
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def memory_kib(pid: int) -> dict:
    """Resident set now (VmRSS) and its peak so far (VmHWM), in KiB, summed over the process tree
    (one process for every broker but kgate-workers, whose sum of peaks is an upper bound: its
    processes need not peak at once)."""
    figures = {"VmRSS": 0, "VmHWM": 0}
    for member in process_tree(pid):
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    key, _, value = line.partition(":")
                    if key in figures:
                        figures[key] += int(value.split()[0])
        except OSError:
            continue
    return figures


# --- a consumer that follows the tail -----------------------------------------------------

def consume_tail(bootstrap: str, topic: str, partitions: int, expected: int, max_seconds: float,
                 ready, stamped: bool) -> dict:
    """Read ``expected`` records as they arrive; ``ready`` is set once the first fetch returned.

    It returns the wall-clock time of the last record; the caller times tail throughput
    from the producer's first send to it (records reach a tailing consumer no faster than
    they are written, so this is delivery throughput through the broker). With ``stamped`` values
    (first 8 bytes: send time) it also gives end-to-end latency, produce to consume.
    """
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-tail",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    try:
        consumer.list_topics(topic, timeout=10)
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        consumer.consume(1, timeout=0.5)  # connections up, fetches in flight: now the producer may start
        ready.set()
        count = size = 0
        last = 0.0
        latencies = []
        deadline = time.monotonic() + max_seconds
        while count < expected and time.monotonic() < deadline:
            # consume(n, timeout) returns only when n records arrived or the timeout passed, which
            # would add up to that wait to every latency; poll hands each record over as it comes.
            batch = [consumer.poll(0.2)] if stamped else consumer.consume(10_000, timeout=0.2)
            for message in batch:
                if message is None:
                    continue
                if message.error():
                    raise RuntimeError(f"consume: {message.error()}")
                value = message.value()
                if stamped:
                    latencies.append(time.time() - struct.unpack_from(">d", value)[0])
                count += 1
                size += len(value)
                last = time.time()
    finally:
        consumer.close()
    if count != expected:
        raise RuntimeError(f"tail consume: read {count} of {expected} records within {max_seconds} s")
    return {"records": count, "bytes": size, "last_at": last, **percentiles_ms(latencies)}


def produce_with_tail(broker, partitions: int, records: int, value_size: int, timeout: float,
                      config: dict | None = None, rate_bytes_s: float | None = None,
                      active: int | None = None) -> tuple[dict, dict]:
    """A producer and a tail consumer of all ``partitions`` of one fresh topic, the consumer started
    first; the producer writes to the first ``active`` partitions only, when given."""
    topic = create_topic(broker.bootstrap, partitions)
    ready = multiprocessing.get_context("spawn").Event()
    reader = start_child(consume_tail, broker.bootstrap, topic, partitions, records, timeout, ready,
                         rate_bytes_s is not None)
    if not ready.wait(60):
        finish_child(reader, 1)
    produced = finish_child(start_child(produce, broker.bootstrap, topic, records, value_size, timeout, config,
                                        rate_bytes_s, False, active), timeout + 30)
    return produced, finish_child(reader, timeout + 30)


# --- the workloads ------------------------------------------------------------------------

HEADLINE = {"value_size": 1024, "partitions": 16, "acks": "all", "linger_ms": 5}
SMALL = {"value_size": 100, "partitions": 1, "acks": "1", "linger_ms": 0}


def produce_cases(quick: bool) -> list[dict]:
    """The OMB-like produce matrix; --quick keeps the two corners that matter most."""
    if quick:
        return [HEADLINE, SMALL]
    return [{"value_size": v, "partitions": p, "acks": a, "linger_ms": linger}
            for v, p, a, linger in itertools.product((100, 1024), (1, 16), ("1", "all"), (0, 5))]


def case_name(case: dict) -> str:
    return f"produce {case['value_size']}B p{case['partitions']} acks={case['acks']} linger={case['linger_ms']}"


class Meter:
    """CPU seconds and bytes moved through one broker, for CPU seconds per GB."""

    def __init__(self, pid: int):
        self.pid = pid
        self.start = cpu_seconds(pid)

    def per_gb(self, moved_bytes: int) -> float:
        return (cpu_seconds(self.pid) - self.start) / (moved_bytes / GB)


def _records(case: dict, args) -> int:
    return args.records_1k if case["value_size"] >= 1024 else args.records_100b


def produce_workloads(broker, args) -> dict:
    """Every produce case through librdkafka; the headline case is read back from offset 0 as well."""
    pid = broker.process.pid
    results = {}
    for case in produce_cases(args.quick):
        topic = create_topic(broker.bootstrap, case["partitions"])
        meter = Meter(pid)
        produced = finish_child(start_child(produce, broker.bootstrap, topic, _records(case, args),
                                            case["value_size"], args.timeout,
                                            {"acks": case["acks"], "linger.ms": case["linger_ms"]}),
                                args.timeout + 30)
        results[case_name(case)] = {"mb_s": produced["bytes"] / produced["seconds"] / MB,
                                    "records_s": produced["records"] / produced["seconds"],
                                    "p50_ms": produced["p50_ms"], "p99_ms": produced["p99_ms"],
                                    "p999_ms": produced["p999_ms"],
                                    "cpu_s_per_gb": meter.per_gb(produced["bytes"])}
        if case == HEADLINE:
            meter = Meter(pid)
            consumed = finish_child(start_child(consume, broker.bootstrap, topic, case["partitions"],
                                                produced["records"], args.timeout), args.timeout + 30)
            results["consume cold 1024B p16"] = {"mb_s": consumed["bytes"] / consumed["seconds"] / MB,
                                                 "records_s": consumed["records"] / consumed["seconds"],
                                                 "cpu_s_per_gb": meter.per_gb(consumed["bytes"])}
    return results


def perf_test_workloads(broker, args) -> dict:
    """Kafka's kafka-producer-perf-test on the two quick produce cases, kafka-consumer-perf-test
    reading the headline one back: the Java client's view of the same workloads."""
    pid = broker.process.pid
    results = {}
    for case in (HEADLINE, SMALL):
        topic = create_topic(broker.bootstrap, case["partitions"])
        records = _records(case, args)
        meter = Meter(pid)
        produced = producer_perf(broker.bootstrap, topic, records, case["value_size"],
                                 {"acks": case["acks"], "linger.ms": case["linger_ms"]}, args.timeout)
        results["perf-test " + case_name(case)] = {
            "mb_s": produced["mb_s"], "records_s": produced["records_s"], "p50_ms": produced["p50_ms"],
            "p99_ms": produced["p99_ms"], "p999_ms": produced["p999_ms"],
            "cpu_s_per_gb": meter.per_gb(produced["records"] * case["value_size"])}
        if case == HEADLINE:
            meter = Meter(pid)
            consumed = consumer_perf(broker.bootstrap, topic, records, args.timeout)
            results["perf-test consume cold 1024B p16"] = {
                "mb_s": consumed["mb_s"], "records_s": consumed["records_s"],
                "cpu_s_per_gb": meter.per_gb(consumed["records"] * case["value_size"])}
    return results


def tail_workload(broker, args) -> dict:
    meter = Meter(broker.process.pid)
    produced, tail = produce_with_tail(broker, 16, args.records_1k, 1024, args.timeout)
    seconds = tail["last_at"] - produced["started_at"]
    return {"consume tail 1024B p16": {"mb_s": tail["bytes"] / seconds / MB, "records_s": tail["records"] / seconds,
                                       "cpu_s_per_gb": meter.per_gb(produced["bytes"] + tail["bytes"])}}


def fixed_rate_workload(broker, args, partitions: int, active: int | None) -> dict:
    """Produce-ack and end-to-end latency at ``--e2e-mb-s``; with ``active``, only that many
    partitions of the topic get records while the consumer is assigned every partition."""
    rate = args.e2e_mb_s * MB
    records = max(1000, int(rate * args.e2e_seconds / 1024))
    meter = Meter(broker.process.pid)
    produced, tail = produce_with_tail(broker, partitions, records, 1024, args.timeout + args.e2e_seconds,
                                       {"acks": "all", "linger.ms": args.e2e_linger_ms}, rate, active)
    name = f"fixed {args.e2e_mb_s:g} MB/s 1024B p{partitions}" + (f" ({active} active)" if active else "")
    return {name: {
        "mb_s": produced["bytes"] / produced["seconds"] / MB,
        "produce_p50_ms": produced["p50_ms"], "produce_p99_ms": produced["p99_ms"],
        "produce_p999_ms": produced["p999_ms"],
        "e2e_p50_ms": tail["p50_ms"], "e2e_p99_ms": tail["p99_ms"], "e2e_p999_ms": tail["p999_ms"],
        "cpu_s_per_gb": meter.per_gb(produced["bytes"] + tail["bytes"])}}


def clients_beside_idle_workload(broker, args) -> dict:
    """``--clients`` producers at full speed (1 KiB, acks=all, linger 5, together writing
    ``--records-1k`` records) while ``--idle-connections`` connections sit open, answered once.

    MB/s spans the first producer's first send to the last one's last acknowledgement;
    ack p50 is the clients' median, p99 the worst client's. ``idle_rss_mib`` is what the
    broker's resident set grew by when the idle connections were opened.
    """
    pid = broker.process.pid
    topic = create_topic(broker.bootstrap, 16)
    per_client = max(1, args.records_1k // args.clients)
    before = memory_kib(pid)["VmRSS"]
    with idle_connections(broker.bootstrap, args.idle_connections, args.timeout):
        idle_kib = memory_kib(pid)["VmRSS"] - before
        meter = Meter(pid)
        children = [start_child(produce, broker.bootstrap, topic, per_client, 1024, args.timeout,
                                {"acks": "all", "linger.ms": 5}) for _ in range(args.clients)]
        try:
            produced = [finish_child(child, args.timeout + 60) for child in children]
        finally:
            for process, _, _ in children:  # a failed client must not leave the others running
                if process.is_alive():
                    process.terminate()
                    process.join()
    moved = sum(result["bytes"] for result in produced)
    started = min(result["started_at"] for result in produced)
    ended = max(result["started_at"] + result["seconds"] for result in produced)
    name = f"{args.clients} producers 1024B p16 + {args.idle_connections} idle"
    return {name: {"mb_s": moved / (ended - started) / MB,
                   "p50_ms": statistics.median(result["p50_ms"] for result in produced),
                   "p99_ms": max(result["p99_ms"] for result in produced),
                   "cpu_s_per_gb": meter.per_gb(moved), "idle_rss_mib": idle_kib / 1024}}


def warm_up(broker, args) -> None:
    """An untimed produce and read-back before the first run, so that no broker's first figures
    carry its start-up (a JVM's compiler, a fresh process's first allocations)."""
    records = max(1000, args.records_1k // 2)
    topic = create_topic(broker.bootstrap, 16)
    finish_child(start_child(produce, broker.bootstrap, topic, records, 1024, args.timeout), args.timeout + 30)
    finish_child(start_child(consume, broker.bootstrap, topic, 16, records, args.timeout), args.timeout + 30)


def run_broker(broker, args, perf_tests: bool) -> dict:
    """One sample of every workload against one broker: name -> figures, and under "errors" the
    workloads that failed (a peer too slow for a workload's time limit must not void the run)."""
    steps = [produce_workloads, *([perf_test_workloads] if perf_tests else []), tail_workload,
             functools.partial(fixed_rate_workload, partitions=16, active=None),
             functools.partial(fixed_rate_workload, partitions=args.many_partitions, active=args.active_partitions),
             clients_beside_idle_workload]
    results: dict = {}
    errors = {}
    for step in steps:
        try:
            results.update(step(broker, args))
        except WORKLOAD_FAILURES as exc:
            errors[getattr(step, "func", step).__name__] = f"{type(exc).__name__}: {exc}"
    results["broker memory"] = {"peak_rss_mib": memory_kib(broker.process.pid)["VmHWM"] / 1024}
    if errors:
        results["errors"] = errors
    return results


def soak(broker, minutes: float, rate_mb_s: float) -> dict:
    """A producer paced at ``rate_mb_s`` for ``minutes``; the broker's RSS sampled each second.

    Producer only: on two cores a tail consumer as well would hold the producer well
    under the rate; the memory question is whether sustained writes make the broker grow.
    The topic keeps SOAK_RETENTION_BYTES per partition, so the broker rolls and deletes
    ledgers all along, as a long-running one does, and the disk does not fill (ten
    minutes at 200 MB/s is 120 GB).
    """
    pid = broker.process.pid
    seconds = minutes * 60
    records = int(rate_mb_s * MB * seconds / 1024) + 1
    topic = create_topic(broker.bootstrap, 16, {"retention.bytes": str(SOAK_RETENTION_BYTES),
                                                "segment.bytes": str(SOAK_RETENTION_BYTES // 4)})
    writer = start_child(produce, broker.bootstrap, topic, records, 1024, seconds,
                         {"acks": "all", "linger.ms": 5}, rate_mb_s * MB)
    samples = []
    deadline = time.monotonic() + seconds + 120
    while writer[0].is_alive() and time.monotonic() < deadline:
        samples.append(memory_kib(pid)["VmRSS"] / 1024)
        writer[0].join(1.0)
    produced = finish_child(writer, 120)
    return {"minutes": minutes, "rate_mb_s": rate_mb_s, "achieved_mb_s": produced["bytes"] / produced["seconds"] / MB,
            "rss_mib_start": samples[0] if samples else None, "rss_mib_max": max(samples, default=None),
            "rss_mib_end": samples[-1] if samples else None, "produce_p99_ms": produced["p99_ms"]}


# --- summary --------------------------------------------------------------------------------

PEERS = ("kgate-workers", "kafka", "kafka-flush", "tansu")
PEER_LABELS = {"kgate-workers": "kgate serve --workers {workers} (--workers; default one per core): a supervisor "
                                "holding the metadata store and {workers} broker processes, one cluster",
               "kafka": "Apache Kafka 4.4, default durability (page cache, no fsync per write)",
               "kafka-flush": "Apache Kafka 4.4, log.flush.interval.messages=1 (an fsync per append, as kgate)",
               "tansu": "Tansu 0.6.0, memory storage (no disk)"}
# Brokers the Java client's perf-test tools cannot measure, and why (printed with the table).
NO_JAVA_CLIENT = {"tansu": "Tansu 0.6.0 fails to decode the Java 4.4 client's requests (UnexpectedEof in its log; "
                           "every record times out), so it has no perf-test rows"}
LIMITS = {"loopback_mb_s": "MB/s  loopback TCP, 1 stream", "fsync_mb_s": "MB/s  1 MiB write+fsync",
          "fsync_4k_per_s": "/s    4 KiB write+fdatasync"}


def spread(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "samples": []}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "samples": values}


def summarise(runs: list[dict], peers: list[str]) -> dict:
    """Median/min/max of each figure per broker, and of each kgate/peer ratio taken run by run."""
    summary = {"limits": {key: spread([run["limits"][key] for run in runs]) for key in runs[0]["limits"]},
               "load_average": spread([run["load_average"] for run in runs]), "workloads": {}}
    limits = {key: value["median"] for key, value in summary["limits"].items()}
    figures_of: dict[str, dict] = {}  # every workload and figure any broker reported in any run, in order
    for run in runs:
        for broker in ["kgate", *peers]:
            for name, figures in run[broker].items():
                if name != "errors":
                    figures_of.setdefault(name, {}).update(dict.fromkeys(figures))
    for name, names in figures_of.items():
        entry = {}
        for figure in names:
            values = {broker: [run[broker].get(name, {}).get(figure) for run in runs] for broker in ["kgate", *peers]}
            entry[figure] = {broker: spread(samples) for broker, samples in values.items()}
            for peer in peers:
                entry[figure][f"kgate/{peer}"] = spread([k / p for k, p in zip(values["kgate"], values[peer])
                                                         if k is not None and p])
            if figure == "mb_s" and entry[figure]["kgate"]["median"] is not None:
                median = entry[figure]["kgate"]["median"]
                entry[figure]["kgate/loopback"] = median / limits["loopback_mb_s"]
                entry[figure]["kgate/fsync"] = median / limits["fsync_mb_s"]
        summary["workloads"][name] = entry
    return summary


def _cell(value) -> str:
    return "-" if value is None else f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3f}"


def print_table(summary: dict, args, peers: list[str], soak_result: dict | None) -> None:
    load = summary["load_average"]
    memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    print(f"\nmachine: {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
          f"shared with other work (1-minute load average at each run's start: {_cell(load['min'])}-"
          f"{_cell(load['max'])})")
    print(f"limits (median of {args.runs} runs, min-max):")
    for key, value in summary["limits"].items():
        print(f"  {_cell(value['median']):>10} {LIMITS[key]}  ({_cell(value['min'])}-{_cell(value['max'])})")
    print("brokers:")
    for peer in peers:
        print(f"  {peer:<13} {PEER_LABELS[peer].format(workers=args.workers)}")
    if any(peer.startswith("kafka") for peer in peers):
        print(f"  Kafka's JVM: {' '.join(BROKER_JVM)} (heap sized for a 2-core, 24 GiB machine shared with other "
              "work); perf-test rows are Kafka's Java tools, the other rows librdkafka")
    for peer in peers:
        if peer in NO_JAVA_CLIENT and args.perf_tests:
            print(f"  {NO_JAVA_CLIENT[peer]}")
    header = (f"{'workload':<40} {'figure':<15} {'kgate':>9} {'(min-max)':>19} "
              + " ".join(f"{peer:>11}" for peer in peers) + " "
              + " ".join(f"{'k/' + peer:>13}" for peer in peers) + f" {'/loopback':>9} {'/fsync':>7}")
    print("\n" + header)
    print("-" * len(header))
    for name, figures in summary["workloads"].items():
        for figure, entry in figures.items():
            kgate = entry["kgate"]
            limits = (f"{entry['kgate/loopback']:>9.3f} {entry['kgate/fsync']:>7.3f}"
                      if "kgate/loopback" in entry else f"{'':>9} {'':>7}")
            spread_text = f"({_cell(kgate['min'])}-{_cell(kgate['max'])})"
            print(f"{name:<40} {figure:<15} {_cell(kgate['median']):>9} {spread_text:>19} "
                  + " ".join(f"{_cell(entry[peer]['median']):>11}" for peer in peers) + " "
                  + " ".join(f"{_cell(entry['kgate/' + peer]['median']):>13}" for peer in peers) + f" {limits}")
    if soak_result and "error" not in soak_result:
        print(f"\nsoak: {soak_result['minutes']:g} min at {soak_result['rate_mb_s']:.1f} MB/s "
              f"(achieved {soak_result['achieved_mb_s']:.1f}): kgate RSS start {_cell(soak_result['rss_mib_start'])} "
              f"MiB, max {_cell(soak_result['rss_mib_max'])} MiB, end {_cell(soak_result['rss_mib_end'])} MiB")


def _peers(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer {', '.join(unknown)}; known: {', '.join(PEERS)}")
    return names


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.side_by_side", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two produce cases, fewer records, 2 runs, no soak")
    parser.add_argument("--runs", type=int, help="samples of every figure (default 3, quick 2)")
    parser.add_argument("--peers", type=_peers, default=list(PEERS),
                        help=f"brokers measured beside kgate, comma-separated (default {','.join(PEERS)})")
    parser.add_argument("--records-1k", type=int, help="1 KiB records per produce (default 300000, quick 60000)")
    parser.add_argument("--records-100b", type=int, help="100 B records per produce (default 600000, quick 150000)")
    parser.add_argument("--e2e-mb-s", type=float, default=20.0, help="fixed rate of the latency workloads (MB/s)")
    parser.add_argument("--e2e-linger-ms", type=float, default=1.0,
                        help="linger.ms of the fixed-rate producer (default 1; 0 sends a request per record)")
    parser.add_argument("--e2e-seconds", type=float, help="length of each fixed-rate workload (default 10, quick 4)")
    parser.add_argument("--many-partitions", type=int, default=1000,
                        help="partitions of the fixed-rate topic most of which stay idle (default 1000)")
    parser.add_argument("--active-partitions", type=int, default=10, help="of those, how many get records (10)")
    parser.add_argument("--clients", type=int, default=10, help="producers at once beside the idle connections")
    parser.add_argument("--idle-connections", type=int, default=1000, help="idle connections held open (1000)")
    parser.add_argument("--no-perf-tests", dest="perf_tests", action="store_false",
                        help="leave out Kafka's kafka-producer/consumer-perf-test (the Java client)")
    parser.add_argument("--soak-minutes", type=float, help="soak length at 80%% of peak (default 10, quick 0 = none)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per produce or consume")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="broker processes of the kgate-workers peer (serve --workers; default one per core)")
    parser.add_argument("--data-dir", help="parent of the brokers' temporary directories (default: system temp)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results file")
    args = parser.parse_args(argv)
    defaults = ({"runs": 2, "records_1k": 60_000, "records_100b": 150_000, "e2e_seconds": 4, "soak_minutes": 0}
                if args.quick else
                {"runs": 3, "records_1k": 300_000, "records_100b": 600_000, "e2e_seconds": 10, "soak_minutes": 10})
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.runs, args.records_1k, args.records_100b, args.clients, args.active_partitions) <= 0 \
            or args.soak_minutes < 0 or args.idle_connections < 0 or args.many_partitions < args.active_partitions:
        parser.error("--runs, record counts, --clients and --active-partitions must be > 0, --soak-minutes and "
                     "--idle-connections >= 0, --many-partitions >= --active-partitions")
    return args


def start_brokers(work_dir: str, peers: list[str], workers: int) -> dict:
    """kgate and the peers, each in its own directory, all started before the first run (in order,
    so a failed start stops those already running)."""
    # Retention checked every few seconds (Kafka's default is 5 minutes) for the soak's topic.
    kgate_settings = {"log.retention.check.interval.ms": 5000}
    made = {
        "kgate": lambda: BrokerProcess(os.path.join(work_dir, "kgate"), kgate_settings),
        "kgate-workers": lambda: BrokerProcess(os.path.join(work_dir, "kgate-workers"), kgate_settings,
                                               workers=workers),
        "kafka": lambda: KafkaBroker(os.path.join(work_dir, "kafka"), jvm_options=BROKER_JVM),
        "kafka-flush": lambda: KafkaBroker(os.path.join(work_dir, "kafka-flush"),
                                           {"log.flush.interval.messages": "1"}, jvm_options=BROKER_JVM),
        "tansu": lambda: TansuProcess(os.path.join(work_dir, "tansu.log")),
    }
    brokers: dict = {}
    try:
        for name in ["kgate", *peers]:
            brokers[name] = made[name]()
            brokers[name].start()
    except BaseException:
        stop_brokers(brokers)
        raise
    return brokers


def stop_brokers(brokers: dict) -> None:
    for broker in reversed(list(brokers.values())):
        broker.stop()


def measure(brokers: dict, work_dir: str, args) -> tuple[list[dict], dict | None]:
    """Every run (limits, then each broker in turn) and the soak of kgate alone."""
    runs, soak_result = [], None
    for broker in brokers.values():
        warm_up(broker, args)
    for run in range(1, args.runs + 1):
        sample = {"load_average": os.getloadavg()[0],
                  "limits": {"loopback_mb_s": loopback_throughput() / MB,
                             "fsync_mb_s": fsync_throughput(work_dir) / MB,
                             "fsync_4k_per_s": fsync_rate(work_dir)}}
        for name, broker in brokers.items():
            sample[name] = run_broker(broker, args, args.perf_tests and name not in NO_JAVA_CLIENT)
            print(f"run {run}/{args.runs} {name}: " + ", ".join(
                f"{k} {v.get('mb_s', 0):,.1f} MB/s" for k, v in sample[name].items() if "mb_s" in v), flush=True)
            for step, error in sample[name].get("errors", {}).items():
                print(f"run {run}/{args.runs} {name}: {step} failed: {error}", file=sys.stderr, flush=True)
        runs.append(sample)
    if args.soak_minutes > 0:
        peaks = [run["kgate"][case_name(HEADLINE)]["mb_s"] for run in runs if case_name(HEADLINE) in run["kgate"]]
        peak = statistics.median(peaks or [args.e2e_mb_s / 0.8])  # no headline figure: soak at the fixed rate
        for name in list(brokers)[1:]:  # the soak measures kgate alone
            brokers[name].stop()
        try:  # the runs' figures are reported even if the soak fails
            soak_result = soak(brokers["kgate"], args.soak_minutes, 0.8 * peak)
        except (RuntimeError, TimeoutError) as exc:
            soak_result = {"error": str(exc)}
            print(f"soak failed: {exc}", file=sys.stderr)
    return runs, soak_result


def main(argv=None) -> int:
    args = parse_args(argv)
    work_dir = tempfile.mkdtemp(prefix="kgate-bench-", dir=args.data_dir)
    completed = False
    try:
        brokers = start_brokers(work_dir, args.peers, args.workers)
        try:
            runs, soak_result = measure(brokers, work_dir, args)
        finally:
            stop_brokers(brokers)
        completed = True
    finally:
        clean_up(work_dir, completed)

    summary = summarise(runs, args.peers)
    print_table(summary, args, args.peers, soak_result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "side_by_side",
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "machine": {**machine(), "kafka_jvm": BROKER_JVM},
        "summary": summary, "runs": runs, "soak": soak_result,
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output.name} under {args.output.parent.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
