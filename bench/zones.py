"""Zone-aware routing: through a broker of the client's own zone against direct to the owner.

    .venv/bin/python -m bench.zones [--storage file|s3] [--quick] [--runs 3] [--records 40000]
                                    [--paced-mb-s 1] [--paced-seconds 5] [--tail-mb-s 4] [--tail-seconds 10]
                                    [--traffic-seconds 20] [--link-deflate true|false]

Traffic between availability zones is billed per byte, so kgate lets a client in zone a
write and read partitions owned in zones b and c through the zone-a broker (README,
"Zones"): a produce is staged in shared storage and the owner sent a reference to it; a
read is served from shared storage up to the high watermark the owner states. What does
that extra hop cost? The benchmark starts a ZooKeeper and three brokers in zones a, b
and c over one shared ``file:`` directory (127.0.0.1, free ports, stopped by PID at the
end) and, in every run, with 1 KiB records to the partitions of a fresh topic that broker
b or c owns (broker a owns none of them):

- produce, flat out: ``--records`` records, acks=all, linger 5 ms, from a confluent-kafka
  producer in zone a (``client.id`` with a ``kgate_az=a`` token, bootstrapped at the zone-a
  broker: every record goes by reference) and from one with no zone (straight to the
  owners): MB/s and acknowledgement p50/p99 (mostly time queued in the producer);
- produce, paced at ``--paced-mb-s`` for ``--paced-seconds``, each way, at linger 5 ms and
  then at 50 ms: acknowledgement p50/p99. At linger 5 ms 1 MB/s is ~2.5 records a request,
  so this is the per-request cost of each path; at 50 ms, the latency of a batched producer;
- catch-up read of those records from offset 0 by a consumer with ``client.rack=a`` (the
  owners send it to the zone-a broker with preferred_read_replica) and by one with no rack
  (served by the owners): MB/s;
- tail read: both consumers at once, assigned to a fresh topic before a producer with no
  zone writes to it at ``--tail-mb-s`` for ``--tail-seconds`` with each value stamped with
  its send time: end-to-end latency p50/p99 (send to receipt), the first second left out
  as warm-up.

- cross-zone traffic, as the zone tests run it: in each of the three zones an idempotent
  acks=all producer and a consumer that both know only their zone's broker, on a fresh
  topic owned in every zone, for ``--traffic-seconds``; once batched (2,000 x 1 KiB
  records/s per producer, linger 250 ms) and once with small requests (300 x 1 KiB/s,
  linger 5 ms). Printed per setting: the bytes brokers sent to brokers of other zones as a
  share of the payload produced, the client bytes that crossed zones (must be 0), and the
  object store's requests (PUT, GET, LIST) per GB produced, each GB also read once in
  every zone. It is a separate table: its figures are not ratios of two ways.

``--read-end-interval-ms`` sets how often, at most, the zone brokers learn the owners' high
watermarks (``kgate.zone.read.end.interval.ms``): the tail read's latency through the zone-a
broker and the cross-zone bytes both depend on it.

``--storage s3`` runs the same on a SeaweedFS started here (the S3 WAL, 100 ms commit
interval; zone reads and references go through WAL objects) instead of a shared ``file:``
directory. ``--quick``: one run, 10,000 records, 3 s paced, a 5 s tail, 10 s of traffic.

The ordering of the two ways alternates from run to run. Each client runs in a process of
its own (bench/produce_consume.py's children). Printed: each figure's median over the runs
with min and max, and the proxied/direct ratio, the median of the ratios taken run by run.
"""
import argparse
import contextlib
import multiprocessing
import os
import statistics
import struct
import sys
import tempfile
import time
import uuid

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from bench.mirror import cpu_seconds
from bench.produce_consume import MB, finish_child, percentiles_ms, start_child
from tests.support.cluster import KgateCluster
from tests.support.ports import free_ports
from tests.support.scrape import scrape, value
from tests.support.seaweedfs import SeaweedFS
from tests.support.zookeeper import ZooKeeperServer

ZONES = {0: "a", 1: "b", 2: "c"}
READ_END_API, REFERENCE_API = "32000", "32001"  # KgateReadEnd, KgateProduceReference
CLIENT_ZONE = "a"
PARTITIONS = 6
VALUE = 1024
WARMUP_S = 1.0
# Figure -> its label; each is measured "proxied" (through the zone-a broker) and "direct".
FIGURES = {
    "produce_mb_s": "produce flat out (MB/s)",
    "produce_ack_p50_ms": "  ack p50, flat out (ms)",
    "produce_ack_p99_ms": "  ack p99, flat out (ms)",
    "produce_cpu_s_per_gb": "  brokers' CPU (s per GB)",
    "paced_ack_p50_ms": "produce paced: ack p50 (ms)",
    "paced_ack_p99_ms": "produce paced: ack p99 (ms)",
    "batched_ack_p50_ms": "  linger 50 ms: ack p50 (ms)",
    "batched_ack_p99_ms": "  linger 50 ms: ack p99 (ms)",
    "catch_up_mb_s": "catch-up read (MB/s)",
    "catch_up_cpu_s_per_gb": "  brokers' CPU (s per GB)",
    "tail_p50_ms": "tail read: end-to-end p50 (ms)",
    "tail_p99_ms": "tail read: end-to-end p99 (ms)",
}


def produce(bootstrap: str, topic: str, partitions: list[int], records: int, max_seconds: float, config: dict,
            rate_bytes_s: float | None = None) -> dict:
    """Records round-robin over ``partitions``, each value stamped with its send time (wall clock) and
    keyed by its index; timed from the first send to the last acknowledgement. Paced with
    ``rate_bytes_s``, it stops sending after ``max_seconds``; else it sends ``records`` flat out."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    producer.list_topics(topic, timeout=10)
    padding = os.urandom(VALUE - 8)
    latencies: list[float] = []
    failed: list[str] = []

    def delivered(error, message):
        if error is None:
            latencies.append(message.latency())
        else:
            failed.append(str(error))

    deadline = time.monotonic() + max_seconds
    start = time.perf_counter()
    last = start
    for i in range(records):
        if rate_bytes_s:
            if time.monotonic() > deadline:
                break
            wait = start + i * VALUE / rate_bytes_s - time.perf_counter()
            if wait > 0:
                producer.poll(wait)
        while True:
            try:
                producer.produce(topic, struct.pack(">d", time.time()) + padding, key=b"%d" % i,
                                 partition=partitions[i % len(partitions)], on_delivery=delivered)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"produce: queue still full after {max_seconds} s") from None
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    undelivered = producer.flush(max(0.0, deadline - time.monotonic()) + 60)
    last = time.perf_counter()
    if undelivered or failed:
        raise RuntimeError(f"produce: {undelivered} undelivered, {len(failed)} failed ({failed[:1]})")
    return {"records": len(latencies), "mb_s": len(latencies) * VALUE / (last - start) / MB,
            **percentiles_ms(latencies)}


def read(bootstrap: str, topic: str, partitions: list[int], expected: int, max_seconds: float, config: dict,
         ready=None, warmup_s: float | None = None) -> dict:
    """Read ``expected`` records from offset 0: MB/s from assign() to the last one. With ``warmup_s``
    (a tail read), records are taken one poll() at a time, since consume() of a batch returns only
    when the batch is full or its timeout passes, and the p50/p99 of send-to-receipt latency of the
    records sent ``warmup_s`` or more after the first are returned too. ``ready`` (an Event) is set
    once the consumer has been assigned and polled once."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                         "enable.auto.commit": False, **config})
    latencies: list[float] = []
    count = 0
    first_sent = None
    try:
        consumer.list_topics(topic, timeout=10)
        deadline = time.monotonic() + max_seconds
        start = time.perf_counter()
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        while count < expected and time.monotonic() < deadline:
            if warmup_s is None:
                messages = consumer.consume(10_000, timeout=0.5)
            else:
                message = consumer.poll(0.2)
                messages = [message] if message is not None else []
            received = time.time()
            if ready is not None:
                ready.set()
            for message in messages:
                if message.error():
                    raise RuntimeError(f"consume: {message.error()}")
                count += 1
                if warmup_s is not None:
                    sent = struct.unpack_from(">d", message.value())[0]
                    first_sent = sent if first_sent is None else min(first_sent, sent)
                    if sent - first_sent >= warmup_s:
                        latencies.append(received - sent)
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if count != expected:
        raise RuntimeError(f"consume: read {count} of {expected} records within {max_seconds} s")
    return {"mb_s": count * VALUE / elapsed / MB, **percentiles_ms(latencies)}


def elsewhere_topic(cluster: KgateCluster) -> tuple[str, list[int]]:
    """A fresh topic and its partitions owned outside the client's zone (at least two)."""
    for _ in range(5):
        name = f"zones-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
        leaders = cluster.wait_leaders(name, PARTITIONS, set(cluster.brokers))
        owned_elsewhere = sorted(p for p, leader in leaders.items() if ZONES[leader] != CLIENT_ZONE)
        if len(owned_elsewhere) >= 2:
            return name, owned_elsewhere
    raise RuntimeError("no topic with two partitions owned outside the client's zone in five tries")


def brokers_cpu(cluster: KgateCluster) -> float:
    """CPU seconds (user + system) the three broker processes have used so far."""
    return sum(cpu_seconds(broker.process.pid) for broker in cluster.brokers.values() if broker.process)


def fetched_from(cluster: KgateCluster, topic: str) -> dict[int, float]:
    """Record bytes each broker has served of ``topic`` (its metrics), to check which path a read took."""
    return {node_id: value(scrape(broker.metrics_url), "kgate_topic_bytes_out_total", topic=topic)
            for node_id, broker in cluster.brokers.items()}


def requests_of(samples, api: str) -> float:
    """Requests of API key ``api`` a broker has answered, every version."""
    return sum(sample for (name, labels), sample in samples.items()
               if name == "kgate_requests_total" and dict(labels).get("api") == api)


def references_taken(cluster: KgateCluster) -> float:
    """Produces by reference the owners have answered (KgateProduceReference, api key 32001)."""
    return sum(requests_of(scrape(broker.metrics_url), REFERENCE_API) for broker in cluster.brokers.values())


def check_path(way: str, zone_share: float, what: str) -> None:
    """A proxied figure must have gone through the zone's broker and a direct one must not, or it measures nothing."""
    if (way == "proxied" and zone_share < 0.9) or (way == "direct" and zone_share > 0.1):
        raise RuntimeError(f"{what} {way}: the zone-{CLIENT_ZONE} broker's share was {zone_share:.2f}")


def one_run(cluster: KgateCluster, number: int, args) -> dict:
    zone_broker = cluster.brokers[0].bootstrap
    ways = {"proxied": ({"client.id": f"bench,kgate_az={CLIENT_ZONE}"}, {"client.rack": CLIENT_ZONE}, zone_broker),
            "direct": ({"client.id": "bench"}, {}, cluster.bootstrap)}
    order = list(ways) if number % 2 == 0 else list(reversed(ways))
    figures: dict[str, float] = {}
    limit = args.timeout
    topic, partitions = elsewhere_topic(cluster)
    for way in order:
        produce_config, _, bootstrap = ways[way]
        cpu, references = brokers_cpu(cluster), references_taken(cluster)
        flat = finish_child(start_child(produce, bootstrap, topic, partitions, args.records, limit, produce_config),
                            limit + 90)
        if (references_taken(cluster) > references) != (way == "proxied"):
            raise RuntimeError(f"flat-out produce {way}: {references_taken(cluster) - references} references")
        figures[f"produce_cpu_s_per_gb/{way}"] = (brokers_cpu(cluster) - cpu) / (args.records * VALUE / 1e9)
        figures[f"produce_mb_s/{way}"] = flat["mb_s"]
        figures[f"produce_ack_p50_ms/{way}"] = flat["p50_ms"]
        figures[f"produce_ack_p99_ms/{way}"] = flat["p99_ms"]
    paced_topic, paced_partitions = elsewhere_topic(cluster)
    for way in order:
        produce_config, _, bootstrap = ways[way]
        paced = finish_child(start_child(produce, bootstrap, paced_topic, paced_partitions, 10**9, args.paced_seconds,
                                         produce_config, args.paced_mb_s * MB), args.paced_seconds + 90)
        figures[f"paced_ack_p50_ms/{way}"] = paced["p50_ms"]
        figures[f"paced_ack_p99_ms/{way}"] = paced["p99_ms"]
        batched = finish_child(start_child(produce, bootstrap, paced_topic, paced_partitions, 10**9,
                                           args.paced_seconds, {**produce_config, "linger.ms": 50},
                                           args.paced_mb_s * MB), args.paced_seconds + 90)
        figures[f"batched_ack_p50_ms/{way}"] = batched["p50_ms"]
        figures[f"batched_ack_p99_ms/{way}"] = batched["p99_ms"]
    for way in order:
        _, read_config, bootstrap = ways[way]
        cpu, served = brokers_cpu(cluster), fetched_from(cluster, topic)
        caught_up = finish_child(start_child(read, bootstrap, topic, partitions, 2 * args.records, limit,
                                             read_config), limit + 30)
        now = fetched_from(cluster, topic)
        check_path(way, (now[0] - served[0]) / max(1.0, sum(now.values()) - sum(served.values())), "catch-up read")
        figures[f"catch_up_cpu_s_per_gb/{way}"] = (brokers_cpu(cluster) - cpu) / (2 * args.records * VALUE / 1e9)
        figures[f"catch_up_mb_s/{way}"] = caught_up["mb_s"]
    figures.update(tail(cluster, ways, args))
    return figures


def tail(cluster: KgateCluster, ways: dict, args) -> dict[str, float]:
    """Both consumers on one fresh topic at once, then a producer with no zone paced into it."""
    topic, partitions = elsewhere_topic(cluster)
    context = multiprocessing.get_context("spawn")
    expected = int(args.tail_mb_s * MB / VALUE * args.tail_seconds)
    limit = args.tail_seconds + 90
    readers = {}
    for way, (_, read_config, bootstrap) in ways.items():
        ready = context.Event()
        readers[way] = (start_child(read, bootstrap, topic, partitions, expected, limit, read_config, ready,
                                    WARMUP_S), ready)
    for way, (_, ready) in readers.items():
        if not ready.wait(60):
            raise RuntimeError(f"the {way} tail reader did not start within 60 s")
    # Paced, it takes --tail-seconds; the slack is for a loaded machine falling behind the pace.
    written = finish_child(start_child(produce, cluster.bootstrap, topic, partitions, expected,
                                       args.tail_seconds + 30, {"client.id": "bench-tail"}, args.tail_mb_s * MB),
                           args.tail_seconds + 120)
    if written["records"] != expected:
        raise RuntimeError(f"the tail producer sent {written['records']} of {expected} records in time")
    figures = {}
    for way, (child, _) in readers.items():
        got = finish_child(child, limit)
        figures[f"tail_p50_ms/{way}"] = got["p50_ms"]
        figures[f"tail_p99_ms/{way}"] = got["p99_ms"]
    served = fetched_from(cluster, topic)  # both readers read it all: the zone's broker served one of them
    check_path("proxied", served[0] / max(1.0, sum(served.values()) / 2), "tail read")
    return figures


# (label, records per second per producer, linger ms) of the cross-zone traffic settings.
TRAFFIC = (("batched: 2000 x 1 KiB/s, linger 250 ms", 2000, 250), ("small: 300 x 1 KiB/s, linger 5 ms", 300, 5))
OBJECT_REQUESTS = ("put", "get", "list")


def mixed_topic(cluster: KgateCluster) -> str:
    """A fresh topic with partitions owned in every zone."""
    for _ in range(5):
        name = f"zones-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
        if set(cluster.wait_leaders(name, PARTITIONS, set(cluster.brokers)).values()) == set(ZONES):
            return name
    raise RuntimeError("no topic owned in every zone in five tries")


def meters(cluster: KgateCluster, topic: str) -> dict[str, float]:
    """The counters the traffic figures are differences of, all brokers together."""
    out = {"payload": 0.0, "crossed": 0.0, "client_crossed": 0.0, "read_ends": 0.0, "references": 0.0,
           **dict.fromkeys(OBJECT_REQUESTS, 0.0)}
    for node_id, broker in cluster.brokers.items():
        samples = scrape(broker.metrics_url)
        # Each broker is a zone of its own here: every peer request crossed zones.
        out["read_ends"] += requests_of(samples, READ_END_API)
        out["references"] += requests_of(samples, REFERENCE_API)
        out["payload"] += value(samples, "kgate_topic_bytes_in_total", topic=topic)
        out["crossed"] += sum(value(samples, "kgate_interbroker_bytes_total", direction="sent",
                                    local_zone=ZONES[node_id], peer_zone=peer) for peer in ZONES.values()
                              if peer != ZONES[node_id])
        for kind in OBJECT_REQUESTS:
            out[kind] += value(samples, "kgate_object_requests_total", kind=kind)
        for (name, labels), sample in samples.items():
            labels = dict(labels)
            if name == "kgate_client_bytes_total" and labels["client_zone"] not in ("", labels["broker_zone"]):
                out["client_crossed"] += sample
    return out


def traffic(cluster: KgateCluster, rate: int, linger_ms: int, seconds: float) -> dict[str, float]:
    """A producer and a consumer in every zone, each through its zone's broker (see the module's doc)."""
    topic = mixed_topic(cluster)
    partitions = list(range(PARTITIONS))
    count = int(rate * seconds)
    limit = 2 * seconds + 120
    before = meters(cluster, topic)
    readers = []
    for node_id, zone in ZONES.items():
        config = {"client.rack": zone, "client.id": f"bench-{zone},kgate_az={zone}", "fetch.wait.max.ms": 500}
        ready = multiprocessing.get_context("spawn").Event()
        readers.append((start_child(read, cluster.brokers[node_id].bootstrap, topic, partitions,
                                    count * len(ZONES), limit, config, ready), ready))
    for _, ready in readers:
        if not ready.wait(60):
            raise RuntimeError("a zone's reader did not start within 60 s")
    writers = [start_child(produce, cluster.brokers[node_id].bootstrap, topic, partitions, count, limit,
                           {"client.id": f"bench-{zone},kgate_az={zone}", "enable.idempotence": True,
                            "linger.ms": linger_ms}, rate * VALUE)
               for node_id, zone in ZONES.items()]
    for writer in writers:
        finish_child(writer, limit + 30)
    for reader, _ in readers:
        finish_child(reader, limit + 30)
    after = meters(cluster, topic)
    moved = {key: after[key] - before[key] for key in after}
    gb = moved["payload"] / 1e9
    return {"crossed_pct": 100 * moved["crossed"] / moved["payload"], "client_crossed": moved["client_crossed"],
            "read_ends_per_s": moved["read_ends"] / seconds, "references_per_s": moved["references"] / seconds,
            **{f"{kind}_per_gb": moved[kind] / gb for kind in OBJECT_REQUESTS}}


@contextlib.contextmanager
def storage_for(kind: str, base: str):
    """What the brokers' ``kgate.storage`` names: a shared directory, or a SeaweedFS bucket started here."""
    if kind == "file":
        yield None
        return
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with SeaweedFS.started(os.path.join(base, "seaweedfs")) as weed:
        weed.make_bucket("bench")
        yield f"s3://bench/zones?endpoint={weed.endpoint}&region=us-east-1"


def print_traffic(runs: list[dict[str, float]], args) -> None:
    print(f"\ncross-zone traffic on {args.storage}: a producer and a consumer in each of 3 zones, "
          f"{args.traffic_seconds:.0f} s; medians of {len(runs)} runs")
    columns = ["inter-broker cross-zone (% of payload)", "client bytes across zones",
               *(f"{kind.upper()}s per GB" for kind in OBJECT_REQUESTS)]
    print(f"{'setting':<42}" + "".join(f"{c:>24}" for c in columns))
    for label, _rate, _linger in TRAFFIC:
        cells = [statistics.median(r[f"{label}/{key}"] for r in runs)
                 for key in ("crossed_pct", "client_crossed", *(f"{k}_per_gb" for k in OBJECT_REQUESTS))]
        print(f"{label:<42}{cells[0]:>23.2f}%{cells[1]:>24.0f}" + "".join(f"{c:>24.0f}" for c in cells[2:]))
    print("requests between brokers (all across zones) per second: KgateReadEnd answers, KgateProduceReference")
    for label, _rate, _linger in TRAFFIC:
        read_ends, references = (statistics.median(r[f"{label}/{key}"] for r in runs)
                                 for key in ("read_ends_per_s", "references_per_s"))
        print(f"{label:<42}{read_ends:>24.1f}{references:>24.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=40_000, help="1 KiB records per flat-out produce")
    parser.add_argument("--paced-mb-s", type=float, default=1.0, help="the paced produce's rate")
    parser.add_argument("--paced-seconds", type=float, default=5.0)
    parser.add_argument("--tail-mb-s", type=float, default=4.0, help="the tail read's producer's rate")
    parser.add_argument("--tail-seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per flat-out produce or read")
    parser.add_argument("--traffic-seconds", type=float, default=20.0, help="each cross-zone traffic setting's length")
    parser.add_argument("--storage", choices=("file", "s3"), default="file")
    parser.add_argument("--read-end-interval-ms", type=int, default=0,
                        help="the brokers' kgate.zone.read.end.interval.ms (0: their default)")
    parser.add_argument("--link-deflate", choices=("true", "false"), default="true",
                        help="the brokers' kgate.zone.link.deflate (compressed links across zones)")
    parser.add_argument("--quick", action="store_true", help="one short run (see the module's doc)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.records, args.paced_seconds, args.tail_seconds, args.traffic_seconds = 1, 10_000, 3.0, 5.0, 10.0
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="kgate-zones-bench-") as base, storage_for(args.storage, base) as storage:
        zookeeper = ZooKeeperServer(os.path.join(base, "zk"), free_ports(1)[0]).start().wait_serving()
        cluster = KgateCluster(base, zookeeper.address, "/bench", storage=storage)
        try:
            for node_id, zone in ZONES.items():
                cluster.start_broker(node_id, **{"broker.rack": zone, "kgate.metrics.listener": "127.0.0.1:0",
                                                 "kgate.zone.read.end.interval.ms": args.read_end_interval_ms,
                                                 "kgate.zone.link.deflate": args.link_deflate})
            cluster.wait_live(set(ZONES))
            for number in range(args.runs):
                began = time.monotonic()
                figures = one_run(cluster, number, args)
                for label, rate, linger_ms in TRAFFIC:
                    figures.update({f"{label}/{key}": measured for key, measured
                                    in traffic(cluster, rate, linger_ms, args.traffic_seconds).items()})
                runs.append(figures)
                print(f"run {number + 1} ({time.monotonic() - began:.0f} s): "
                      + ", ".join(f"{k} {v:.1f}" for k, v in runs[-1].items()), file=sys.stderr, flush=True)
        finally:
            for broker in cluster.brokers.values():
                broker.stop()
            zookeeper.stop()
    print(f"storage: {args.storage}; links across zones compressed: {args.link_deflate}")
    print(f"{args.records} x 1 KiB flat out, acks=all; paced produce at {args.paced_mb_s} MB/s, tail at "
          f"{args.tail_mb_s} MB/s; "
          f"medians of {args.runs} runs (min-max); proxied/direct: median of the run-by-run ratios")
    print(f"{'figure':<32}{'proxied':>22}{'direct':>22}{'proxied/direct':>16}")
    for key, label in FIGURES.items():
        line = f"{label:<32}"
        for way in ("proxied", "direct"):
            values = [r[f"{key}/{way}"] for r in runs]
            line += f"{statistics.median(values):>9.1f} ({min(values):.1f}-{max(values):.1f})".rjust(22)
        ratio = statistics.median(r[f"{key}/proxied"] / r[f"{key}/direct"] for r in runs if r[f"{key}/direct"])
        print(line + f"{ratio:>16.2f}")
    print_traffic(runs, args)


if __name__ == "__main__":
    main()
