"""A Kafka Streams 4.4 application (ecosystem/streams/PageCounts.java) on kgate, and on Apache
Kafka 4.4 as the control: the same run on both, so a difference is kgate's.

Page views (view id -> page) come with duplicates, as a producer without idempotence leaves
them when it sends again what it got no acknowledgement for; the application drops a view id
it has seen (a persistent store), regroups by page (a repartition topic), counts per hour in a
persistent window store (its changelog compacted), re-keys and joins the counts with a table of
sections (a second repartition topic), exactly_once_v2, two instances with one standby replica,
with each rebalance protocol: group.protocol=classic, and streams (KIP-1071: the broker
assigns the tasks and creates the internal topics; the standby count and session timeout are
then the brokers' streams group settings). One instance is killed with kill -9 as new views
arrive and started again on its state directory; later the other one is stopped, so the
restarted one serves every task from what it restored. The output, read with read_committed,
must hold exactly the expected counts, each page's rising one commit at a time: nothing counted
twice across the kill, nothing lost. The repartition topics must have been purged by Streams'
DeleteRecords; with the streams protocol, kafka-streams-groups must describe the group left
on kgate as on Kafka.

One run per broker and protocol is shared by the module's tests (it takes a minute): the tests
then look at what it left. Beside the application, a member driven on the wire on each broker
is told the brokers' task offset interval and acceptable recovery lag, and its reported task
offsets are described alike (neither broker gives a warm-up task).
"""
import re
import time
import uuid
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.protocol.metadata import FindCoordinatorRequest

from conformance.tool_host import ToolHost
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest
from tests.support.clients import create_topic
from tests.support.kafka_reference import broker_under_test
from tests.support.member_process import wait_for
from tests.support.streams_application import CLASSES, StreamsInstance
from tests.support.wire import Wire

# One worker runs the module, so its brokers start once (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("streams")
PARTITIONS = 3
PAGES = 5
HOUR_MS = 3_600_000
# Every view falls in the last whole hour. Not a fixed date long past: a broker's retention
# (the topics' 7 days, the window store changelog's window + 1 day) deletes such records at its
# next check (Kafka's first comes 30 s after its start), under a Streams application still to
# read or restore them.
WINDOW = (time.time_ns() // 1_000_000 // HOUR_MS - 1) * HOUR_MS
STORES = ("page-counts", "seen-views")  # the application's persistent stores
# Views sent again, as if their acknowledgements had been lost: one in RESENT.
RESENT = 7
SETTINGS = {
    "processing.guarantee": "exactly_once_v2",
    "num.standby.replicas": "1",
    "commit.interval.ms": "200",
    # Repartition topics purged (DeleteRecords up to the committed offsets) every second, not 30 s.
    "repartition.purge.interval.ms": "1000",
    # A member killed with kill -9 leaves the group after this, not Kafka's default 45 s.
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "1000",
}
# The same for streams groups, where the brokers decide them (Kafka's bounds let them that low).
STREAMS_GROUPS = {
    "group.streams.num.standby.replicas": 1,
    "group.streams.session.timeout.ms": 6000, "group.streams.min.session.timeout.ms": 6000,
    "group.streams.heartbeat.interval.ms": 1000, "group.streams.min.heartbeat.interval.ms": 1000,
}
# kafka-streams-groups --describe, as each view shows the group the run leaves (its restarted
# instance alone), kept per (broker, protocol) for the Kafka run to be compared with kgate's.
DESCRIBE_VIEWS = {"offsets": (), "members": ("--members",), "state": ("--state",),
                  "members verbose": ("--members", "--verbose"), "state verbose": ("--state", "--verbose")}
DESCRIBED: dict[tuple[str, str], dict[str, tuple[int, list[str]]]] = {}
HEARTBEAT = StreamsGroupHeartbeatRequest
COORDINATOR_AWAY = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    yield from broker_under_test("kgate", tmp_path_factory, "streams", STREAMS_GROUPS)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    yield from broker_under_test("kafka", tmp_path_factory, "streams", kafka_settings=STREAMS_GROUPS)


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    """kafka-streams-groups, twenty times in one JVM (conformance/tool_host.py)."""
    directory = tmp_path_factory.mktemp("streams-tools")
    with ToolHost(directory, directory / "tool-host.log") as host:
        yield host


def produce_views(bootstrap: str, topic: str, first: int, count: int) -> None:
    """View v<j> of page p<j mod PAGES>, stamped inside the window; then every RESENT-th view of
    the range again, by a producer that retries without idempotence (its duplicates are real)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                         "linger.ms": 5})
    views = range(first, first + count)
    for j in [*views, *(j for j in views if j % RESENT == 0)]:
        producer.produce(topic, key=f"v{j}", value=f"p{j % PAGES}", timestamp=WINDOW + j)
    assert producer.flush(30) == 0


def produce_sections(bootstrap: str, topic: str) -> None:
    """The table of sections (page -> section). Java's partitioner (murmur2), so the table is
    partitioned as Streams partitions the join's other side; stamped before the views, so the
    table is loaded before they are joined."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for page in range(PAGES):
        producer.produce(topic, key=f"p{page}", value=f"s{page % 2}", timestamp=WINDOW - 60_000)
    assert producer.flush(30) == 0


def counts(views: int) -> dict[str, str]:
    """The output once ``views`` distinct views are counted: "section:window:count" per page."""
    return {f"p{page}": f"s{page % 2}:{WINDOW}:{len(range(page, views, PAGES))}" for page in range(PAGES)}


def count_of(value: str) -> int:
    return int(value.rsplit(":", 1)[1])


@dataclass
class Output:
    """The output topic as a read_committed consumer sees it: every value per page, in order."""

    consumer: Consumer
    history: dict[str, list[str]] = field(default_factory=dict)

    def latest(self) -> dict[str, str]:
        for message in self.consumer.consume(500, timeout=0.5):
            error = message.error()
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                # "Subscribed topic not available": a broker asked before it learned of the new
                # topic (on a cluster, one broker may learn of it a moment after another). The
                # consumer keeps asking; a topic that never comes shows as counts that never do.
                continue
            assert error is None, error
            self.history.setdefault(message.key().decode(), []).append(message.value().decode())
        return {page: values[-1] for page, values in self.history.items()}


@dataclass
class Run:
    key: tuple[str, str]  # the broker and the group protocol
    bootstrap: str
    application: str
    instances: list[StreamsInstance]
    output: Output
    expected: dict[str, str]
    restarted_at: int = 0  # the length of instance 0's log when it was started again
    handed_over: dict[str, int] = field(default_factory=dict)  # each page's output values when the survivor left

    def wait_counts(self, expected: dict[str, str], what: str, timeout: float = 120) -> None:
        try:
            wait_for(lambda: self.output.latest() == expected, timeout, what, interval=0)
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}: {self.output.latest()}\n{self.errors()}") from None

    def errors(self) -> str:
        return "\n".join(f"instance {n}: {instance.errors()}" for n, instance in enumerate(self.instances))


@pytest.fixture(scope="module", params=[("kgate", "classic"), ("kafka", "classic"), ("kgate", "streams"),
                                        ("kafka", "streams")], ids="-".join)
def run(request, tmp_path_factory, tools):
    """The whole run on the broker under test (kgate, or Kafka 4.4 as the control) with one
    rebalance protocol, for the tests to look at afterwards."""
    if not CLASSES.is_dir():
        pytest.fail("the Kafka Streams application is not built: run scripts/setup-ecosystem")
    kind, protocol = request.param
    broker = request.getfixturevalue(kind)
    directory = tmp_path_factory.mktemp(f"streams-{kind}-{protocol}")
    application = f"page-counts-{uuid.uuid4().hex[:8]}"
    views, sections, output = (f"{application}-{name}" for name in ("views", "sections", "counts"))
    create_topic(broker.bootstrap, views, PARTITIONS)
    create_topic(broker.bootstrap, sections, PARTITIONS, {"cleanup.policy": "compact"})
    create_topic(broker.bootstrap, output, PARTITIONS)
    produce_sections(broker.bootstrap, sections)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{application}-check",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([output])
    instances = [StreamsInstance(directory / f"instance-{n}", broker.bootstrap, application,
                                 {**SETTINGS, "group.protocol": protocol}) for n in range(2)]
    state = Run(request.param, broker.bootstrap, application, instances, Output(consumer), counts(650))
    try:
        produce_views(broker.bootstrap, views, 0, 300)
        for instance in instances:
            instance.start()
        state.wait_counts(counts(300), "the first counts")
        # Killed as 150 more views arrive, while the instances take them in: its transaction is
        # then open, and the restart, with the process id its state directory keeps (and so the
        # same transactional id), fences it and aborts it.
        produce_views(broker.bootstrap, views, 300, 150)
        instances[0].kill()
        produce_views(broker.bootstrap, views, 450, 150)
        state.restarted_at = len(instances[0].log())
        instances[0].start()
        state.wait_counts(counts(600), "the counts after the kill and restart")
        # The survivor leaves: the restarted instance now counts every page from the state it restored.
        state.handed_over = {page: len(values) for page, values in state.output.history.items()}
        instances[1].stop()
        produce_views(broker.bootstrap, views, 600, 50)
        state.wait_counts(state.expected, "the counts from the restored state")
        DESCRIBED[request.param] = described(tools, broker.bootstrap, application, protocol == "streams")
        yield state
    finally:
        consumer.close()
        for instance in instances:
            instance.stop()


def describe(tools: ToolHost, bootstrap: str, application: str, view: str) -> tuple[int, list[str]]:
    """One view of kafka-streams-groups --describe: its exit status and its lines, normalized:
    the application id, member and process ids and the coordinator's address named, columns
    single-spaced, rows sorted (the tool prints them in hash order); in the verbose views every
    number stands alone as N, since the epochs count each broker's own steps (Kafka's group
    reached epoch 3 where kgate's reached 2 in the same run)."""
    returncode, output = tools.run("kafka-streams-groups", "--bootstrap-server", bootstrap, "--describe",
                                   "--group", application, *DESCRIBE_VIEWS[view])
    text = re.sub(r"127\.0\.0\.1:\d+", "ADDRESS", output.replace(application, "APP"))
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "PROCESS", text)
    text = re.sub(r"(?<!\S)[A-Za-z0-9_-]{22}(?!\S)", "MEMBER", text)
    if "verbose" in view:
        text = re.sub(r"(?<!\S)\d+(?!\S)", "N", text)
    return returncode, sorted(" ".join(line.split()) for line in text.splitlines() if line.strip())


def described(tools: ToolHost, bootstrap: str, application: str,
              streams_group: bool) -> dict[str, tuple[int, list[str]]]:
    """Every view; of a streams group, once its committed offsets have caught up (no lag left
    to differ by)."""
    def caught_up():
        offsets = describe(tools, bootstrap, application, "offsets")
        rows = [line for line in offsets[1] if line.startswith("APP ")]
        return offsets if rows and all(row.endswith(" 0") for row in rows) else None
    views = {"offsets": wait_for(caught_up, 60, "the group's lag to reach 0")} if streams_group else {}
    return views | {view: describe(tools, bootstrap, application, view)
                    for view in DESCRIBE_VIEWS if view not in views}


def test_the_output_holds_exactly_the_expected_counts_each_rising_once_per_commit(run):
    assert run.output.latest() == run.expected
    for page, values in run.output.history.items():
        rising = [count_of(value) for value in values]
        assert rising == sorted(set(rising)), f"{page}: a count went back or came twice: {rising}"
    for n, instance in enumerate(run.instances):
        log = instance.log()
        assert "State transition from RUNNING to ERROR" not in log, f"instance {n}: {instance.errors()}"
        # A consumer that finds its committed offset gone resets it and skips records: a loss.
        assert "is out of range for partition" not in log, f"instance {n} lost its position"


def test_the_restarted_instance_counts_on_from_complete_stores_restored_from_changelogs(run):
    """Exactly-once leaves no checkpoint for the stores of a killed instance: on its restart
    Streams wipes them and rebuilds them from their changelogs (restoring for active tasks,
    replaying for standbys). Once the survivor has left, the restarted instance alone counts
    the last views on that state: each page's count goes on from the one before, none starts
    again lower."""
    restored = set()
    for line in run.instances[0].log()[run.restarted_at:].splitlines():
        if "Finished restoring changelog" in line:
            restored.add(line.split("Finished restoring changelog ")[1].split()[0].rsplit("-", 1)[0])
    assert {f"{run.application}-{store}-changelog" for store in STORES} <= restored, restored
    before, after = counts(600), counts(650)
    for page, values in run.output.history.items():
        went_on = [count_of(value) for value in values[run.handed_over[page]:]]
        handed = count_of(before[page])
        assert went_on and went_on[-1] == count_of(after[page]), f"{page}: {went_on}"
        assert min(went_on) > handed, f"{page} counted on from below {handed}: {went_on}"


def test_the_stores_changelogs_are_compacted(run):
    admin = AdminClient({"bootstrap.servers": run.bootstrap})
    resources = [ConfigResource("TOPIC", f"{run.application}-{store}-changelog") for store in STORES]
    for resource, future in admin.describe_configs(resources).items():
        assert "compact" in future.result(timeout=30)["cleanup.policy"].value.split(","), resource.name


def test_streams_purged_its_repartition_topics_with_delete_records(run):
    admin = AdminClient({"bootstrap.servers": run.bootstrap})
    repartition = sorted(name for name in admin.list_topics(timeout=30).topics
                         if name.startswith(run.application) and name.endswith("-repartition"))
    assert len(repartition) == 2, repartition
    probe = Consumer({"bootstrap.servers": run.bootstrap, "group.id": f"{run.application}-probe"})

    def purged():
        marks = {(topic, p): probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                 for topic in repartition for p in range(PARTITIONS)}
        return all(low > 0 for low, high in marks.values() if high > 0) and marks
    try:
        marks = wait_for(purged, 30, "every repartition partition with records purged (log start > 0)")
        assert any(high > 0 for _, high in marks.values()), marks
    finally:
        probe.close()



def test_kafka_streams_groups_describes_the_group_on_kgate_as_on_kafka(run):
    """Kafka 4.4's kafka-streams-groups tool describes a streams group (its offsets, members and
    tasks, state) the same on both brokers, after normalization; a classic group is refused
    alike. Kgate's run comes first, and Kafka's is compared with it."""
    views = DESCRIBED[run.key]
    kind, protocol = run.key
    if protocol == "streams":
        assert all(code == 0 for code, _ in views.values()), views
        [member] = [line for line in views["members"][1] if line.startswith("APP ")]
        assert member.endswith("ACTIVE: 0:[0,1,2]; 1:[0,1,2]; 2:[0,1,2];"), member
        assert "Stable 1" in " ".join(views["state"][1]), views["state"]
    if kind == "kafka":
        assert views == DESCRIBED[("kgate", protocol)]


def _join(wire: Wire, group: str, topic: str):
    """The join's answer, once the group's coordinator is there (a fresh broker loads it first)."""
    S = HEARTBEAT.Topology.Subtopology
    changelog = S.TopicInfo(name=f"{group}-store-changelog", partitions=0, replication_factor=0,
                            topic_configs=[S.TopicInfo.KeyValue(key="cleanup.policy", value="compact")])
    topology = HEARTBEAT.Topology(epoch=0, subtopologies=[S(
        subtopology_id="0", source_topics=[topic], source_topic_regex=[], state_changelog_topics=[changelog],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])
    deadline = time.monotonic() + 60
    while True:
        # FindCoordinator makes Kafka create __consumer_offsets; a heartbeat alone does not.
        wire.call(FindCoordinatorRequest(key=group, key_type=0), 1)
        joined = wire.call(HEARTBEAT(group_id=group, member_id=f"member-{uuid.uuid4()}", member_epoch=0,
                                     endpoint_information_epoch=0, rebalance_timeout_ms=30_000, topology=topology,
                                     active_tasks=[], standby_tasks=[], warmup_tasks=[],
                                     process_id=str(uuid.uuid4())), 1)
        if joined.error_code not in COORDINATOR_AWAY or time.monotonic() > deadline:
            return joined
        time.sleep(0.2)


@pytest.mark.parametrize("kind", ["kgate", "kafka"])
def test_a_member_is_told_the_offset_interval_and_recovery_lag_and_its_reports_are_described(kind, request):
    """On the wire, beside the application: a member is told how often to report its tasks'
    changelog offsets and the lag under which it counts as caught up (the brokers' defaults),
    it reports them, and StreamsGroupDescribe shows the last report, and the topology as
    configured (its changelog sized, where the member sent 0). Neither broker gives a warm-up
    task (Kafka 4.4's assignment refinement keeps the target assignment)."""
    broker = request.getfixturevalue(kind)
    topic, group = f"clicks-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    T = HEARTBEAT.TaskOffset
    with Wire(broker.bootstrap) as wire:
        joined = _join(wire, group, topic)
        assert joined.error_code == ErrorCode.NONE, joined
        assert (joined.task_offset_interval_ms, joined.acceptable_recovery_lag) == (60_000, 10_000)
        member, epoch, beat = joined.member_id, joined.member_epoch, joined
        statuses = set()
        deadline = time.monotonic() + 30
        while True:  # until the member has its tasks (Kafka's first come after a delay)
            statuses |= {(status.status_code, status.status_detail) for status in beat.status or ()}
            if beat.active_tasks:
                break
            assert time.monotonic() < deadline, "no tasks within 30 s"
            time.sleep(0.2)
            beat = wire.call(HEARTBEAT(group_id=group, member_id=member, member_epoch=epoch,
                                       endpoint_information_epoch=0), 1)
            assert beat.error_code == ErrorCode.NONE, beat
            epoch = beat.member_epoch
        # Told once (Kafka's coordinator may see the source topic a heartbeat or two after it is made).
        assert (3, f"Internal topics are missing: {group}-store-changelog") in statuses, statuses
        assert not beat.warmup_tasks
        reported = wire.call(HEARTBEAT(group_id=group, member_id=member, member_epoch=epoch,
                                       endpoint_information_epoch=0, active_tasks=beat.active_tasks,
                                       standby_tasks=[], warmup_tasks=[],
                                       task_offsets=[T(subtopology_id="0", partition=0, offset=5)],
                                       task_end_offsets=[T(subtopology_id="0", partition=0, offset=9),
                                                         T(subtopology_id="0", partition=1, offset=3)]), 1)
        assert reported.error_code == ErrorCode.NONE, reported
        [described] = wire.call(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                                0).groups
    [[changelog]] = [s.state_changelog_topics for s in described.topology.subtopologies]
    assert (changelog.name, changelog.partitions) == (f"{group}-store-changelog", 2), "sized as configured"
    [described_member] = described.members
    assert [(t.subtopology_id, t.partition, t.offset) for t in described_member.task_offsets] == [("0", 0, 5)]
    assert sorted((t.subtopology_id, t.partition, t.offset) for t in described_member.task_end_offsets) == [
        ("0", 0, 9), ("0", 1, 3)]
    assert not described_member.assignment.warmup_tasks
