"""Spark batch read through the kgate data source, beside Spark's own Kafka connector and a
plain confluent-kafka consumer.

What a Spark read costs is best judged against the fastest plain reader of the same
records on the same machine at the same moment, so every run times them all on one
topic: ``spark.read.format("kgate")`` and ``spark.read.format("kafka")`` (Spark's JVM
connector, spark-sql-kafka-0-10) with every row materialized (a ``noop`` write, which
builds each row without keeping it), and bench.produce_consume's consumer in a spawned
process, once with librdkafka's defaults (what a plain consumer does) and once with the
fetch sizes the data source's tasks use (the same client, tuned alike). Each Spark read
also reports the CPU its JVM and Python workers spent. The ratios of the medians are the
figures to watch.

Run from the repository root (needs the spark extra, scripts/setup-spark):
    .venv/bin/python -m bench.pipeline_read --help
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from bench.produce_consume import (
    broker_in_temp_dir,
    consume,
    create_topic,
    finish_child,
    produce,
    start_child,
    write_report,
)
from kgate.pipeline.jobs import MissingConnector, connector_conf
from kgate.pipeline.source import READ_DEFAULTS

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "pipeline_read.json"
FIGURES = {"spark": "Spark batch read (kgate)", "spark_connector": "Spark batch read (kafka)",
           "consumer": "consumer, defaults", "consumer_big_fetch": "consumer, source's fetches"}
# The Spark reads, by figure, and the format each reads with.
SPARK_FORMATS = {"spark": "kgate", "spark_connector": "kafka"}
_TICKS = os.sysconf("SC_CLK_TCK")


def spark_session(master: str):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("kgate-bench-pipeline-read")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    for key, value in connector_conf({}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant, with what they reaped: Spark's JVM, its
    Python daemon and the workers the daemon forked."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(value) for value in fields[11:15]) / _TICKS  # utime stime cutime cstime
    tree, grew = {root}, True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    return sum(times.get(pid, 0.0) for pid in tree)


def spark_read(spark, bootstrap: str, topic: str, expected: int, min_partitions: int | None,
               fmt: str = "kgate") -> dict:
    """Timed from the action's start (planning included) to the last row built."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    if min_partitions:
        options["minPartitions"] = str(min_partitions)
    rows = Observation("rows")
    frame = spark.read.format(fmt).options(**options).load().observe(rows, F.count(F.lit(1)).alias("n"))
    jvm = spark.sparkContext._gateway.proc.pid
    cpu, start = tree_cpu_seconds(jvm), time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    elapsed, cpu = time.perf_counter() - start, tree_cpu_seconds(jvm) - cpu
    if rows.get["n"] != expected:
        raise RuntimeError(f"Spark read {rows.get['n']} rows of {expected} with format({fmt!r})")
    return {"records": expected, "seconds": elapsed, "cpu_seconds": cpu}


def one_run(spark, bootstrap: str, topic: str, args, samples: dict[str, list[float]],
            cpu: dict[str, list[float]]) -> None:
    """One sample of each reader, appended to ``samples`` as rows/s (and, for Spark's reads, to
    ``cpu`` as CPU seconds per million rows)."""
    results = {key: spark_read(spark, bootstrap, topic, args.records, args.min_partitions, fmt)
               for key, fmt in SPARK_FORMATS.items()}
    for key, config in (("consumer", None), ("consumer_big_fetch", READ_DEFAULTS)):
        results[key] = finish_child(start_child(consume, bootstrap, topic, args.partitions, args.records,
                                                args.timeout, config), args.timeout + 30)
    for key, result in results.items():
        samples[key].append(result["records"] / result["seconds"])
        if "cpu_seconds" in result:
            cpu[key].append(result["cpu_seconds"] / result["records"] * 1e6)


def summarise(samples: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict:
    summary = {key: {"label": FIGURES[key], "unit": "rows/s", "samples": values, "median": statistics.median(values),
                     "min": min(values), "max": max(values)} for key, values in samples.items()}
    for key, values in cpu.items():
        summary[key]["cpu_s_per_million_rows"] = statistics.median(values)
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_read", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the topic (default 1000000)")
    parser.add_argument("--runs", type=int, default=3, help="samples of each reader (default 3)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record value (default 100)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--min-partitions", type=int, help="the source's minPartitions (default: one per partition)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per produce or read")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results file (default bench/results/pipeline_read.json)")
    args = parser.parse_args(argv)
    if min(args.records, args.runs, args.partitions, args.value_size) <= 0:
        parser.error("--records, --runs, --partitions and --value-size must be > 0")
    try:
        connector_conf({})
    except MissingConnector as exc:
        parser.error(str(exc))
    samples: dict[str, list[float]] = {key: [] for key in FIGURES}
    cpu: dict[str, list[float]] = {key: [] for key in SPARK_FORMATS}
    spark = None
    with broker_in_temp_dir() as (broker, _work_dir):
        try:
            topic = create_topic(broker.bootstrap, args.partitions)
            produced = finish_child(start_child(produce, broker.bootstrap, topic, args.records, args.value_size,
                                                args.timeout), args.timeout + 30)
            print(f"produced {produced['records']:,} records in {produced['seconds']:.1f} s", flush=True)
            spark = spark_session(args.master)
            for fmt in SPARK_FORMATS.values():  # warm-up: JVM, workers, the connector's classes
                spark_read(spark, broker.bootstrap, topic, args.records, args.min_partitions, fmt)
            for run in range(1, args.runs + 1):
                one_run(spark, broker.bootstrap, topic, args, samples, cpu)
                print(f"run {run}/{args.runs}: " + ", ".join(f"{k} {samples[k][-1]:,.0f} rows/s" for k in FIGURES),
                      flush=True)
        finally:
            if spark is not None:
                spark.stop()

    summary = summarise(samples, cpu)
    ratios = {key: summary["spark"]["median"] / summary[key]["median"]
              for key in ("spark_connector", "consumer", "consumer_big_fetch")}
    print(f"\nbatch read of {args.records:,} records x {args.value_size} B, {args.partitions} partitions, "
          f"{args.master}, {args.runs} runs")
    header = (f"{'reader':<28} {'median rows/s':>14} {'min':>12} {'max':>12} {'kgate/this':>11} "
              f"{'CPU s/M rows':>13}")
    print(header)
    print("-" * len(header))
    for key, entry in summary.items():
        ratio = f"{ratios[key]:>11.2f}" if key in ratios else f"{'-':>11}"
        used = entry.get("cpu_s_per_million_rows")
        print(f"{entry['label']:<28} {entry['median']:>14,.0f} {entry['min']:>12,.0f} {entry['max']:>12,.0f} {ratio} "
              + (f"{used:>13.2f}" if used is not None else f"{'-':>13}"))
    write_report(args.output, "pipeline_read",
                 {"records": args.records, "runs": args.runs, "partitions": args.partitions,
                  "value_size": args.value_size, "master": args.master, "min_partitions": args.min_partitions},
                 summary, spark_vs=ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
