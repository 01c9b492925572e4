"""Produce and fetch throughput of each entry format on the same workload, in one run.

Every run creates one topic per format (``kgate.entry.format``) on the same broker
and drives it with the same confluent-kafka producer and consumer as
``bench.produce_consume``, so the formats differ only in what the broker does per
entry: ``kafka`` stores and serves batch bytes, ``mixed_kafka`` reads every record
on produce, ``pulsar`` rebuilds records on produce and again on every fetch. The
ratios to ``kafka`` are what the run is for (KoP documents kafka at about 2x
mixed_kafka).

Run from the repository root:  .venv/bin/python -m bench.entry_formats --help
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

from bench.produce_consume import MB, consume, create_topic, finish_child, produce, start_child
from kgate.storage import entry_formats
from tests.support.broker_process import BrokerProcess

BASELINE = "kafka"


def one_run(broker: BrokerProcess, args) -> dict:
    """``{(format, "produce" | "fetch"): (MB/s, records/s)}`` for one sample of every format."""
    figures = {}
    for name in entry_formats.names():
        topic = create_topic(broker.bootstrap, args.partitions, {"kgate.entry.format": name})
        produced = finish_child(start_child(produce, broker.bootstrap, topic, args.records, args.value_size,
                                            args.timeout), args.timeout + 30)
        fetched = finish_child(start_child(consume, broker.bootstrap, topic, args.partitions, produced["records"],
                                           args.timeout), args.timeout + 30)
        for kind, result in (("produce", produced), ("fetch", fetched)):
            figures[(name, kind)] = (result["bytes"] / result["seconds"] / MB, result["records"] / result["seconds"])
    return figures


def print_table(samples: dict, args) -> None:
    print(f"\nentry formats: {args.records} records x {args.value_size} B, {args.partitions} partitions, "
          f"{args.runs} runs, medians (MB = 10^6 bytes)")
    header = f"{'format':<12} {'path':<8} {'MB/s':>8} {'min':>8} {'max':>8} {'records/s':>11} {BASELINE + '/this':>11}"
    print(header)
    print("-" * len(header))
    for (name, kind), runs in samples.items():
        mb = [r[0] for r in runs]
        baseline = statistics.median(r[0] for r in samples[(BASELINE, kind)])
        print(f"{name:<12} {kind:<8} {statistics.median(mb):>8,.1f} {min(mb):>8,.1f} {max(mb):>8,.1f} "
              f"{statistics.median(r[1] for r in runs):>11,.0f} {baseline / statistics.median(mb):>11.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.entry_formats", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per format per run (default 200000)")
    parser.add_argument("--runs", type=int, default=3, help="samples of every figure (default 3)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of each topic (default 3)")
    parser.add_argument("--value-size", type=int, default=256, help="bytes per record value (default 256)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed per produce or fetch")
    args = parser.parse_args(argv)
    if min(args.records, args.runs, args.partitions, args.value_size) <= 0:
        parser.error("--records, --runs, --partitions and --value-size must be > 0")
    work_dir = tempfile.mkdtemp(prefix="kgate-bench-")
    broker = BrokerProcess(os.path.join(work_dir, "broker"))
    samples: dict = {}
    completed = False
    try:
        broker.start()
        for run in range(1, args.runs + 1):
            for key, value in one_run(broker, args).items():
                samples.setdefault(key, []).append(value)
            print(f"run {run}/{args.runs} done", flush=True)
        completed = True
    finally:
        broker.stop()
        if completed:
            shutil.rmtree(work_dir, ignore_errors=True)
        else:
            print(f"benchmark failed; broker data and log kept in {work_dir}", file=sys.stderr)
    print_table(samples, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
