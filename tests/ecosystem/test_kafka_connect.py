"""Kafka Connect 4.4 in distributed mode on kgate, and on Apache Kafka 4.4 as the control: the
same tests on both, so a difference is kgate's.

Two workers form one Connect group and create their config, offset and status topics
themselves; exactly-once source support is enabled on both, and sink consumers read
committed records only. A FileStreamSource connector copies a file's lines to a topic and a
FileStreamSink connector copies the topic to another file. The connectors are added, paused,
resumed, reconfigured and deleted through the REST API; then the worker running the source
task is killed with kill -9 inside an open transaction, the task moves to the other worker,
its producer fences the victim's (aborting that transaction), and the sink file
must end with every source line exactly once and in order.
"""
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.connect_worker import (
    CLASSES,
    EXACTLY_ONCE_WORKER,
    SINK,
    SOURCE,
    ConnectCluster,
    ConnectWorker,
    TopicReader,
    append,
    lines,
    wait_lines,
)
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture
from tests.support.member_process import wait_for

# One worker runs the module, so its brokers and Connect clusters start once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("connect")
# Partitions Connect is asked to create its offset and status topics with (Kafka's defaults are
# 25 and 5), and one topic config passed through to the status topic's creation (KIP-605).
OFFSET_PARTITIONS = 3
STATUS_PARTITIONS = 2
STATUS_MAX_MESSAGE_BYTES = "2097152"
WORKER_SETTINGS = {
    **EXACTLY_ONCE_WORKER,
    "offset.storage.partitions": str(OFFSET_PARTITIONS),
    "status.storage.partitions": str(STATUS_PARTITIONS),
    "status.storage.max.message.bytes": STATUS_MAX_MESSAGE_BYTES,
}


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("kgate"))).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module", params=["kgate", "kafka"])
def cluster(request, tmp_path_factory):
    """Two workers in one Connect group on the broker under test: kgate, or Kafka 4.4 as the control."""
    if not CLASSES.is_dir():
        pytest.fail("Kafka Connect is not installed: run scripts/setup-ecosystem")
    broker = request.getfixturevalue("kgate" if request.param == "kgate" else "kafka_broker")
    directory = tmp_path_factory.mktemp(f"connect-{request.param}")
    group = f"connect-{uuid.uuid4().hex[:8]}"
    workers = [ConnectWorker(directory / f"worker-{n}", broker.bootstrap, group, WORKER_SETTINGS).start()
               for n in range(2)]
    connect = ConnectCluster(broker.bootstrap, group, workers, directory)
    try:
        for worker in workers:
            wait_for(lambda w=worker: w.rest("GET", "/connectors")[0] == 200 or not w.alive(), 120,
                     f"worker {worker.worker_id} serving its REST API")
            assert worker.alive(), worker.log()[-3000:]
        yield connect
    finally:
        for worker in workers:
            worker.stop()


def test_connect_creates_its_internal_topics_compacted_with_the_configs_it_asks_for(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    suffixes = {"configs": 1, "offsets": OFFSET_PARTITIONS, "status": STATUS_PARTITIONS}
    topics = admin.list_topics(timeout=30).topics
    for suffix, partitions in suffixes.items():
        assert len(topics[f"{cluster.group}-{suffix}"].partitions) == partitions, suffix
    resources = [ConfigResource("TOPIC", f"{cluster.group}-{suffix}") for suffix in suffixes]
    described = {resource.name: future.result(timeout=30)
                 for resource, future in admin.describe_configs(resources).items()}
    for name, entries in described.items():
        assert entries["cleanup.policy"].value == "compact", name
    assert described[f"{cluster.group}-status"]["max.message.bytes"].value == STATUS_MAX_MESSAGE_BYTES


def test_connectors_are_added_paused_resumed_reconfigured_and_deleted_through_rest(cluster):
    name = uuid.uuid4().hex[:8]
    topic, source_file = f"lines-{name}", cluster.directory / f"source-{name}.txt"
    sink_file, second_sink_file = cluster.directory / f"sink-{name}.txt", cluster.directory / f"sink2-{name}.txt"
    create_topic(cluster.bootstrap, topic, 1)
    source_file.touch()
    source, sink = f"source-{name}", f"sink-{name}"
    cluster.rest("POST", "/connectors", {"name": source, "config": {
        "connector.class": SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1",
        "exactly.once.support": "required"}}, expect=201)
    sink_config = {"connector.class": SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1"}
    cluster.rest("POST", "/connectors", {"name": sink, "config": sink_config}, expect=201)
    assert sorted(cluster.rest("GET", "/connectors")) == sorted([source, sink])
    cluster.wait_state(source, "RUNNING")
    cluster.wait_state(sink, "RUNNING")
    first = append(source_file, 0, 50)
    wait_lines(sink_file, first, cluster)

    cluster.rest("PUT", f"/connectors/{source}/pause", expect=202)
    cluster.wait_state(source, "PAUSED")
    while_paused = append(source_file, 50, 50)
    # The sink is moved to a second file while nothing flows; it resumes from its committed offset.
    cluster.rest("PUT", f"/connectors/{sink}/config", {**sink_config, "file": str(second_sink_file)})
    wait_for(lambda: cluster.rest("GET", f"/connectors/{sink}/tasks")[0]["config"].get("file")
             == str(second_sink_file), 60, "the sink's task reconfigured")
    cluster.wait_state(sink, "RUNNING")
    assert lines(sink_file) == first
    cluster.rest("PUT", f"/connectors/{source}/resume", expect=202)
    cluster.wait_state(source, "RUNNING")
    wait_lines(second_sink_file, while_paused, cluster)
    assert lines(sink_file) == first

    for connector in (source, sink):
        cluster.rest("DELETE", f"/connectors/{connector}", expect=204)
        # The status stays readable (type "unknown") until the worker has read the deletion back.
        cluster.rest("GET", f"/connectors/{connector}/status", expect=404, retry=(0, 200, 409, 503))
    assert cluster.rest("GET", "/connectors") == []


def test_a_worker_killed_mid_run_hands_its_source_task_over_and_the_sink_gets_each_line_once(cluster):
    name = uuid.uuid4().hex[:8]
    topic, source_file, sink_file = f"lines-{name}", cluster.directory / f"source-{name}.txt", \
        cluster.directory / f"sink-{name}.txt"
    create_topic(cluster.bootstrap, topic, 1)
    source_file.touch()
    source, sink = f"source-{name}", f"sink-{name}"
    # The sink first: its task goes to one worker, and the source's task then to the one with no
    # task (Connect's assignor balances task counts), which is the worker killed below.
    cluster.rest("POST", "/connectors", {"name": sink, "config": {
        "connector.class": SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1"}}, expect=201)
    sink_worker = cluster.wait_state(sink, "RUNNING")["tasks"][0]["worker_id"]
    source_config = {"connector.class": SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1",
                     "exactly.once.support": "required", "transaction.boundary": "interval",
                     "transaction.boundary.interval.ms": "600000"}
    cluster.rest("POST", "/connectors", {"name": source, "config": source_config}, expect=201)
    source_worker = cluster.wait_state(source, "RUNNING")["tasks"][0]["worker_id"]
    assert source_worker != sink_worker, "both tasks on one worker: the kill would take the sink too"
    victim = next(w for w in cluster.workers if w.worker_id == source_worker)
    survivor = next(w for w in cluster.workers if w is not victim)

    # The source's first transaction stays open (a transaction boundary far beyond the test):
    # its lines are in the topic, unread by the sink, when their worker is killed. The task on
    # the survivor fences the victim's producer, which aborts them, and copies the file again
    # from the start; its transactions then end per poll once the connector is reconfigured.
    uncommitted = TopicReader(cluster.bootstrap, topic, "read_uncommitted")
    committed = TopicReader(cluster.bootstrap, topic, "read_committed")
    try:
        expected = append(source_file, 0, 200)
        cluster.wait(lambda: len(uncommitted.read()) >= len(expected), 60, "the first lines in the topic")
        assert lines(sink_file) == [], "the sink copied lines of a transaction still open"
        victim.kill()

        def moved():
            status = cluster.status(source)
            return status["tasks"] and status["tasks"][0]["worker_id"] == survivor.worker_id \
                and status["tasks"][0]["state"] == "RUNNING"
        cluster.wait(moved, 90, f"the source task moved to {survivor.worker_id}")
        cluster.rest("PUT", f"/connectors/{source}/config", {**source_config, "transaction.boundary": "poll"})
        expected += append(source_file, len(expected), 300)
        wait_lines(sink_file, expected, cluster)
        assert committed.to_end() == expected
        everything = uncommitted.to_end()
        assert everything[:200] == expected[:200] and len(everything) > len(expected), \
            "the victim's open transaction is not in the log"
    finally:
        uncommitted.close()
        committed.close()
