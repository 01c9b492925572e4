"""kgate beside a native peer broker (Tansu) and the machine's limits, in one run.

The question users ask first is how much slower a Python gateway is than a native
broker, and where the time goes. Figures from different runs on a shared machine are
not comparable, so every run measures kgate, Tansu and the machine's limits (loopback
TCP, sequential write+fsync) back to back, and each kgate/Tansu ratio is taken pair
by pair (same run, same workload) before the median is taken.

Workloads (OpenMessaging-Benchmark-like):
- produce: 100 B and 1 KiB records x 1 and 16 partitions x acks=1/all x linger 0/5 ms;
  throughput plus p50/p99/p99.9 of the produce acknowledgement;
- end-to-end latency at a fixed rate below saturation (1 KiB records at 20 MB/s);
- consume from the tail (consumer running while a full-speed producer writes) and from
  cold storage (offset 0 after the produce finished);
- broker CPU seconds per GB moved and peak RSS, read from /proc by PID;
- a soak at 80% of kgate's peak produce throughput, sampling the broker's RSS.

Run from the repository root (after scripts/setup-bench):
    .venv/bin/python -m bench.side_by_side [--quick] [--soak-minutes N]
"""
import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

from bench.peer import TansuProcess
from bench.produce_consume import (
    MB,
    clean_up,
    consume,
    create_topic,
    finish_child,
    fsync_throughput,
    loopback_throughput,
    machine,
    percentiles_ms,
    produce,
    start_child,
)
from tests.support.broker_process import BrokerProcess

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "side_by_side.json"
GB = 1_000_000_000
SOAK_RETENTION_BYTES = 256 * 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the broker process, seen from /proc ------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User+system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_kib(pid: int) -> dict:
    """Resident set now (VmRSS) and its peak so far (VmHWM), in KiB."""
    figures = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = int(value.split()[0])
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
                      config: dict | None = None, rate_bytes_s: float | None = None) -> tuple[dict, dict]:
    """A producer and a tail consumer on one fresh topic, the consumer started first."""
    topic = create_topic(broker.bootstrap, partitions)
    ready = multiprocessing.get_context("spawn").Event()
    reader = start_child(consume_tail, broker.bootstrap, topic, partitions, records, timeout, ready,
                         rate_bytes_s is not None)
    if not ready.wait(60):
        finish_child(reader, 1)
    produced = finish_child(start_child(produce, broker.bootstrap, topic, records, value_size, timeout, config,
                                        rate_bytes_s), timeout + 30)
    return produced, finish_child(reader, timeout + 30)


# --- the workloads ------------------------------------------------------------------------

def produce_cases(quick: bool) -> list[dict]:
    """The OMB-like produce matrix; --quick keeps the two corners that matter most."""
    if quick:
        return [{"value_size": 1024, "partitions": 16, "acks": "all", "linger_ms": 5},
                {"value_size": 100, "partitions": 1, "acks": "1", "linger_ms": 0}]
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


def run_broker(broker, args) -> dict:
    """One sample of every workload against one broker: name -> figures."""
    pid = broker.process.pid
    results = {}
    for case in produce_cases(args.quick):
        records = args.records_1k if case["value_size"] >= 1024 else args.records_100b
        topic = create_topic(broker.bootstrap, case["partitions"])
        meter = Meter(pid)
        produced = finish_child(start_child(produce, broker.bootstrap, topic, records, case["value_size"],
                                            args.timeout, {"acks": case["acks"], "linger.ms": case["linger_ms"]}),
                                args.timeout + 30)
        results[case_name(case)] = {"mb_s": produced["bytes"] / produced["seconds"] / MB,
                                    "records_s": produced["records"] / produced["seconds"],
                                    "p50_ms": produced["p50_ms"], "p99_ms": produced["p99_ms"],
                                    "p999_ms": produced["p999_ms"],
                                    "cpu_s_per_gb": meter.per_gb(produced["bytes"])}
        if case == produce_cases(True)[0]:  # the headline case: read it back from cold storage too
            meter = Meter(pid)
            consumed = finish_child(start_child(consume, broker.bootstrap, topic, case["partitions"],
                                                produced["records"], args.timeout), args.timeout + 30)
            results["consume cold 1024B p16"] = {"mb_s": consumed["bytes"] / consumed["seconds"] / MB,
                                                 "records_s": consumed["records"] / consumed["seconds"],
                                                 "cpu_s_per_gb": meter.per_gb(consumed["bytes"])}

    meter = Meter(pid)
    produced, tail = produce_with_tail(broker, 16, args.records_1k, 1024, args.timeout)
    seconds = tail["last_at"] - produced["started_at"]
    results["consume tail 1024B p16"] = {"mb_s": tail["bytes"] / seconds / MB, "records_s": tail["records"] / seconds,
                                         "cpu_s_per_gb": meter.per_gb(produced["bytes"] + tail["bytes"])}

    rate = args.e2e_mb_s * MB
    records = max(1000, int(rate * args.e2e_seconds / 1024))
    produced, tail = produce_with_tail(broker, 16, records, 1024, args.timeout + args.e2e_seconds,
                                       {"acks": "all", "linger.ms": args.e2e_linger_ms}, rate)
    results[f"fixed {args.e2e_mb_s:g} MB/s 1024B p16"] = {
        "mb_s": produced["bytes"] / produced["seconds"] / MB,
        "produce_p50_ms": produced["p50_ms"], "produce_p99_ms": produced["p99_ms"],
        "produce_p999_ms": produced["p999_ms"],
        "e2e_p50_ms": tail["p50_ms"], "e2e_p99_ms": tail["p99_ms"], "e2e_p999_ms": tail["p999_ms"]}
    results["broker memory"] = {"peak_rss_mib": memory_kib(pid)["VmHWM"] / 1024}
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

def spread(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "samples": []}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "samples": values}


def summarise(runs: list[dict]) -> dict:
    """Median/min/max of each figure per broker, and of the kgate/Tansu ratio taken run by run."""
    summary = {"limits": {key: spread([run["limits"][key] for run in runs]) for key in runs[0]["limits"]},
               "workloads": {}}
    limits = {key: value["median"] for key, value in summary["limits"].items()}
    for name in runs[0]["kgate"]:
        entry = {}
        for figure in runs[0]["kgate"][name]:
            kgate = [run["kgate"][name][figure] for run in runs]
            tansu = [run["tansu"].get(name, {}).get(figure) for run in runs]
            ratios = [k / t for k, t in zip(kgate, tansu) if k is not None and t]
            entry[figure] = {"kgate": spread(kgate), "tansu": spread(tansu), "kgate_over_tansu": spread(ratios)}
            if figure == "mb_s":
                median = entry[figure]["kgate"]["median"]
                entry[figure]["kgate_vs_loopback"] = median / limits["loopback_mb_s"]
                entry[figure]["kgate_vs_fsync"] = median / limits["fsync_mb_s"]
        summary["workloads"][name] = entry
    return summary


def _cell(value) -> str:
    return "-" if value is None else f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3f}"


def print_table(summary: dict, args, soak_result: dict | None) -> None:
    print(f"\nmachine limits (median of {args.runs}):")
    for key, value in summary["limits"].items():
        print(f"  {key:<16} {_cell(value['median']):>10} MB/s  (min {_cell(value['min'])}, max {_cell(value['max'])})")
    header = (f"{'workload':<36} {'figure':<16} {'kgate':>9} {'(min-max)':>19} {'tansu':>9} {'kgate/tansu':>11} "
              f"{'/loopback':>9} {'/fsync':>7}")
    print("\n" + header)
    print("-" * len(header))
    for name, figures in summary["workloads"].items():
        for figure, entry in figures.items():
            kgate, tansu, ratio = entry["kgate"], entry["tansu"], entry["kgate_over_tansu"]
            limits = (f"{entry['kgate_vs_loopback']:>9.3f} {entry['kgate_vs_fsync']:>7.3f}"
                      if "kgate_vs_loopback" in entry else f"{'':>9} {'':>7}")
            spread_text = f"({_cell(kgate['min'])}-{_cell(kgate['max'])})"
            print(f"{name:<36} {figure:<16} {_cell(kgate['median']):>9} {spread_text:>19} "
                  f"{_cell(tansu['median']):>9} {_cell(ratio['median']):>11} {limits}")
    if soak_result and "error" not in soak_result:
        print(f"\nsoak: {soak_result['minutes']:g} min at {soak_result['rate_mb_s']:.1f} MB/s "
              f"(achieved {soak_result['achieved_mb_s']:.1f}): kgate RSS start {_cell(soak_result['rss_mib_start'])} "
              f"MiB, max {_cell(soak_result['rss_mib_max'])} MiB, end {_cell(soak_result['rss_mib_end'])} MiB")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.side_by_side", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two produce cases, fewer records, 2 runs, no soak")
    parser.add_argument("--runs", type=int, help="samples of every figure (default 3, quick 2)")
    parser.add_argument("--records-1k", type=int, help="1 KiB records per produce (default 300000, quick 60000)")
    parser.add_argument("--records-100b", type=int, help="100 B records per produce (default 600000, quick 150000)")
    parser.add_argument("--e2e-mb-s", type=float, default=20.0, help="fixed rate of the latency workload (MB/s)")
    parser.add_argument("--e2e-linger-ms", type=float, default=1.0,
                        help="linger.ms of the fixed-rate producer (default 1; 0 sends a request per record)")
    parser.add_argument("--e2e-seconds", type=float, help="length of the fixed-rate workload (default 10, quick 4)")
    parser.add_argument("--soak-minutes", type=float, help="soak length at 80%% of peak (default 10, quick 0 = none)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per produce or consume")
    parser.add_argument("--data-dir", help="parent of the temporary kgate data directory (default: system temp)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results file")
    args = parser.parse_args(argv)
    defaults = ({"runs": 2, "records_1k": 60_000, "records_100b": 150_000, "e2e_seconds": 4, "soak_minutes": 0}
                if args.quick else
                {"runs": 3, "records_1k": 300_000, "records_100b": 600_000, "e2e_seconds": 10, "soak_minutes": 10})
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.runs <= 0 or args.records_1k <= 0 or args.records_100b <= 0 or args.soak_minutes < 0:
        parser.error("--runs and record counts must be > 0, --soak-minutes >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    work_dir = tempfile.mkdtemp(prefix="kgate-bench-", dir=args.data_dir)
    # Retention checked every few seconds (Kafka's default is 5 minutes) for the soak's topic.
    kgate = BrokerProcess(os.path.join(work_dir, "kgate"), {"log.retention.check.interval.ms": 5000})
    tansu = TansuProcess(os.path.join(work_dir, "tansu.log"))
    runs, soak_result, completed = [], None, False
    try:
        kgate.start()
        tansu.start()
        for run in range(1, args.runs + 1):
            sample = {"limits": {"loopback_mb_s": loopback_throughput() / MB,
                                 "fsync_mb_s": fsync_throughput(work_dir) / MB}}
            for name, broker in (("kgate", kgate), ("tansu", tansu)):
                sample[name] = run_broker(broker, args)
                print(f"run {run}/{args.runs} {name}: " + ", ".join(
                    f"{k} {v.get('mb_s', 0):,.1f} MB/s" for k, v in sample[name].items() if "mb_s" in v), flush=True)
            runs.append(sample)
        if args.soak_minutes > 0:
            peak = statistics.median(run["kgate"][case_name(produce_cases(True)[0])]["mb_s"] for run in runs)
            tansu.stop()  # the soak measures kgate alone
            try:  # the runs' figures are reported even if the soak fails
                soak_result = soak(kgate, args.soak_minutes, 0.8 * peak)
            except (RuntimeError, TimeoutError) as exc:
                soak_result = {"error": str(exc)}
                print(f"soak failed: {exc}", file=sys.stderr)
        completed = True
    finally:
        tansu.stop()
        kgate.stop()
        clean_up(work_dir, completed)

    summary = summarise(runs)
    print_table(summary, args, soak_result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "side_by_side",
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "machine": machine(),
        "summary": summary, "runs": runs, "soak": soak_result,
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output.name} under {args.output.parent.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
