"""Small produce requests, kgate beside Tansu: what the broker sees and what it costs.

The workload is the one where kgate's acknowledgement latency stood furthest from
Tansu's in bench.side_by_side: 100 B records, 1 partition, acks=1, linger.ms=0, so the
producer sends many small requests and the broker's per-request cost decides. Each
round runs both brokers back to back; besides throughput and ack latency it reports
requests/s, records per request, requests in flight, how full the producer's queue got
(from librdkafka's statistics) and the broker's CPU per request (from /proc). How to
read them: bench/PROFILE.md, "Small requests".

Run from the repository root:  .venv/bin/python -m bench.small_requests [--records N]
"""
import argparse
import os
import statistics
import sys
import tempfile

from bench.peer import TansuProcess
from bench.produce_consume import MB, clean_up, create_topic, finish_child, produce, start_child
from bench.side_by_side import cpu_seconds
from tests.support.broker_process import BrokerProcess

FIGURES = ("mb_s", "p50_ms", "p99_ms", "requests_s", "records_per_request", "in_flight_median", "queue_max",
           "cpu_us_per_request")


def one_run(broker, pid: int, records: int, timeout: float) -> dict:
    topic = create_topic(broker.bootstrap, 1)
    cpu = cpu_seconds(pid)
    produced = finish_child(start_child(produce, broker.bootstrap, topic, records, 100, timeout,
                                        {"acks": "1", "linger.ms": 0}, None, True), timeout + 30)
    return {"mb_s": produced["bytes"] / produced["seconds"] / MB, "p50_ms": produced["p50_ms"],
            "p99_ms": produced["p99_ms"], "requests_s": produced["requests"] / produced["seconds"],
            "records_per_request": produced["records"] / produced["requests"],
            "in_flight_median": produced["in_flight_median"], "queue_max": produced["queue_max"],
            "cpu_us_per_request": (cpu_seconds(pid) - cpu) * 1e6 / produced["requests"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.small_requests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=150_000, help="records per run (default 150000, as --quick)")
    parser.add_argument("--runs", type=int, default=3, help="rounds of kgate then Tansu (default 3)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per produce")
    args = parser.parse_args(argv)
    work_dir = tempfile.mkdtemp(prefix="kgate-small-")
    samples = {"kgate": [], "tansu": []}
    completed = False
    try:
        for _ in range(args.runs):
            for name in samples:
                broker = (BrokerProcess(os.path.join(work_dir, "kgate")) if name == "kgate"
                          else TansuProcess(os.path.join(work_dir, "tansu.log")))
                broker.start()
                try:
                    samples[name].append(one_run(broker, broker.process.pid, args.records, args.timeout))
                finally:
                    broker.stop()
        completed = True
    finally:
        clean_up(work_dir, completed)
    print(f"100 B records, 1 partition, acks=1, linger.ms=0, {args.records} records: median (min-max) of {args.runs}")
    for figure in FIGURES:
        cells = []
        for name, runs in samples.items():
            values = [run[figure] for run in runs]
            cells.append(f"{name} {statistics.median(values):>9,.1f} ({min(values):,.1f}-{max(values):,.1f})")
        print(f"{figure:<20} " + "   ".join(f"{cell:<40}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
