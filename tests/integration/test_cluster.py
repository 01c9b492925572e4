"""Cluster mode: three (then four) brokers over a real ZooKeeper ensemble and one shared
ledger directory, driven by real clients, with brokers killed, paused and added.
"""
import json
import os
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.acl import DescribeAclsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kazoo.client import KazooClient

from kgate.protocol.error_codes import ErrorCode
from tests.support import records as R
from tests.support.cluster import (
    SESSION_TIMEOUT_MS,
    AckedProducer,
    KgateCluster,
    check_delivery,
    read_all,
    watermarks,
)
from tests.support.member_process import wait_for
from tests.support.transactions import read_to_end, transactional
from tests.support.wire import Wire, connect, encode_request, read_response
from tests.support.zookeeper import ensemble  # noqa: F401 - a fixture
from tests.unit.record_batches import build_batch

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]
TOPIC_PARTITIONS = 12


@pytest.fixture
def cluster_factory(tmp_path, ensemble):  # noqa: F811
    started = []

    def start(size=3, **settings):
        cluster = KgateCluster(str(tmp_path), ensemble.address, f"/kgate-{uuid.uuid4().hex[:8]}", size, **settings)
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()


@pytest.fixture
def cluster(cluster_factory):
    return cluster_factory()


def create(cluster, name, partitions=TOPIC_PARTITIONS):
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return cluster.wait_leaders(name, partitions, set(cluster.brokers))


def test_a_topic_every_broker_is_asked_to_auto_create_at_once_is_made_once_and_no_answer_fails(cluster):
    """Metadata naming a new topic, with auto-creation, to every broker at once: one makes it,
    and one whose own create finds it made before it has learned it from ZooKeeper answers
    LEADER_NOT_AVAILABLE for it, as Kafka answers for a topic being created (clients retry),
    rather than failing the request and closing the connection."""
    names = [f"auto-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    wires = [Wire(broker.bootstrap) for broker in cluster.brokers.values()]
    try:
        asked = {}
        for name in names:
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                      allow_auto_topic_creation=True)
            for wire in wires:
                asked[name, wire] = request, wire.send(request, 9)
        errors = {ErrorCode(wire.read(request, 9, correlation_id).topics[0].error_code)
                  for (_, wire), (request, correlation_id) in asked.items()}
    finally:
        for wire in wires:
            wire.close()
    assert errors <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, errors
    for name in names:
        cluster.wait_leaders(name, 1, set(cluster.brokers))


def _while_every_broker_changes(cluster, change, steps: int, watch) -> list:
    """Through every broker at once, ``change(wire, step)`` for each step (a change every broker
    reads from ZooKeeper while it makes its own), while ``watch(wire, acknowledged)`` asks the
    same broker again and again about what it has acknowledged so far; what the watches found
    wrong, with the step each was after."""
    acknowledged = {node_id: [] for node_id in cluster.brokers}
    wrong, changing = [], set(cluster.brokers)

    def change_through(node_id):
        with Wire(cluster.brokers[node_id].bootstrap) as wire:
            for step in range(steps):
                if not change(wire, node_id, step):
                    return
                acknowledged[node_id].append(step)
        changing.discard(node_id)

    def watch_through(node_id):
        with Wire(cluster.brokers[node_id].bootstrap) as wire:
            for _ in range(2_000):  # a bound: the changes end long before
                if not changing:
                    return
                wrong.extend(watch(wire, node_id, list(acknowledged[node_id])))

    threads = [threading.Thread(target=work, args=(node_id,)) for node_id in cluster.brokers
               for work in (change_through, watch_through)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not changing, f"brokers {sorted(changing)} did not finish their changes"
    return wrong


def _metadata(wire, names):
    return wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names],
                                     allow_auto_topic_creation=False), 9).topics


def test_a_topic_a_broker_has_answered_created_it_never_answers_unknown(cluster):
    """Topics created one at a time through every broker at once: once a broker has answered
    CreateTopics for a topic, its Metadata answers never call the topic unknown. (A broker that
    read the store's topic list while it created a topic took the new topic for deleted: it
    stopped serving it and forgot it, served it again a moment later, and a consumer that had
    just joined for it read nothing.)"""
    run = uuid.uuid4().hex[:6]

    def make(wire, node_id, step):
        topic = CreateTopicsRequest.CreatableTopic
        answer = wire.call(CreateTopicsRequest(version=5, timeout_ms=10_000, validate_only=False, topics=[
            topic(name=f"made-{run}-{node_id}-{step}", num_partitions=1, replication_factor=1, assignments=[],
                  configs=[])]), 5)
        return answer.topics[0].error_code == ErrorCode.NONE

    def unknown(wire, node_id, made):
        return [t.name for t in _metadata(wire, [f"made-{run}-{node_id}-{step}" for step in made])
                if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]

    wrong = _while_every_broker_changes(cluster, make, 25, unknown)
    assert not wrong, f"answered unknown after the broker answered them created: {sorted(set(wrong))}"


def test_a_topic_a_broker_has_answered_grown_never_shows_fewer_partitions_there(cluster):
    """A topic of each broker grown one partition at a time through that broker, all three at
    once: once a broker has answered CreatePartitions, its Metadata never shows the topic with
    fewer partitions. (A broker read a topic's node, on a change it was told of, outside its
    topic lock: a version read before its own next change was applied after it.)"""
    run = uuid.uuid4().hex[:6]
    for node_id in cluster.brokers:
        create(cluster, f"grown-{run}-{node_id}", 1)

    def grow(wire, node_id, step):
        request = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=f"grown-{run}-{node_id}", count=step + 2, assignments=None)], timeout_ms=10_000, validate_only=False)
        return wire.call(request, 3).results[0].error_code == ErrorCode.NONE

    def fewer(wire, node_id, grown):
        (topic,) = _metadata(wire, [f"grown-{run}-{node_id}"])
        least = grown[-1] + 2 if grown else 1
        return [(len(topic.partitions), least)] if len(topic.partitions) < least else []

    wrong = _while_every_broker_changes(cluster, grow, 20, fewer)
    assert not wrong, f"(partitions shown, partitions answered grown to): {sorted(set(wrong))}"


def test_every_broker_lists_every_broker_and_partitions_spread_evenly(cluster):
    leaders = create(cluster, "spread")
    for broker in cluster.brokers.values():
        assert cluster.live_brokers(broker.bootstrap) == {0, 1, 2}
        admin = cluster.admin(broker.bootstrap)
        described = admin.describe_cluster(request_timeout=10).result(timeout=15)
        assert {node.id: node.port for node in described.nodes} == \
            {node_id: int(b.bootstrap.rsplit(":", 1)[1]) for node_id, b in cluster.brokers.items()}
        assert described.controller.id == 0
    counts = sorted(list(leaders.values()).count(b) for b in (0, 1, 2))
    assert counts == [4, 4, 4], leaders
    # Any broker is a bootstrap: records produced through one are read through another.
    producer = AckedProducer("confluent", cluster.brokers[0].bootstrap, "spread", 600, per_second=5000).start().join()
    assert not producer.failed and len(producer.acked) == 600
    check_delivery(read_all(cluster.brokers[2].bootstrap, "spread", TOPIC_PARTITIONS), producer.acked)


def named_epochs(cluster, topic: str, among: set[int]) -> dict[int, tuple[int, int]] | None:
    """Partition -> (leader, leader epoch) once every broker of ``among`` names the same for
    every partition, each led by one of them with a known epoch; None before."""
    answers = []
    for node_id in sorted(among):
        with Wire(cluster.brokers[node_id].bootstrap) as wire:
            [described] = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                    allow_auto_topic_creation=False), 9).topics
        answers.append({p.partition_index: (p.leader_id, p.leader_epoch) for p in described.partitions})
    named = answers[0]
    agreed = all(answer == named for answer in answers) and len(named) == TOPIC_PARTITIONS
    return named if agreed and all(leader in among and epoch >= 0 for leader, epoch in named.values()) else None


def test_kill_9_of_an_owner_moves_its_partitions_and_loses_no_acknowledged_record(cluster):
    """Every broker names each partition's leader epoch as Kafka's brokers do, not only its
    owner (KIP-320: clients ignore an answer older than what they have heard, and a missing
    epoch turns that off): the same before the kill, and a higher one for each partition that
    moved, from both survivors."""
    leaders = create(cluster, "failover")
    before = wait_for(lambda: named_epochs(cluster, "failover", {0, 1, 2}), 30, "every broker to name the epochs")
    victim = 1
    producers = [AckedProducer("confluent", cluster.bootstrap, "failover", 6000, per_second=600),
                 AckedProducer("kafka-python", cluster.bootstrap, "failover", 6000, first=6000, per_second=600)]
    for producer in producers:
        producer.start()
    wait_for(lambda: all(len(p.acked) > 1000 for p in producers), 60, "both producers to get acknowledgements")
    cluster.brokers[victim].kill()
    moved = cluster.wait_leaders("failover", TOPIC_PARTITIONS, {0, 2}, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
    assert all(moved[p] != victim for p in leaders)
    after = wait_for(lambda: named_epochs(cluster, "failover", {0, 2}), 30, "the survivors to name the epochs")
    for p, (leader, epoch) in after.items():
        was_leader, was_epoch = before[p]
        assert epoch > was_epoch if leader != was_leader else epoch == was_epoch, (p, before[p], after[p])
    for producer in producers:
        producer.join()
        assert not producer.failed, producer.failed[:3]
        assert len(producer.acked) == 6000
    stored = read_all(cluster.bootstrap, "failover", TOPIC_PARTITIONS)
    check_delivery(stored, producers[0].acked + producers[1].acked)
    assert len(stored) >= 12000


def test_a_paused_broker_acknowledges_nothing_for_partitions_that_moved_away(cluster):
    leaders = create(cluster, "paused")
    victim = 2
    producer = AckedProducer("confluent", cluster.bootstrap, "paused", 8000, per_second=800,
                             **{"max.in.flight.requests.per.connection": 5}).start()
    wait_for(lambda: len(producer.acked) > 1000, 60, "acknowledgements before the pause")
    lost = next(p for p, leader in leaders.items() if leader == victim)
    late = Wire(cluster.brokers[victim].bootstrap)
    process = cluster.brokers[victim].process
    process.send_signal(signal.SIGSTOP)
    try:
        # Beyond the session timeout: the others take its partitions over and fence its ledgers.
        cluster.wait_leaders("paused", TOPIC_PARTITIONS, {0, 1}, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        acked_while_paused = len(producer.acked)
        wait_for(lambda: len(producer.acked) > acked_while_paused + 500, 60, "the survivors to acknowledge")
        # A write that reaches it while paused: it handles it the moment it resumes, before
        # it can learn that its session is gone. Only the fence stops it being acknowledged.
        late.sock.sendall(encode_request(produce_request("paused", lost), 7, correlation_id=1))
    finally:
        process.send_signal(signal.SIGCONT)
    answer = read_response(late.sock, ApiKey.Produce, 7, 1).responses[0].partition_responses[0]
    late.close()
    assert answer.error_code == ErrorCode.NOT_LEADER_FOR_PARTITION, answer
    # Resumed, it finds its session expired, drops everything and joins again.
    cluster.wait_live({0, 1, 2}, timeout=60)
    producer.join()
    assert not producer.failed, producer.failed[:3]
    check_delivery(read_all(cluster.bootstrap, "paused", TOPIC_PARTITIONS), producer.acked)
    assert "session expired" in open(cluster.brokers[victim].log_path).read()


def produce_request(topic, partition):
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=build_batch([b"late"]))])])


def test_an_epoch_end_asked_behind_a_waiting_fetch_covers_what_that_fetch_returns(cluster):
    """librdkafka checks its position with OffsetForLeaderEpoch each time a Metadata answer raises
    the leader epoch it knows, on the owner's connection, behind the fetch it has in flight there.
    An end below its fetch position is a truncation to it: it seeks back to that end and drops
    the records it had fetched but not yet handed to the application (fault run seed 5: a
    consumer read idem/1@480, then @484). So the end answered must cover what the fetch before
    it returns, as Kafka's does, which handles a connection's requests one at a time."""
    topic = "epoch-end"
    owner = cluster.brokers[create(cluster, topic, 1)[0]]
    with Wire(owner.bootstrap) as wire:
        # The owner Metadata named may take the partition a moment later: until it has, NOT_LEADER_FOR_PARTITION.
        wait_for(lambda: wire.call(produce_request(topic, 0), 7).responses[0].partition_responses[0].base_offset == 0,
                 30, "the owner to store offset 0")
        [described] = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), 9).topics
        epoch = described.partitions[0].leader_epoch
        fetch = FetchRequest(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                 FetchRequest.FetchTopic.FetchPartition(
                                     partition=0, current_leader_epoch=epoch, fetch_offset=1, log_start_offset=-1,
                                     partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
        ask = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic=topic, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=epoch, leader_epoch=epoch)])])
        # As librdkafka sends them: a fetch waiting at the log end, the epoch check behind it;
        # then a record arrives, which the waiting fetch returns.
        for correlation_id, (request, version) in enumerate([(fetch, 11), (ask, 3), (produce_request(topic, 0), 7)]):
            wire.sock.sendall(encode_request(request, version, correlation_id=100 + correlation_id))
        fetched = read_response(wire.sock, ApiKey.Fetch, 11, 100).responses[0].partitions[0]
        end = read_response(wire.sock, ApiKey.OffsetForLeaderEpoch, 3, 101).topics[0].partitions[0]
        read_response(wire.sock, ApiKey.Produce, 7, 102)
    assert fetched.error_code == ErrorCode.NONE and fetched.records, fetched
    assert (end.error_code, end.leader_epoch) == (ErrorCode.NONE, epoch)
    assert end.end_offset >= 2, f"the fetch returned offset 1 before an epoch end of {end.end_offset} was answered"


def group_offsets(cluster, group):
    from confluent_kafka import ConsumerGroupTopicPartitions
    admin = cluster.admin()
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=10)[group].result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def commit_offsets(cluster, group, topic, partitions):
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 1) for p in range(partitions)], asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("deleted_by", ["DeleteTopics", "removing its znode"])
def test_a_deleted_topic_leaves_no_trace_in_groups_or_storage(cluster, deleted_by):
    create(cluster, "doomed", 6)
    create(cluster, "kept", 3)
    for topic, partitions in (("doomed", 6), ("kept", 3)):
        AckedProducer("confluent", cluster.bootstrap, topic, 300, per_second=5000).start().join()
        commit_offsets(cluster, "watchers", topic, partitions)
    assert {t for t, _ in group_offsets(cluster, "watchers")} == {"doomed", "kept"}
    if deleted_by == "DeleteTopics":
        admin = cluster.admin()
        admin.delete_topics(["doomed"])["doomed"].result(timeout=30)
    else:
        zk = KazooClient(hosts=cluster.metadata.removeprefix("zookeeper://"))
        zk.start(timeout=10)
        try:
            zk.delete("/topics/doomed")
        finally:
            zk.stop()
            zk.close()
    # Every answer comes at once (group_offsets times out otherwise); T goes from the group.
    wait_for(lambda: {t for t, _ in group_offsets(cluster, "watchers")} == {"kept"}, 30,
             "the group to forget the deleted topic's offsets")
    wait_for(lambda: "doomed" not in cluster.admin().list_topics(timeout=10).topics, 30, "the topic to vanish")
    # Its ledgers go from the shared store; the kept topic's stay.
    zk = KazooClient(hosts=cluster.metadata.removeprefix("zookeeper://"))
    zk.start(timeout=10)
    try:
        wait_for(lambda: len(zk.get_children("/managed-ledgers")) == 2, 30, "the deleted topic's ledger lists to go")
    finally:
        zk.stop()
        zk.close()
    # Created again, it starts empty.
    create(cluster, "doomed", 6)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
    try:
        deadline = time.monotonic() + 30
        assert [watermarks(consumer, TopicPartition("doomed", p), deadline) for p in range(6)] == [(0, 0)] * 6
    finally:
        consumer.close()


def ledger_ids(zk, topic_id: str) -> dict[int, list[int]]:
    out = {}
    for partition in zk.get_children(f"/managed-ledgers/{topic_id}"):
        data, _ = zk.get(f"/managed-ledgers/{topic_id}/{partition}")
        out[int(partition)] = [info["ledger_id"] for info in json.loads(data)["ledgers"]]
    return out


def test_a_fourth_broker_takes_a_quarter_of_the_partitions_without_copying_data(cluster):
    before = create(cluster, "growing")
    producer = AckedProducer("confluent", cluster.bootstrap, "growing", 6000, per_second=500).start()
    wait_for(lambda: len(producer.acked) > 500, 60, "acknowledgements before the join")
    zk = KazooClient(hosts=cluster.metadata.removeprefix("zookeeper://"))
    zk.start(timeout=10)
    try:
        topic_id = json.loads(zk.get("/topics/growing")[0])["id"].replace("-", "")
        chains_before = ledger_ids(zk, topic_id)
        stored_before = sum(os.path.getsize(os.path.join(cluster.storage, f)) for f in os.listdir(cluster.storage))
        cluster.start_broker(3)
        cluster.wait_live({0, 1, 2, 3})
        after = wait_for(lambda: (lambda leaders: leaders if list(leaders.values()).count(3) == 3 else None)(
            cluster.leaders("growing")), 60, "the new broker to lead its quarter of the partitions")
        moved = [p for p in before if after[p] != before[p]]
        # A quarter move to the new broker; the even spread may shift one or two more.
        assert 3 <= len(moved) <= 5, (before, after)
        producer.join()
        assert not producer.failed, producer.failed[:3]
        # Every moved partition still reads the ledgers it had: ownership moved, data did not.
        chains_after = ledger_ids(zk, topic_id)
        for p in moved:
            assert chains_before[p][0] in chains_after[p]
        stored_after = sum(os.path.getsize(os.path.join(cluster.storage, f)) for f in os.listdir(cluster.storage))
        assert stored_after - stored_before < 6000 * 200, "more bytes stored than the produced records explain"
    finally:
        zk.stop()
        zk.close()
    check_delivery(read_all(cluster.bootstrap, "growing", TOPIC_PARTITIONS), producer.acked)


def test_a_0_9_client_and_a_current_client_work_through_any_broker(cluster):
    from kafka import KafkaConsumer, KafkaProducer

    create(cluster, "generations", 6)
    for node_id, broker in cluster.brokers.items():
        old = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 9), acks="all", retries=10)
        for i in range(node_id * 100, node_id * 100 + 100):
            old.send("generations", key=R.key(i), value=R.value(i))
        old.flush(30)
        old.close()
    stored = read_all(cluster.brokers[1].bootstrap, "generations", 6)
    assert sorted(stored.values()) == sorted(R.key(i) for i in range(300))
    consumer = KafkaConsumer("generations", bootstrap_servers=cluster.brokers[2].bootstrap, api_version=(0, 9),
                             group_id="old-group", auto_offset_reset="earliest", consumer_timeout_ms=15_000)
    try:
        keys = set()
        deadline = time.monotonic() + 60
        while len(keys) < 300 and time.monotonic() < deadline:
            for message in consumer:
                keys.add(message.key)
                if len(keys) == 300:
                    break
        consumer.commit()
    finally:
        consumer.close()
    assert keys == {R.key(i) for i in range(300)}
    assert sum(group_offsets(cluster, "old-group").values()) == 300


def test_acls_made_through_one_broker_apply_on_every_broker(cluster_factory):
    """ACLs live in ZooKeeper: every broker re-reads them when any broker changes them.
    Without SASL every client is User:ANONYMOUS, who may do anything while no ACL names
    a resource (allow.everyone.if.no.acl.found) and may not once one denies it."""
    cluster = cluster_factory(size=2, **{"authorizer.class.name": "acl", "allow.everyone.if.no.acl.found": "true"})
    create(cluster, "locked", 4)
    first, second = (b.bootstrap for b in cluster.brokers.values())
    deny = AclBinding(ResourceType.TOPIC, "locked", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      AclOperation.WRITE, AclPermissionType.DENY)
    admin = cluster.admin(first)  # kept: a client destroyed early fails its pending futures
    for future in admin.create_acls([deny]).values():
        future.result(timeout=30)

    def listed_by(bootstrap):
        """DescribeAcls asked of one broker itself (an AdminClient may ask any broker)."""
        sock = connect(bootstrap)
        try:
            sock.sendall(encode_request(DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1), 2))
            return [(r.resource_name, a.operation) for r in read_response(sock, ApiKey.DescribeAcls, 2, 1).resources
                    for a in r.acls]
        finally:
            sock.close()
    for bootstrap in (first, second):
        wait_for(lambda: listed_by(bootstrap) == [("locked", AclOperation.WRITE.value)], 30,  # noqa: B023
                 f"broker {bootstrap} to list the ACL made through the first")
    producer = Producer({"bootstrap.servers": second, "message.timeout.ms": 10_000})
    errors = []
    for partition in range(4):  # partitions owned by either broker
        producer.produce("locked", b"v", partition=partition, on_delivery=lambda e, _m: errors.append(e and e.code()))
    producer.flush(30)
    assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 4


def test_a_broker_config_default_made_through_one_broker_applies_on_every_broker(cluster_factory):
    """Dynamic broker configs live in ZooKeeper: every broker re-reads them when any broker
    changes them. The cluster default of log.message.timestamp.type, set through the first
    broker, dates records appended by the second; a broker's own value stays its own."""
    cluster = cluster_factory(size=2)
    create(cluster, "dated", 4)
    (first_id, first), (second_id, second) = ((i, b.bootstrap) for i, b in cluster.brokers.items())
    IAC = IncrementalAlterConfigsRequest
    with Wire(first) as wire:
        answer = wire.call(IAC(resources=[IAC.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            IAC.AlterConfigsResource.AlterableConfig(name="log.message.timestamp.type", config_operation=0,
                                                     value="LogAppendTime")])], validate_only=False), 1)
        assert answer.responses[0].error_code == ErrorCode.NONE
        answer = wire.call(IAC(resources=[IAC.AlterConfigsResource(resource_type=4, resource_name=str(first_id),
                                                                   configs=[IAC.AlterConfigsResource.AlterableConfig(
                                                                       name="message.max.bytes", config_operation=0,
                                                                       value="2000000")])], validate_only=False), 1)
        assert answer.responses[0].error_code == ErrorCode.NONE

    def described(bootstrap, node_id, name):
        D = DescribeConfigsRequest
        with Wire(bootstrap) as wire:
            result = wire.call(D(resources=[D.DescribeConfigsResource(resource_type=4, resource_name=str(node_id),
                                                                      configuration_keys=[name])],
                                 include_synonyms=False, include_documentation=False), 4).results[0]
        return result.configs[0].value, result.configs[0].config_source
    wait_for(lambda: described(second, second_id, "log.message.timestamp.type") == ("LogAppendTime", 3), 30,
             "the second broker to apply the cluster default")
    assert described(second, second_id, "message.max.bytes") == ("1048588", 5)
    assert described(first, first_id, "message.max.bytes") == ("2000000", 2)
    producer = Producer({"bootstrap.servers": second})
    for partition in range(4):  # partitions owned by either broker
        producer.produce("dated", b"v", partition=partition, timestamp=1_700_000_000_000)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "dates", "enable.auto.commit": False})
    consumer.assign([TopicPartition("dated", partition, 0) for partition in range(4)])
    types = []
    deadline = time.monotonic() + 30
    while len(types) < 4 and time.monotonic() < deadline:
        types += [m.timestamp()[0] for m in consumer.consume(10, timeout=0.5) if m.error() is None]
    consumer.close()
    assert types == [TIMESTAMP_LOG_APPEND_TIME] * 4


def test_a_transaction_over_partitions_of_every_broker_commits_and_aborts_whole(cluster_factory):
    """The coordinator ends the transaction in partitions other brokers serve with WriteTxnMarkers."""
    cluster = cluster_factory(size=2, **{"transaction.state.log.num.partitions": 2,
                                         "offsets.topic.num.partitions": 2})
    leaders = create(cluster, "txn", 4)
    assert set(leaders.values()) == {0, 1}
    producer = transactional(cluster.bootstrap, "tx-cluster")
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for i in range(8):
            producer.produce("txn", value=f"{outcome}-{i}".encode(), partition=i % 4)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    assert sorted(read_to_end(cluster.bootstrap, "txn", 4, "read_committed")) == sorted(
        f"commit-{i}".encode() for i in range(8))
    assert len(read_to_end(cluster.bootstrap, "txn", 4, "read_uncommitted")) == 16
