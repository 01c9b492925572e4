"""Apache Kafka 4.4 (scripts/kafka) beside kgate: time from start to serving, and memory.

    .venv/bin/python -m bench.kafka_start [--runs 3]

Each run starts a fresh Kafka (its storage formatted first, as on a first start) and a
fresh kgate, each in a temporary directory, and prints for each: seconds from the start
command to its listener serving (Kafka: its "Kafka Server started" line and an accepted
connection; kgate: its "listening" line), Kafka's format step apart, and RSS (VmRSS)
right after it serves and after the conformance suite's CI subset ran against both.
Median, min and max over the runs. Figures only, no assertion.
"""
import argparse
import tempfile
import time
from pathlib import Path

from bench.run_figures import print_runs
from conformance.kafka_broker import BROKER_JVM, KafkaBroker
from conformance.run import run_scenario, select
from tests.support.broker_process import BrokerProcess


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_run(scratch: str) -> dict[str, float]:
    kafka = KafkaBroker(f"{scratch}/kafka", jvm_options=BROKER_JVM)
    started = time.monotonic()
    kafka.start()
    figures = {"kafka start to serving s": time.monotonic() - started,
               "  of which storage format s": kafka.format_seconds}
    started = time.monotonic()
    kgate = BrokerProcess(f"{scratch}/kgate").start()
    figures["kgate start to serving s"] = time.monotonic() - started
    try:
        figures["kafka RSS serving MiB"] = rss_mib(kafka.process.pid)
        figures["kgate RSS serving MiB"] = rss_mib(kgate.process.pid)
        for scenario in select([], ci_only=True):
            run_scenario(scenario, kafka.bootstrap, kgate.bootstrap)
        figures["kafka RSS after conformance MiB"] = rss_mib(kafka.process.pid)
        figures["kgate RSS after conformance MiB"] = rss_mib(kgate.process.pid)
    finally:
        kgate.stop()
        kafka.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="kafka-start-") as scratch:
            runs.append(one_run(scratch))
    print_runs(runs, width=34, precision=1)


if __name__ == "__main__":
    main()
