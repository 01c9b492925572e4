"""kgate mirror against real clusters: three kgate brokers (dc1, dc2, and hub for
aggregation), Tansu as a foreign Kafka cluster, one real ZooKeeper for the mirror's
state, workers as processes, real confluent-kafka clients.
"""
import json
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.peer import TansuProcess
from kgate.mirror.config import Cluster, load
from kgate.mirror.metrics import MirrorMetrics
from kgate.mirror.mm2_formats import Checkpoint, Heartbeat, OffsetSync, offset_syncs_topic
from kgate.mirror.offset_syncs import read_syncs
from kgate.mirror.replicator import Replicator
from kgate.mirror.routes import Route
from kgate.mirror.state import MirrorState
from kgate.mirror.translation import Sync
from tests.support import records as R
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ConfluentClient, create_topic, end_offsets
from tests.support.member_process import wait_for
from tests.support.mirror import MirrorWorker, mirror_command, write_config
from tests.support.ports import free_ports
from tests.support.zookeeper import ZooKeeperServer

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mirror")]
ORIGIN = "kgate.mirror.origin"
SINCE_TEST_RECORDS = "2023-11-14T00:00:00Z"  # test records carry timestamps from R.BASE_TIMESTAMP_MS on


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), free_ports(1)[0]).start().wait_serving()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    base = tmp_path_factory.mktemp("clusters")
    brokers: dict[str, BrokerProcess | TansuProcess] = {}
    try:
        for alias in ("dc1", "dc2", "hub"):
            brokers[alias] = BrokerProcess(str(base / alias), {"group.initial.rebalance.delay.ms": 0}).start()
        # A Kafka cluster that is not kgate (Rust, in memory; installed by scripts/setup-bench).
        brokers["tansu"] = TansuProcess(str(base / "tansu.log")).start()
        yield {alias: broker.bootstrap for alias, broker in brokers.items()}
    finally:
        for broker in brokers.values():
            broker.stop()


@pytest.fixture
def mirror(tmp_path, zookeeper, clusters):
    """A configuration of its own (a fresh chroot), and the workers started under it."""
    chroot = f"/mirror-{uuid.uuid4().hex[:8]}"
    # Test records carry timestamps of 2023 (R.timestamp): their audit counts must outlive the default retention.
    settings = {"zookeeper.session.timeout.ms": 2000, "commit.interval.ms": 100, "status.interval.ms": 200,
                "metadata.refresh.interval.ms": 300, "emit.checkpoints.interval.ms": 500,
                "audit.retention.ms": 100 * 365 * 86_400_000}
    config = write_config(str(tmp_path / "mirror.toml"), zookeeper.address, chroot, clusters, **settings)
    workers = []

    class Mirror:
        path = config

        def configure(self, **changes):
            """Other settings for this test (before its workers start)."""
            write_config(config, zookeeper.address, chroot, clusters, **(settings | changes))

        def worker(self, name: str, *extra: str) -> MirrorWorker:
            worker = MirrorWorker(config, name, *extra).start()
            workers.append(worker)
            return worker

        def run(self, *args: str):
            return mirror_command(config, *args)

        def children(self, *parts) -> list[str]:
            zk = KazooClient(hosts=zookeeper.address)
            zk.start(timeout=10)
            try:
                return zk.get_children("/".join([chroot, *parts]))
            except NoNodeError:
                return []
            finally:
                zk.stop()
                zk.close()

        def read(self, *parts):
            zk = KazooClient(hosts=zookeeper.address)
            zk.start(timeout=10)
            try:
                data, _ = zk.get("/".join([chroot, *parts]))
                return json.loads(data)
            except NoNodeError:
                return None
            finally:
                zk.stop()
                zk.close()

    yield Mirror()
    for worker in workers:
        worker.stop()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def read_topic(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30) -> list[R.Consumed]:
    return ConfluentClient.consume(bootstrap, topic, partitions, count, timeout=timeout)


def _produce_on_both(clusters, topic: str, count: int) -> None:
    """``count`` records on dc1 (keys from 0) and on dc2 (keys from ``count``) at the same time."""
    producers = [threading.Thread(target=ConfluentClient.produce, args=(clusters["dc1"], topic, count)),
                 threading.Thread(target=ConfluentClient.produce, args=(clusters["dc2"], topic, count),
                                  kwargs={"first": count})]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join()


def test_routes_are_added_listed_refused_and_removed(mirror):
    with open(mirror.path, "a") as fh:
        fh.write('[clusters.dc3]\nbootstrap = "127.0.0.1:1"\n')  # routes name clusters; adding never connects
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", "orders",
                      "--policy", "identity").returncode == 0
    assert mirror.run("routes", "add", "--source", "dc2", "--target", "dc1", "--topics", "orders",
                      "--policy", "identity").returncode == 0  # the two-way hot standby: allowed
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc3", "--topics", "orders,pay-*",
                      "--policy", "identity").returncode == 0
    # dc3 -> dc2 would hand dc1's records to dc2 a second time (dc1 -> dc3 -> dc2).
    refused = mirror.run("routes", "add", "--source", "dc3", "--target", "dc2", "--topics", "ord*",
                         "--policy", "identity")
    assert refused.returncode == 1 and "arrive twice" in refused.stderr, refused.stderr
    # dc3 -> dc1 beside dc1 -> dc3: dc1's own records stop at dc1 (their origin), but dc2's would circle
    # dc1 -> dc3 -> dc1 forever.
    looping = mirror.run("routes", "add", "--source", "dc3", "--target", "dc1", "--topics", "orders",
                         "--policy", "identity")
    assert looping.returncode == 1 and "loop" in looping.stderr, looping.stderr
    # Prefix routes rename, so they never loop by name.
    assert mirror.run("routes", "add", "--source", "dc3", "--target", "dc1", "--topics", "orders").returncode == 0
    listed = json.loads(mirror.run("routes", "list", "--output", "json").stdout)
    assert {(r["route"], r["policy"], tuple(r["topics"])) for r in listed} == {
        ("dc1:dc2", "identity", ("orders",)), ("dc2:dc1", "identity", ("orders",)),
        ("dc1:dc3", "identity", ("orders", "pay-*")), ("dc3:dc1", "prefix", ("orders",))}
    changed_policy = mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", "x")
    assert changed_policy.returncode == 1 and "policy identity" in changed_policy.stderr
    assert mirror.run("routes", "remove", "--source", "dc1", "--target", "dc3", "--topics", "pay-*").returncode == 0
    assert mirror.run("routes", "remove", "--source", "dc2", "--target", "dc1").returncode == 0
    missing = mirror.run("routes", "remove", "--source", "dc2", "--target", "dc1")
    assert missing.returncode == 1 and "no route dc2:dc1" in missing.stderr
    listed = json.loads(mirror.run("routes", "list", "--output", "json").stdout)
    assert {(r["route"], tuple(r["topics"])) for r in listed} == {
        ("dc1:dc2", ("orders",)), ("dc1:dc3", ("orders",)), ("dc3:dc1", ("orders",))}
    unknown = mirror.run("routes", "add", "--source", "dc9", "--target", "dc1", "--topics", "orders")
    assert unknown.returncode == 2 and "'dc9'" in unknown.stderr


def test_bad_configuration_is_refused_naming_the_key(tmp_path):
    config = tmp_path / "mirror.toml"
    config.write_text('metadata = "zookeeper://127.0.0.1:2181/m"\n"commit.interval.ms" = "soon"\n'
                      '[clusters.dc1]\nbootstrap = "127.0.0.1:9092"\n')
    result = mirror_command(str(config), "routes", "list")
    assert result.returncode == 2 and "commit.interval.ms must be int" in result.stderr, result.stderr


def test_records_are_copied_one_to_one_and_routes_follow_changes_without_restart(mirror, clusters):
    topic, count = unique("orders"), 600
    create_topic(clusters["dc1"], topic, 3, config={"retention.ms": "7200000"})
    ConfluentClient.produce(clusters["dc1"], topic, count)
    source = {R.index_of(r): r for r in read_topic(clusters["dc1"], topic, 3, count)}
    mirror.worker("w1")
    # The route is added while the worker runs: it takes effect without a restart.
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", "orders-*").returncode == 0
    copied = read_topic(clusters["dc2"], f"dc1.{topic}", 3, count)
    assert len(copied) == count
    for record in copied:
        original = source[R.index_of(record)]
        assert (record.partition, record.offset) == (original.partition, original.offset)
        assert (record.key, record.value, record.timestamp) == (original.key, original.value, original.timestamp)
        assert list(record.headers) == [*original.headers, (ORIGIN, b"dc1")]
    admin = AdminClient({"bootstrap.servers": clusters["dc2"]})
    resource = ConfigResource("topic", f"dc1.{topic}")
    assert admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "7200000"
    # Partitions added at the source are added at the target, and copied 1-1.
    source_admin = AdminClient({"bootstrap.servers": clusters["dc1"]})
    source_admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    producer = Producer({"bootstrap.servers": clusters["dc1"]})
    for i in range(count, count + 50):
        producer.produce(topic, key=R.key(i), value=R.value(i), partition=3, timestamp=R.timestamp(i))
    assert producer.flush(30) == 0
    wait_for(lambda: end_offsets(clusters["dc2"], f"dc1.{topic}", 4)[3] == 50, 30,
             "the added partition to be copied into the target's partition 3")
    # The route removed: the worker lets its partitions go (and says so in its status).
    assert mirror.run("routes", "remove", "--source", "dc1", "--target", "dc2").returncode == 0
    wait_for(lambda: mirror.read("status", "w1")["partitions"] == {}, 30, "the worker to stop copying")
    assert [mirror.read("positions", "dc1:dc2", topic, str(p))["offset"] for p in range(4)] == \
        end_offsets(clusters["dc1"], topic, 4)


def test_two_way_identity_copies_every_record_once_per_side_and_never_back(mirror, clusters):
    topic, count = unique("standby"), 300
    for alias in ("dc1", "dc2"):
        create_topic(clusters[alias], topic, 2)
    for source, target in (("dc1", "dc2"), ("dc2", "dc1")):
        assert mirror.run("routes", "add", "--source", source, "--target", target, "--topics", topic,
                          "--policy", "identity").returncode == 0
    mirror.worker("w1")
    _produce_on_both(clusters, topic, count)
    for alias in ("dc1", "dc2"):
        wait_for(lambda alias=alias: sum(end_offsets(clusters[alias], topic, 2)) >= 2 * count, 30,
                 f"both sides' records on {alias}")

    def caught_up():
        """Every copy has stored a position at its source's end: nothing more is on its way."""
        for source, target in (("dc1", "dc2"), ("dc2", "dc1")):
            ends = end_offsets(clusters[source], topic, 2)
            if [mirror.read("positions", f"{source}:{target}", topic, str(p))["offset"] for p in (0, 1)] != ends:
                return False
        return True

    wait_for(caught_up, 30, "both routes to store positions at their source's end")
    for alias in ("dc1", "dc2"):
        records = read_topic(clusters[alias], topic, 2, 2 * count + 1, timeout=3)
        assert sorted(R.index_of(r) for r in records) == list(range(2 * count)), f"{alias}: not each record once"
        local = range(count) if alias == "dc1" else range(count, 2 * count)
        for record in records:
            origin = dict(record.headers).get(ORIGIN)
            assert origin == (None if R.index_of(record) in local else (b"dc2" if alias == "dc1" else b"dc1"))


def test_kill_9_of_a_worker_moves_its_partitions_and_loses_nothing(mirror, clusters):
    topic, count = unique("killed"), 3000
    create_topic(clusters["dc1"], topic, 4)
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", topic).returncode == 0
    first, second = mirror.worker("w1"), mirror.worker("w2")
    wait_for(lambda: all((mirror.read("assignment") or {"workers": {}})["workers"].get(w) for w in ("w1", "w2")), 30,
             "both workers to be given partitions")
    producer = threading.Thread(target=ConfluentClient.produce, args=(clusters["dc1"], topic, count),
                                kwargs={"linger.ms": 50, "batch.num.messages": 100})
    producer.start()
    wait_for(lambda: sum(end_offsets(clusters["dc2"], f"dc1.{topic}", 4)) > count // 10, 30,
             "copying to be under way")
    first.kill()
    producer.join()
    wait_for(lambda: set(mirror.read("assignment")["workers"]) == {"w2"}, 30,
             "the dead worker's partitions to move to the survivor")
    wait_for(lambda: sum(end_offsets(clusters["dc2"], f"dc1.{topic}", 4)) >= count, 30, "every record copied")
    copied = read_topic(clusters["dc2"], f"dc1.{topic}", 4, sum(end_offsets(clusters["dc2"], f"dc1.{topic}", 4)))
    assert set(range(count)) <= {R.index_of(r) for r in copied}, "records lost"
    assert second.process.poll() is None
    audited = mirror.run("audit", "--route", "dc1:dc2", "--since", SINCE_TEST_RECORDS, "--output", "json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    rows = json.loads(audited.stdout)
    assert sum(r["missing"] for r in rows) == 0 and sum(r["target"] for r in rows) >= count


def test_a_partition_moved_between_live_workers_resumes_where_the_first_stopped(mirror, clusters):
    """The hand-over itself, step by step in this process: two replicators with sessions of
    their own, the second given the partition while the first still copies it (no position
    stored yet: the store interval is long). The second may start only from the first's last
    position, stored as it lets go; starting earlier would copy records twice."""
    topic, count = unique("handed"), 200
    create_topic(clusters["dc1"], topic, 1)
    create_topic(clusters["dc2"], f"dc1.{topic}", 1)
    mirror.configure(**{"commit.interval.ms": 3_600_000})
    config = load(mirror.path)
    route = Route("dc1", "dc2", (topic,))
    item = (route.name, topic, 0)
    states = [MirrorState(config).connect(), MirrorState(config).connect()]
    first, second = (Replicator(config, state, MirrorMetrics(), f"w{n}") for n, state in enumerate(states, 1))
    try:
        ConfluentClient.produce(clusters["dc1"], topic, count)

        def stepped(replicator: Replicator, done) -> bool:
            replicator.step()
            return done()

        first.set_work({route.name: route}, {item})
        wait_for(lambda: stepped(first, lambda: first.copies[item].acked == count), 30, "the first to copy it all")
        assert mirror.read("positions", route.name, topic, "0") is None
        second.set_work({route.name: route}, {item})
        second.step()
        assert item not in second.copies, "taken while its first worker still held it"
        first.set_work({route.name: route}, set())
        wait_for(lambda: stepped(second, lambda: item in second.copies), 30, "the second to take the partition")
        assert second.copies[item].acked == count
        assert end_offsets(clusters["dc2"], f"dc1.{topic}", 1) == [count]
    finally:
        for replicator, state in zip((first, second), states):
            replicator.close()
            state.close()


def audit_totals(mirror, route: str, since: str = SINCE_TEST_RECORDS) -> tuple[int, int, int]:
    """``kgate mirror audit``'s exit code, and its source and missing records summed over every row."""
    result = mirror.run("audit", "--route", route, "--since", since, "--output", "json")
    assert result.stdout, result.stderr
    rows = json.loads(result.stdout)
    return result.returncode, sum(r["source"] for r in rows), sum(r["missing"] for r in rows)


def consume_as_group(bootstrap: str, topic: str, group: str, count: int | None, timeout: float = 30) -> list[int]:
    """Read ``count`` records (or, with None, until the topic has been quiet for 2 s) as
    ``group``, commit what was read, leave; returns the record indexes read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read, deadline, quiet_since = [], time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline and (count is None or len(read) < count):
            batch = consumer.consume(count - len(read) if count else 500, 0.5)
            messages = [m for m in batch if m.error() is None]
            if messages:
                quiet_since = time.monotonic()
                read += [R.index_of_key(m.key()) for m in messages]
                consumer.commit(asynchronous=False)
            elif count is None and read and time.monotonic() - quiet_since > 2:
                break
    finally:
        consumer.close()
    assert count is None or len(read) == count, f"read {len(read)} of {count}"
    return read


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)]
    finally:
        consumer.close()


def test_failover_of_a_group_and_back_skips_no_record(mirror, clusters):
    topic, count, group = unique("payments"), 400, unique("billing")
    create_topic(clusters["dc1"], topic, 2)
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", topic).returncode == 0
    ConfluentClient.produce(clusters["dc1"], topic, count)
    mirror.worker("w1")
    wait_for(lambda: sum(end_offsets(clusters["dc2"], f"dc1.{topic}", 2)) == count, 30, "every record copied")
    # A partition's offset sync is written once its copies are acknowledged, so after they show on dc2.
    wait_for(lambda: {(topic, 0), (topic, 1)} <= read_syncs(Cluster("dc1", clusters["dc1"]), "dc2").keys(), 30,
             "an offset sync of each partition")
    on_dc1 = consume_as_group(clusters["dc1"], topic, group, 150)

    dry = mirror.run("failover", "--group", group, "--from", "dc1", "--to", "dc2", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert {(s["topic"], s["to_topic"], s["how"]) for s in plan} == {(topic, f"dc1.{topic}", "forward")}
    assert committed_offsets(clusters["dc2"], group, f"dc1.{topic}", 2) == [-1001, -1001]  # a dry run commits nothing
    executed = mirror.run("failover", "--group", group, "--from", "dc1", "--to", "dc2", "--execute")
    assert executed.returncode == 0, executed.stderr
    on_dc2 = consume_as_group(clusters["dc2"], f"dc1.{topic}", group, 100)
    # Back again: the group's offsets on the copies translate to the source (the reverse mapping).
    back = mirror.run("failover", "--group", group, "--from", "dc2", "--to", "dc1", "--execute", "--output", "json")
    assert back.returncode == 0, back.stderr
    assert {(s["topic"], s["to_topic"], s["how"]) for s in json.loads(back.stdout)} == \
        {(f"dc1.{topic}", topic, "reverse")}
    on_dc1_again = consume_as_group(clusters["dc1"], topic, group, None)

    assert set(on_dc1) | set(on_dc2) | set(on_dc1_again) == set(range(count)), "a record was skipped"
    duplicates = len(on_dc1) + len(on_dc2) - len(set(on_dc1) | set(on_dc2))
    assert duplicates <= 2 * 100  # at most offset.lag.max per partition on the way there
    assert not set(on_dc2) & set(on_dc1_again)  # and exact on the way back (copies are dense)

    wait_for(lambda: audit_totals(mirror, "dc1:dc2") == (0, count, 0), 30,
             "the audit to count every record on both sides")
    # Records deleted on the target show up as missing, and the audit fails.
    admin = AdminClient({"bootstrap.servers": clusters["dc2"]})
    for future in admin.delete_records([TopicPartition(f"dc1.{topic}", 0, 20)]).values():
        future.result(10)
    assert audit_totals(mirror, "dc1:dc2") == (1, count, 20)


def test_http_api_and_metrics_of_a_running_worker(mirror, clusters):
    topic, count = unique("events"), 200
    create_topic(clusters["dc1"], topic, 2)
    ConfluentClient.produce(clusters["dc1"], topic, count)
    worker = mirror.worker("w1", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
    api = wait_for(lambda: re.search(r"http api on (http://\S+)", worker.log()), 30, "the HTTP API").group(1)
    metrics = wait_for(lambda: re.search(r"metrics on (http://\S+)", worker.log()), 30, "metrics").group(1)

    def call(method, path, body=None):
        request = urllib.request.Request(api + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    assert call("POST", "/routes", {"source": "dc1", "target": "dc2", "topics": [topic]}) == \
        (200, {"source": "dc1", "target": "dc2", "topics": [topic], "policy": "prefix"})
    assert call("POST", "/routes", {"source": "dc1", "target": "dc2", "topics": "x", "policy": "identity"})[0] == 409
    assert call("POST", "/routes", {"source": "dc1", "target": "nowhere", "topics": "x"})[0] == 400
    assert call("GET", "/routes") == (200, [{"source": "dc1", "target": "dc2", "topics": [topic], "policy": "prefix",
                                             "route": "dc1:dc2"}])
    wait_for(lambda: sum(end_offsets(clusters["dc2"], f"dc1.{topic}", 2)) == count, 30, "every record copied")

    def caught_up():
        status, rows = call("GET", "/status")
        return status == 200 and len(rows) == 2 and all(r["lag_records"] == 0 and r["worker"] == "w1" for r in rows)

    wait_for(caught_up, 30, "status to show both partitions caught up")
    scraped = urllib.request.urlopen(metrics, timeout=10).read().decode()
    assert re.search(r'kgate_mirror_records_total\{route="dc1:dc2"\} 200\.0', scraped), scraped
    assert f'kgate_mirror_lag_records{{partition="0",route="dc1:dc2",topic="{topic}"}} 0.0' in scraped
    assert "kgate_mirror_replication_latency_seconds_count" in scraped
    assert call("DELETE", "/routes/dc1:dc2") == (200, {"route": "dc1:dc2", "remaining": None})
    assert call("DELETE", "/routes/dc1:dc2")[0] == 404


def assert_copied_one_to_one(copied: list[R.Consumed], source: list[R.Consumed], origin: bytes) -> None:
    """Each source record once on the target, at the same partition and offset, with its key, value,
    timestamp and headers, plus the origin header."""
    originals = {R.index_of(r): r for r in source}
    assert sorted(R.index_of(r) for r in copied) == sorted(originals)
    for record in copied:
        original = originals[R.index_of(record)]
        assert (record.partition, record.offset) == (original.partition, original.offset)
        assert (record.key, record.value, record.timestamp) == (original.key, original.value, original.timestamp)
        assert list(record.headers) == [*original.headers, (ORIGIN, origin)]


def test_a_foreign_cluster_tansu_is_both_target_and_source(mirror, clusters):
    """kgate -> Tansu and Tansu -> kgate at once, through one worker. (What Tansu 0.6 lacks
    and the mirror therefore cannot do with it is in the README: consumer groups, so no
    checkpoints or failover of groups on it; a correct high watermark, so no audit of a
    copy on it.)"""
    outgoing, incoming, count = unique("orders"), unique("sensors"), 400
    create_topic(clusters["dc1"], outgoing, 2, config={"retention.ms": "7200000"})
    create_topic(clusters["tansu"], incoming, 2)
    ConfluentClient.produce(clusters["dc1"], outgoing, count)
    ConfluentClient.produce(clusters["tansu"], incoming, count, first=count)
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "tansu", "--topics", outgoing).returncode == 0
    assert mirror.run("routes", "add", "--source", "tansu", "--target", "dc2", "--topics", incoming).returncode == 0
    mirror.worker("w1")

    on_tansu = read_topic(clusters["tansu"], f"dc1.{outgoing}", 2, count)
    assert_copied_one_to_one(on_tansu, read_topic(clusters["dc1"], outgoing, 2, count), b"dc1")
    admin = AdminClient({"bootstrap.servers": clusters["tansu"]})
    resource = ConfigResource("topic", f"dc1.{outgoing}")
    assert admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "7200000"

    on_dc2 = read_topic(clusters["dc2"], f"tansu.{incoming}", 2, count)
    assert_copied_one_to_one(on_dc2, read_topic(clusters["tansu"], incoming, 2, count), b"tansu")
    # The source side of the audit is counted by the worker, so a foreign source audits too.
    wait_for(lambda: audit_totals(mirror, "tansu:dc2") == (0, count, 0), 30, "the audit of tansu:dc2 to pass")


def test_aggregation_of_two_sources_into_one_target_keeps_every_record_once(mirror, clusters):
    topic, count = unique("orders"), 500
    for alias in ("dc1", "dc2"):
        create_topic(clusters[alias], topic, 3)
        assert mirror.run("routes", "add", "--source", alias, "--target", "hub", "--topics", topic).returncode == 0
    mirror.worker("w1")
    mirror.worker("w2")
    _produce_on_both(clusters, topic, count)
    for alias, first in (("dc1", 0), ("dc2", count)):
        copied = read_topic(clusters["hub"], f"{alias}.{topic}", 3, count)
        assert_copied_one_to_one(copied, read_topic(clusters[alias], topic, 3, count), alias.encode())
        assert sorted(R.index_of(r) for r in copied) == list(range(first, first + count))
        wait_for(lambda alias=alias: audit_totals(mirror, f"{alias}:hub") == (0, count, 0), 30,
                 f"the audit of {alias}:hub to pass")
        # Nothing more than the source's records: the copy ends where its source ends.
        assert end_offsets(clusters["hub"], f"{alias}.{topic}", 3) == end_offsets(clusters[alias], topic, 3)
    assert sorted(t for t in AdminClient({"bootstrap.servers": clusters["hub"]}).list_topics(timeout=10).topics
                  if t.endswith(topic)) == [f"dc1.{topic}", f"dc2.{topic}"]


def read_internal(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of a single-partition internal topic, read to its end."""
    end = end_offsets(bootstrap, topic, 1)[0]
    return [(r.key, r.value) for r in read_topic(bootstrap, topic, 1, max(end, 0), timeout=10)]


def test_checkpoints_in_mirrormaker_2_format_and_failover_there_and_back(mirror, clusters):
    topic, count, group = unique("ledger"), 400, unique("accounts")
    create_topic(clusters["dc1"], topic, 2)
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", topic).returncode == 0
    ConfluentClient.produce(clusters["dc1"], topic, count)
    mirror.worker("w1")
    wait_for(lambda: end_offsets(clusters["dc2"], f"dc1.{topic}", 2) == end_offsets(clusters["dc1"], topic, 2), 30,
             "every record copied")
    on_dc1 = consume_as_group(clusters["dc1"], topic, group, 250)
    upstream = committed_offsets(clusters["dc1"], group, topic, 2)

    def checkpoints() -> dict[int, Checkpoint]:
        """The group's newest checkpoint per partition, decoded as MirrorMaker 2 writes them."""
        newest = {}
        for key, value in read_internal(clusters["dc2"], "dc1.checkpoints.internal"):
            checkpoint = Checkpoint.decode(key, value)
            if checkpoint.group == group:
                newest[checkpoint.partition] = checkpoint
        return newest if [newest.get(p, Checkpoint("", "", p, -1, -1)).upstream for p in (0, 1)] == upstream \
            else None

    found = wait_for(checkpoints, 30, "checkpoints of the group's committed offsets on dc2")
    assert {c.topic for c in found.values()} == {f"dc1.{topic}"}
    for checkpoint in found.values():
        # The copy is 1-1 and dense here, so a checkpoint never points past the group's own offset
        # (no record skipped) and lags it by at most offset.lag.max (the duplicates).
        assert 0 <= checkpoint.upstream - checkpoint.downstream <= 100, checkpoint
    beats = [Heartbeat.decode(k, v) for k, v in read_internal(clusters["dc2"], "heartbeats")]
    assert any((b.source, b.target) == ("dc1", "dc2") and b.timestamp_ms > 0 for b in beats)

    # failover translates through the same offset syncs: it commits what the checkpoints say.
    executed = mirror.run("failover", "--group", group, "--from", "dc1", "--to", "dc2", "--execute")
    assert executed.returncode == 0, executed.stderr
    assert committed_offsets(clusters["dc2"], group, f"dc1.{topic}", 2) == [found[p].downstream for p in (0, 1)]
    on_dc2 = consume_as_group(clusters["dc2"], f"dc1.{topic}", group, None)
    assert set(on_dc1) | set(on_dc2) == set(range(count)), "a record was skipped on the way to dc2"

    # And back: the group read the copies to their end; on dc1 it resumes exactly at the end
    # (target -> source translation), so it reads the records written since, and only them.
    back = mirror.run("failover", "--group", group, "--from", "dc2", "--to", "dc1", "--execute")
    assert back.returncode == 0, back.stderr
    assert committed_offsets(clusters["dc1"], group, topic, 2) == end_offsets(clusters["dc1"], topic, 2)
    ConfluentClient.produce(clusters["dc1"], topic, 100, first=count)
    assert sorted(consume_as_group(clusters["dc1"], topic, group, None)) == list(range(count, count + 100))


def test_audit_finds_deleted_records_raises_the_metric_and_prunes_old_counts(mirror, clusters):
    topic, count = unique("audited"), 200
    mirror.configure(**{"audit.interval.ms": 300, "audit.window.ms": 600_000, "audit.retention.ms": 60_000})
    create_topic(clusters["dc1"], topic, 2)
    producer = Producer({"bootstrap.servers": clusters["dc1"], "linger.ms": 5})
    stamps = [int(time.time() * 1000) - 10 * (count - i) for i in range(count)]  # inside the window and retention
    for i, stamp in enumerate(stamps):
        producer.produce(topic, key=R.key(i), value=R.value(i), partition=i % 2, timestamp=stamp)
    assert producer.flush(30) == 0
    ConfluentClient.produce(clusters["dc1"], topic, count, first=count)  # stamped in 2023: past the retention
    assert mirror.run("routes", "add", "--source", "dc1", "--target", "dc2", "--topics", topic).returncode == 0
    worker = mirror.worker("w1", "--metrics", "127.0.0.1:0")
    metrics = wait_for(lambda: re.search(r"metrics on (http://\S+)", worker.log()), 30, "metrics").group(1)
    wait_for(lambda: end_offsets(clusters["dc2"], f"dc1.{topic}", 2) == end_offsets(clusters["dc1"], topic, 2), 30,
             "every record copied")

    def gauge(name: str) -> float | None:
        """The gauge's value; None until it is there, or for a scrape the endpoint reset (one
        suite run under heavy load saw prometheus-client's server reset a connection once)."""
        try:
            scraped = urllib.request.urlopen(metrics, timeout=10).read().decode()
        except ConnectionError:
            return None
        found = re.search(rf'{name}{{route="dc1:dc2",topic="{topic}"}} (\S+)', scraped)
        return float(found.group(1)) if found else None

    # Counts of minutes older than audit.retention.ms leave ZooKeeper; the recent ones stay.
    def minutes() -> dict[int, int]:
        """The counted minutes; one pruned between listing and reading is gone (None), not counted."""
        found = {int(m): mirror.read("audit", "dc1:dc2", topic, m) for m in mirror.children("audit", "dc1:dc2", topic)}
        return {m: node["source"] for m, node in found.items() if node is not None}

    wait_for(lambda: sum(minutes().values()) == count and min(minutes()) * 60_000 > R.BASE_TIMESTAMP_MS + 86_400_000,
             30, "the 2023 minutes pruned and the recent records counted")
    wait_for(lambda: gauge("kgate_mirror_audit_missing_records") == 0, 30, "a clean periodic audit")
    # Since a moment inside a minute: both sides are counted from that minute's start.
    since = datetime.fromtimestamp(stamps[count // 2] / 1000, UTC).isoformat()
    assert audit_totals(mirror, "dc1:dc2", since)[::2] == (0, 0)

    admin = AdminClient({"bootstrap.servers": clusters["dc2"]})
    for future in admin.delete_records([TopicPartition(f"dc1.{topic}", 0, 30)]).values():
        future.result(10)
    assert audit_totals(mirror, "dc1:dc2", "10m") == (1, count, 30)
    wait_for(lambda: gauge("kgate_mirror_audit_missing_records") == 30, 30, "the audit metric to show 30 missing")


def test_a_tombstone_on_the_offset_syncs_topic_is_passed_over(clusters):
    """Any client may write a record without a value to mm2-offset-syncs; it is no sync, and
    reading the syncs (failover's first step) goes on past it rather than failing on it."""
    target = f"t{uuid.uuid4().hex[:8]}"
    topic = offset_syncs_topic(target)
    create_topic(clusters["dc1"], topic, 1)
    first, second = OffsetSync("orders", 0, 10, 7), OffsetSync("orders", 0, 20, 15)
    producer = Producer({"bootstrap.servers": clusters["dc1"]})
    producer.produce(topic, first.value(), first.key(), partition=0)
    producer.produce(topic, None, first.key(), partition=0)
    producer.produce(topic, second.value(), second.key(), partition=0)
    assert producer.flush(30) == 0
    syncs = read_syncs(Cluster("dc1", clusters["dc1"]), target, timeout=30)
    assert syncs == {("orders", 0): [Sync(10, 7), Sync(20, 15)]}
