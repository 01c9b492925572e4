"""Produce and consume throughput of one kgate broker, beside the machine's own limits.

A throughput figure means little on its own, so every run also measures what this
machine can do at that moment: loopback TCP (the ceiling for any client-broker
stream) and 1 MiB write+fsync (the ceiling for acks=all, which waits for fsync).
Clients run in spawned processes so the load generator never shares a GIL, or
inherited librdkafka threads, with the process that measures and reports.

Run from the repository root:  .venv/bin/python -m bench.produce_consume --help
"""
import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

MIB = 1024 * 1024
MB = 1_000_000
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "produce_consume.json"
# Distinct random values cycled by the producer: incompressible, yet generated once.
VALUE_POOL = 4096


# --- running a function in a child process -------------------------------------------

def _child_main(conn, target, args):
    try:
        conn.send(("ok", target(*args)))
    except BaseException as exc:  # the parent must learn why, whatever it was
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def start_child(target, *args):
    """Start ``target(*args)`` in a fresh interpreter; ``finish_child`` collects its result."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(sender, target, args), daemon=True)
    process.start()
    sender.close()
    return process, receiver, target.__name__


def finish_child(child, timeout: float):
    """The child's return value; a child that fails or overruns is ended by its PID."""
    process, receiver, name = child
    try:
        if not receiver.poll(timeout):
            raise TimeoutError(f"{name} gave no result within {timeout:.0f} s")
        try:
            status, value = receiver.recv()
        except EOFError:
            raise RuntimeError(f"{name} exited without a result") from None
    finally:
        receiver.close()
        process.join(5)
        if process.is_alive():
            process.terminate()
            process.join()
    if status != "ok":
        raise RuntimeError(f"{name}: {value}")
    return value


# --- the machine's limits --------------------------------------------------------------

def _send_chunks(port: int, max_bytes: int, max_seconds: float) -> int:
    chunk = os.urandom(MIB)
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        deadline = time.monotonic() + max_seconds
        while sent < max_bytes and time.monotonic() < deadline:
            sock.sendall(chunk)
            sent += len(chunk)
        sock.shutdown(socket.SHUT_WR)
    return sent


def loopback_throughput(max_bytes: int = 2 * 1024 * MIB, max_seconds: float = 3.0) -> float:
    """Bytes/s of one TCP stream over 127.0.0.1, sender in another process."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        child = start_child(_send_chunks, server.getsockname()[1], max_bytes, max_seconds)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(30)
            buffer = memoryview(bytearray(MIB))
            received = 0
            start = time.perf_counter()
            deadline = time.monotonic() + max_seconds + 30
            while time.monotonic() < deadline:
                n = conn.recv_into(buffer)
                if not n:
                    break
                received += n
            elapsed = time.perf_counter() - start
    sent = finish_child(child, 30)
    if received != sent:
        raise RuntimeError(f"loopback: sent {sent} bytes, received {received}")
    return received / elapsed


def fsync_throughput(directory: str, total: int = 256 * MIB, max_seconds: float = 20.0) -> float:
    """Bytes/s of 1 MiB write+fsync in the broker's data directory (same disk as its ledgers)."""
    return _synced_writes(directory, MIB, total, max_seconds, os.fsync)[0]


def fsync_rate(directory: str, block: int = 4096, max_seconds: float = 3.0) -> float:
    """Small write+fdatasync calls per second: the ceiling on durable appends of small requests
    (a broker that fsyncs each append, as Kafka with flush.messages=1 does, takes at most this many)."""
    return _synced_writes(directory, block, 64 * MIB, max_seconds, os.fdatasync)[1]


def _synced_writes(directory: str, block_size: int, total: int, max_seconds: float, sync) -> tuple[float, float]:
    """(bytes/s, syncs/s) of sequential ``block_size`` writes each followed by ``sync``, in ``directory``."""
    block = os.urandom(block_size)
    fd, path = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
    try:
        written = syncs = 0
        start = time.perf_counter()
        while written < total and time.perf_counter() - start < max_seconds:
            written += os.write(fd, block)
            sync(fd)
            syncs += 1
        elapsed = time.perf_counter() - start
        return written / elapsed, syncs / elapsed
    finally:
        os.close(fd)
        os.unlink(path)


# --- the broker, driven by confluent-kafka ---------------------------------------------

def create_topic(bootstrap: str, partitions: int, config: dict | None = None) -> str:
    """A fresh topic per run, so each consume reads exactly what its produce wrote."""
    name = f"bench-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10,
                                  request_timeout=20)
    futures[name].result(timeout=30)
    return name


def percentiles_ms(seconds: list[float]) -> dict:
    """p50/p99/p99.9 in milliseconds of latency samples in seconds (nearest rank)."""
    if not seconds:
        return {"p50_ms": None, "p99_ms": None, "p999_ms": None}
    ordered = sorted(seconds)

    def rank(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50_ms": rank(0.50), "p99_ms": rank(0.99), "p999_ms": rank(0.999)}


def produce(bootstrap: str, topic: str, records: int, value_size: int, max_seconds: float,
            config: dict | None = None, rate_bytes_s: float | None = None, requests: bool = False,
            partitions: int | None = None) -> dict:
    """Timed from the first produce() call to the last delivery report; metadata is fetched before.

    ``config`` overrides the producer settings (default acks=all, linger.ms=5). With
    ``rate_bytes_s`` the producer paces itself to that rate, stops sending after
    ``max_seconds`` (then flushes, so allow time for that) and stamps each value's first
    8 bytes with its send time (wall clock, so a consumer process can compute end-to-end
    latency). Acknowledgement latency comes from librdkafka's own per-message figure, so
    it includes the time a record waits in the producer's queue. With ``requests`` the
    result also says, from librdkafka's statistics, how many produce requests were sent,
    how many awaited a response (median of the samples) and how full the queue got. With
    ``partitions`` records go round-robin to partitions 0..partitions-1 only (the rest of
    the topic stays idle); without it the default partitioner spreads them over all.
    """
    values = [os.urandom(value_size) for _ in range(VALUE_POOL)]
    samples = []
    extra = {"statistics.interval.ms": 100, "stats_cb": lambda text: samples.append(json.loads(text))} \
        if requests else {}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         **(config or {}), **extra})
    producer.list_topics(topic, timeout=10)
    outcome = {"delivered": 0, "failed": 0, "error": None, "last": 0.0}
    latencies = []

    def on_delivery(error, message):
        if error is None:
            outcome["delivered"] += 1
            latencies.append(message.latency())
        else:
            outcome["failed"] += 1
            outcome["error"] = str(error)
        outcome["last"] = time.perf_counter()

    deadline = time.monotonic() + max_seconds
    start = time.perf_counter()
    for i in range(records):
        value = values[i % VALUE_POOL]
        if rate_bytes_s:
            if time.monotonic() > deadline:  # a paced run is bounded in time: stop sending, then flush
                break
            wait = start + i * value_size / rate_bytes_s - time.perf_counter()
            if wait > 0:
                producer.poll(wait)
            value = struct.pack(">d", time.time()) + value[8:]
        while True:
            try:
                if partitions:
                    producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                else:
                    producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain it
                if time.monotonic() > deadline:
                    raise TimeoutError(f"produce: queue still full after {max_seconds} s") from None
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    grace = 60.0 if rate_bytes_s else 0.0  # a paced run stops sending at the deadline and still flushes
    undelivered = producer.flush(max(0.0, deadline - time.monotonic()) + grace)
    if undelivered or outcome["failed"]:
        raise RuntimeError(f"produce: {undelivered} undelivered, {outcome['failed']} failed ({outcome['error']})")
    result = {"records": outcome["delivered"], "bytes": outcome["delivered"] * value_size,
              "seconds": outcome["last"] - start, "started_at": time.time() - (time.perf_counter() - start),
              **percentiles_ms(latencies)}
    if requests:
        producer.poll(0.3)  # one more statistics sample, taken after the flush
        result.update(_request_figures(samples))
    return result


def _request_figures(samples: list[dict]) -> dict:
    """What librdkafka's statistics say of the one broker a producer sent to."""
    brokers = [[b for b in sample["brokers"].values() if b["nodeid"] >= 0][0] for sample in samples]
    return {"requests": brokers[-1]["tx"], "in_flight_median": statistics.median(b["waitresp_cnt"] for b in brokers),
            "queue_max": max(sample["msg_cnt"] for sample in samples)}


def consume(bootstrap: str, topic: str, partitions: int, expected: int, max_seconds: float,
            config: dict | None = None) -> dict:
    """Timed from assign() to the last expected record; partitions are assigned, no group joins.
    ``config``: more librdkafka settings."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                         "enable.auto.commit": False, **(config or {})})
    try:
        consumer.list_topics(topic, timeout=10)
        count = size = 0
        deadline = time.monotonic() + max_seconds
        start = time.perf_counter()
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error():
                    raise RuntimeError(f"consume: {message.error()}")
                count += 1
                size += len(message.value())
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if count != expected:
        raise RuntimeError(f"consume: read {count} of {expected} records within {max_seconds} s")
    return {"records": count, "bytes": size, "seconds": elapsed}


# --- runs, summary, report --------------------------------------------------------------

# key -> (label, unit); MB/s figures get ratios to the limits.
FIGURES = {
    "loopback_mb_s": ("loopback TCP, 1 stream", "MB/s"),
    "fsync_mb_s": ("disk 1 MiB write+fsync", "MB/s"),
    "produce_mb_s": ("produce acks=all", "MB/s"),
    "produce_records_s": ("produce acks=all", "records/s"),
    "consume_mb_s": ("consume from offset 0", "MB/s"),
    "consume_records_s": ("consume from offset 0", "records/s"),
}


def one_run(broker: BrokerProcess, work_dir: str, args) -> dict:
    """One sample of every figure; the limits are measured while the broker is idle."""
    figures = {"loopback_mb_s": loopback_throughput() / MB, "fsync_mb_s": fsync_throughput(work_dir) / MB}
    topic = create_topic(broker.bootstrap, args.partitions)
    produced = finish_child(start_child(produce, broker.bootstrap, topic, args.records, args.value_size,
                                        args.timeout), args.timeout + 30)
    consumed = finish_child(start_child(consume, broker.bootstrap, topic, args.partitions, produced["records"],
                                        args.timeout), args.timeout + 30)
    if consumed["bytes"] != produced["bytes"]:
        raise RuntimeError(f"consumed {consumed['bytes']} value bytes, produced {produced['bytes']}")
    for name, result in (("produce", produced), ("consume", consumed)):
        figures[f"{name}_mb_s"] = result["bytes"] / result["seconds"] / MB
        figures[f"{name}_records_s"] = result["records"] / result["seconds"]
    return figures


def summarise(samples: dict[str, list[float]]) -> dict:
    medians = {key: statistics.median(values) for key, values in samples.items()}
    summary = {}
    for key, (label, unit) in FIGURES.items():
        entry = {"label": label, "unit": unit, "samples": samples[key], "median": medians[key],
                 "min": min(samples[key]), "max": max(samples[key])}
        if unit == "MB/s":
            entry["median_vs_loopback"] = medians[key] / medians["loopback_mb_s"]
            entry["median_vs_fsync"] = medians[key] / medians["fsync_mb_s"]
        summary[key] = entry
    return summary


def print_table(summary: dict, args) -> None:
    print(f"\nkgate produce/consume: {args.records} records x {args.value_size} B, "
          f"{args.partitions} partitions, {args.runs} runs (MB = 10^6 bytes)")
    header = f"{'figure':<24} {'unit':<10} {'median':>10} {'min':>10} {'max':>10} {'/loopback':>10} {'/fsync':>8}"
    print(header)
    print("-" * len(header))
    for entry in summary.values():
        ratios = (f"{entry['median_vs_loopback']:>10.3f} {entry['median_vs_fsync']:>8.3f}"
                  if "median_vs_loopback" in entry else f"{'-':>10} {'-':>8}")
        print(f"{entry['label']:<24} {entry['unit']:<10} {entry['median']:>10,.1f} {entry['min']:>10,.1f} "
              f"{entry['max']:>10,.1f} {ratios}")


def clean_up(work_dir: str, completed: bool) -> None:
    """Delete the benchmark's directory after a good run; keep it, and say where, after a failed one."""
    if completed:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        print(f"benchmark failed; broker data and logs kept in {work_dir}", file=sys.stderr)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0]}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.produce_consume", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=600_000, help="records per produce run (default 600000)")
    parser.add_argument("--runs", type=int, default=3, help="samples of every figure (default 3)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of each run's topic (default 6)")
    parser.add_argument("--value-size", type=int, default=1024, help="bytes per record value (default 1024)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per produce or consume")
    parser.add_argument("--data-dir", help="parent of the temporary broker data directory (default: system temp)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results file (default bench/results/produce_consume.json)")
    args = parser.parse_args(argv)
    for name in ("records", "runs", "partitions", "value_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    return args


@contextlib.contextmanager
def broker_in_temp_dir(parent: str | None = None):
    """A started broker in a fresh temporary directory, stopped after; the directory is
    deleted unless the body failed (then it says where the broker's log is)."""
    work_dir = tempfile.mkdtemp(prefix="kgate-bench-", dir=parent)
    broker = BrokerProcess(os.path.join(work_dir, "broker"))
    completed = False
    try:
        broker.start()
        yield broker, work_dir
        completed = True
    finally:
        broker.stop()
        clean_up(work_dir, completed)


def write_report(path: Path, benchmark: str, settings: dict, figures: dict, **extra) -> None:
    """The figures as JSON, with when and on what client versions they were measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": benchmark,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": settings,
        "machine": machine(),
        "figures": figures,
        **extra,
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {path.name} under {path.parent.name}/")


def main(argv=None) -> int:
    args = parse_args(argv)
    samples = {key: [] for key in FIGURES}
    with broker_in_temp_dir(args.data_dir) as (broker, work_dir):
        for run in range(1, args.runs + 1):
            for key, value in one_run(broker, work_dir, args).items():
                samples[key].append(value)
            print(f"run {run}/{args.runs}: " + ", ".join(f"{k} {samples[k][-1]:,.0f}" for k in FIGURES), flush=True)

    summary = summarise(samples)
    print_table(summary, args)
    write_report(args.output, "produce_consume",
                 {"records": args.records, "runs": args.runs, "partitions": args.partitions,
                  "value_size": args.value_size, "acks": "all", "linger_ms": 5}, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
