"""Kafka's own load tools, kafka-producer-perf-test and kafka-consumer-perf-test, against any broker.

librdkafka is the client every side-by-side figure uses; a Kafka user checks a broker
with the Java client's perf-test tools instead, and the two clients batch and fetch
differently. Printing the tools' figures beside librdkafka's shows whether a ratio is
the broker's or the client's. The tools run as their bin/ scripts do
(``conformance.kafka_broker.tool_command``); their summary lines are parsed here.

MB in the results is 10^6 bytes, as in the rest of bench/ (the tools print MiB).
"""
import re
import subprocess

from conformance.kafka_broker import tool_command

MB = 1_000_000
MIB = 1024 * 1024

# "60000 records sent, 10045.2 records/sec (9.81 MB/sec), 938.80 ms avg latency, 1516.00 ms max latency,
#  970 ms 50th, 1463 ms 95th, 1506 ms 99th, 1515 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_s>[\d.]+) records/sec \((?P<mib_s>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th")
_CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB"


def parse_producer_perf(output: str, record_size: int) -> dict:
    """The final summary line of kafka-producer-perf-test (its interval lines come before it)."""
    matches = list(_PRODUCER_SUMMARY.finditer(output))
    if not matches:
        raise ValueError(f"no kafka-producer-perf-test summary in: {output[-500:]!r}")
    found = matches[-1]
    records_s = float(found["records_s"])
    return {"records": int(found["records"]), "records_s": records_s, "mb_s": records_s * record_size / MB,
            "p50_ms": float(found["p50"]), "p99_ms": float(found["p99"]), "p999_ms": float(found["p999"])}


def parse_consumer_perf(output: str) -> dict:
    """The line after kafka-consumer-perf-test's CSV header; throughput over its fetch time (the
    tool's fetch.* columns), which leaves out the group join (rebalance.time.ms, kept apart)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith(_CONSUMER_HEADER):
            names = [name.strip() for name in line.split(",")]
            values = dict(zip(names, (value.strip() for value in lines[index + 1].split(","))))
            return {"records": int(values["data.consumed.in.nMsg"]),
                    "records_s": float(values["fetch.nMsg.sec"]),
                    "mb_s": float(values["fetch.MB.sec"]) * MIB / MB,
                    "rebalance_ms": float(values["rebalance.time.ms"])}
    raise ValueError(f"no kafka-consumer-perf-test result in: {output[-500:]!r}")


def _run(name: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(tool_command(name, *args), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{name} exited with {result.returncode}: {(result.stderr or result.stdout)[-500:]}")
    return result


def _all_of(name: str, result: subprocess.CompletedProcess, figures: dict, records: int) -> dict:
    """The tools exit 0 even when records failed (they print the errors and count what got through)."""
    if figures["records"] != records:
        raise RuntimeError(f"{name}: {figures['records']} of {records} records; {result.stderr[-500:]}")
    return figures


def producer_perf(bootstrap: str, topic: str, records: int, record_size: int, properties: dict,
                  timeout: float) -> dict:
    """kafka-producer-perf-test at full speed (--throughput -1) with the producer ``properties``."""
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(record_size),
            "--throughput", "-1",  # one --command-property takes every KEY=VALUE after it (a repeat replaces them)
            "--command-property", f"bootstrap.servers={bootstrap}",
            *(f"{key}={value}" for key, value in properties.items())]
    result = _run("kafka-producer-perf-test", args, timeout)
    return _all_of("kafka-producer-perf-test", result, parse_producer_perf(result.stdout, record_size), records)


def consumer_perf(bootstrap: str, topic: str, records: int, timeout: float) -> dict:
    """kafka-consumer-perf-test reading ``records`` from the start of ``topic`` (it joins a fresh group)."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
            "--timeout", str(int(timeout * 1000))]
    result = _run("kafka-consumer-perf-test", args, timeout + 60)
    return _all_of("kafka-consumer-perf-test", result, parse_consumer_perf(result.stdout), records)
