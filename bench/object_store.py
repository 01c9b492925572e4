"""The object ledger store with each WAL beside the file store, on this machine.

One run produces ``--records`` records of ``--value-size`` bytes into ``--partitions``
partitions with acks=all (confluent-kafka, in a process of its own), once to a broker
on the file store, once to a broker on a SeaweedFS started here with ``--wal file:DIR``
and once with ``--wal s3``; then it restarts each S3 broker (its caches empty) and
consumes everything from offset 0: the cold catch-up read, all from range GETs. With
the file WAL, PUTs are counted once its background uploads are done. Flat-out produce latency is mostly time
queued in the producer, so each run also produces at a paced ``--paced-mb-s`` first:
its acknowledgement p50/p99 is what the S3 WAL's object cutting costs, beside the PUTs
(and WAL objects) per GB it took and how long its PUTs took (mean, share over 100 ms).
Printed: produce MB/s, acknowledgement p50/p99, PUTs and GETs per GB written or read (from
the broker's own metrics), cold read MB/s; medians of ``--runs`` runs, with S3/file ratios taken run by run.

    .venv/bin/python -m bench.object_store [--runs 3] [--records 60000] [--configurations s3]
"""
import argparse
import os
import statistics
import tempfile
import time
import uuid

from bench.produce_consume import MB, consume, create_topic, finish_child, produce, start_child
from tests.support.broker_process import BrokerProcess
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value
from tests.support.seaweedfs import SeaweedFS

BUCKET = "kgate-bench"
GB = 1e9


CONFIGURATIONS = {"file": "file store", "s3+file": "S3+file WAL", "s3": "S3 WAL"}


def _broker(work_dir: str, name: str, storage: str | None, wal: str, interval_ms: int,
            compaction_ms: int = 3_600_000) -> BrokerProcess:
    settings = {"kgate.metrics.listener": "127.0.0.1:0", "kgate.s3.wal.commit.interval.ms": interval_ms,
                "kgate.s3.compaction.interval.ms": compaction_ms}
    if storage is not None:
        settings["kgate.storage"] = storage
        settings["kgate.wal"] = "s3" if wal == "s3" else f"file:{os.path.join(work_dir, name, 'wal')}"
    return BrokerProcess(os.path.join(work_dir, name), settings).start(timeout=60)


def _requests(broker: BrokerProcess) -> dict[str, float]:
    samples = scrape(broker.metrics_url)
    return {**{kind: value(samples, "kgate_object_requests_total", kind=kind) for kind in ("put", "get")},
            "objects": value(samples, "kgate_wal_objects_total"),
            "bytes": value(samples, "kgate_wal_object_bytes_total"),
            "put_seconds": value(samples, "kgate_object_put_seconds_sum"),
            "timed_puts": value(samples, "kgate_object_put_seconds_count"),
            "puts_within_100ms": value(samples, "kgate_object_put_seconds_bucket", le="0.1")}


def _settled(broker: BrokerProcess) -> dict[str, float]:
    """The request counts once the new partitions' ledgers are all created (no PUT for 1 s)."""
    last = _requests(broker)
    for _ in range(30):
        time.sleep(1)
        now = _requests(broker)
        if now == last:
            return now
        last = now
    return last


def one_run(work_dir: str, storage: str | None, wal: str, args) -> dict:
    broker = _broker(work_dir, f"broker-{uuid.uuid4().hex[:6]}", storage, wal, args.interval_ms)
    try:
        paced_topic = create_topic(broker.bootstrap, args.partitions)
        before_paced = _requests(broker)
        paced = finish_child(start_child(produce, broker.bootstrap, paced_topic, 10**9, args.value_size,
                                         args.paced_seconds, None, args.paced_mb_s * MB), args.timeout + 90)
        after_paced = _requests(broker)
        topic = create_topic(broker.bootstrap, args.partitions)
        before = _settled(broker)
        produced = finish_child(start_child(produce, broker.bootstrap, topic, args.records, args.value_size,
                                            args.timeout), args.timeout + 30)
        lag = value(scrape(broker.metrics_url), "kgate_wal_upload_lag_seconds") if storage else 0.0
        after = _settled(broker) if wal == "file" else _requests(broker)
    finally:
        broker.stop()
    figures = {"produce_mb_s": produced["bytes"] / produced["seconds"] / MB,
               "ack_p50_ms": produced["p50_ms"], "ack_p99_ms": produced["p99_ms"],
               "paced_ack_p50_ms": paced["p50_ms"], "paced_ack_p99_ms": paced["p99_ms"]}
    if storage is None:
        return figures
    paced_gb = paced["bytes"] / GB
    figures["paced_puts_per_gb"] = (after_paced["put"] - before_paced["put"]) / paced_gb
    figures["paced_wal_objects_per_gb"] = (after_paced["objects"] - before_paced["objects"]) / paced_gb
    timed = max(1.0, after_paced["timed_puts"] - before_paced["timed_puts"])
    figures["paced_put_mean_ms"] = (after_paced["put_seconds"] - before_paced["put_seconds"]) / timed * 1000
    figures["paced_puts_over_100ms_pct"] = \
        100 * (1 - (after_paced["puts_within_100ms"] - before_paced["puts_within_100ms"]) / timed)
    figures["upload_lag_at_end_s"] = lag
    written = produced["bytes"] / GB
    figures["puts_per_gb"] = (after["put"] - before["put"]) / written
    figures["gets_per_gb_written"] = (after["get"] - before["get"]) / written
    figures["wal_objects_per_s"] = (after["objects"] - before["objects"]) / produced["seconds"]
    figures["wal_object_mb"] = (after["bytes"] - before["bytes"]) / max(1, after["objects"] - before["objects"]) / MB
    name = os.path.basename(broker.data_dir)
    figures["cold_read_mb_s"], figures["gets_per_gb_read"] = _cold_read(work_dir, name, storage, wal, topic,
                                                                        produced["records"], args)
    compactor = _broker(work_dir, name, storage, wal, args.interval_ms, compaction_ms=200)
    try:
        began = time.monotonic()
        wait_for(lambda: _compacted(compactor), args.timeout, "compaction")
        figures["compaction_s"] = time.monotonic() - began
    finally:
        compactor.stop()
    figures["cold_read_compacted_mb_s"], figures["gets_per_gb_read_compacted"] = _cold_read(
        work_dir, name, storage, wal, topic, produced["records"], args)
    return figures


def _compacted(broker: BrokerProcess) -> bool:
    samples = scrape(broker.metrics_url)
    return (value(samples, "kgate_compacted_ledgers_total") > 0
            and value(samples, "kgate_compaction_backlog", unit="ledgers") == 0)


def _cold_read(work_dir: str, name: str, storage: str, wal: str, topic: str, records: int, args) -> tuple:
    """A broker started afresh (caches empty) reads the topic from offset 0: MB/s, GETs per GB."""
    cold = _broker(work_dir, name, storage, wal, args.interval_ms)
    try:
        before = _requests(cold)
        consumed = finish_child(start_child(consume, cold.bootstrap, topic, args.partitions, records,
                                            args.timeout), args.timeout + 30)
        after = _requests(cold)
    finally:
        cold.stop()
    return consumed["bytes"] / consumed["seconds"] / MB, (after["get"] - before["get"]) / (consumed["bytes"] / GB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--interval-ms", type=int, default=100, help="kgate.s3.wal.commit.interval.ms")
    parser.add_argument("--paced-mb-s", type=float, default=4.0,
                        help="the rate of the paced produce whose acknowledgement latency is reported beside")
    parser.add_argument("--paced-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--configurations", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS),
                        help="which stores to run (ratios to the file store need it among them)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    configurations = {name: title for name, title in CONFIGURATIONS.items() if name in args.configurations}
    runs: dict[str, list[dict]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="kgate-object-bench-") as work_dir, \
            SeaweedFS.started(os.path.join(work_dir, "seaweedfs")) as weed:
        weed.make_bucket(BUCKET)
        for run in range(args.runs):
            for name in configurations:
                if name == "file":
                    runs[name].append(one_run(work_dir, None, "", args))
                    continue
                wal = name.removeprefix("s3+")
                storage = f"s3://{BUCKET}/run{run}-{wal}?endpoint={weed.endpoint}&region=us-east-1"
                runs[name].append(one_run(work_dir, storage, wal, args))
    print(f"{args.records} x {args.value_size} B into {args.partitions} partitions, acks=all, "
          f"commit interval {args.interval_ms} ms; medians of {args.runs} runs, ratios to the file store run by run")
    ratios = [name for name in configurations if name != "file"] if "file" in configurations else []
    print(f"{'figure':<24}" + "".join(f"{title:>13}" for title in configurations.values())
          + "".join(f"{configurations[name] + '/file':>18}" for name in ratios))
    for key in max((runs[name][0] for name in configurations), key=len):
        line = f"{key:<24}"
        for name in configurations:
            line += f"{statistics.median(r[key] for r in runs[name]):>13.1f}" if key in runs[name][0] else " " * 13
        if ratios and key in runs["file"][0]:
            for name in ratios:
                ratio = statistics.median(s[key] / f[key] for s, f in zip(runs[name], runs["file"]) if f[key])
                line += f"{ratio:>18.2f}"
        print(line)
    for key in ("produce_mb_s", "paced_ack_p99_ms", "cold_read_mb_s", "cold_read_compacted_mb_s"):
        for name in configurations:
            if key in runs[name][0]:
                print(f"{key} run by run, {configurations[name]}: " + ", ".join(f"{r[key]:.1f}" for r in runs[name]))


if __name__ == "__main__":
    main()
