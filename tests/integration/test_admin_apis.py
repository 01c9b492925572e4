"""Partition and log administration: CreatePartitions, DeleteRecords, DescribeCluster,
OffsetForLeaderEpoch, DescribeLogDirs and DescribeProducers.

Each API is driven by the admin clients that offer it (confluent-kafka's AdminClient,
kafka-python's KafkaAdminClient) and at every version over a raw connection, and its
effect is checked through the protocol: Metadata, produce and consume, ListOffsets,
Fetch, and a restart on the same data directory.
"""
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, OffsetSpec
from kafka import KafkaAdminClient
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    DeleteRecordsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import TopicPartition as KTopicPartition

from kgate.protocol.api_versions import SUPPORTED
from kgate.protocol.error_codes import ErrorCode
from tests.support import records
from tests.support.clients import create_topic
from tests.support.transactions import transactional
from tests.support.wire import Wire

CP = CreatePartitionsRequest.CreatePartitionsTopic
DR = DeleteRecordsRequest.DeleteRecordsTopic
LD = DescribeLogDirsRequest.DescribableLogDirTopic
OE = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
FT = FetchRequest.FetchTopic
LO = ListOffsetsRequest.ListOffsetsTopic
EARLIEST = -2
NODE_ID = 0


def versions(api_key):
    low, high = SUPPORTED[api_key.API_KEY]
    return range(low, high + 1)


def kafka_python_admin(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)


def error_of(future) -> int:
    try:
        future.result(timeout=30)
        return ErrorCode.NONE
    except KafkaException as exc:
        return exc.args[0].code()


def produce_batches(bootstrap, topic, partition, batches, per_batch, value_size=100, **config):
    """``batches`` separate produces of ``per_batch`` records each: one stored entry apiece."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", **config})
    failures = []

    def delivered(err, _message):
        if err is not None:
            failures.append(err)

    for b in range(batches):
        for i in range(b * per_batch, (b + 1) * per_batch):
            producer.produce(topic, key=records.key(i), value=records.value(i, value_size), partition=partition,
                             timestamp=records.timestamp(i), on_delivery=delivered)
        assert producer.flush(30) == 0, "records undelivered"
    assert not failures, f"delivery failed: {failures[0]}"


def consume_from(bootstrap, topic, partition, offset, count, timeout=30, **config):
    """Up to ``count`` (offset, key) pairs read from ``offset`` with auto.offset.reset=earliest."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "admin-apis", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **config})
    consumer.assign([TopicPartition(topic, partition, offset)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(out), timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                out.append((message.offset(), message.key()))
    finally:
        consumer.close()
    return out


def partition_counts(wire, *topics) -> dict[str, int]:
    response = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                         allow_auto_topic_creation=False), 9)
    return {t.name: len(t.partitions) for t in response.topics if t.error_code == ErrorCode.NONE}


def create_partitions(wire, version, *topics, validate_only=False):
    """``topics``: (name, count) or (name, count, assignments); the error code per result, in order."""
    request = CreatePartitionsRequest(topics=[CP(name=t[0], count=t[1], assignments=(
        [CP.CreatePartitionsAssignment(broker_ids=ids) for ids in t[2]] if len(t) > 2 else None)) for t in topics],
        timeout_ms=10_000, validate_only=validate_only)
    return [(r.name, r.error_code) for r in wire.call(request, version).results]


def delete_records(wire, version, topic, partition, offset):
    request = DeleteRecordsRequest(topics=[DR(name=topic, partitions=[
        DR.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=10_000)
    result = wire.call(request, version).topics[0].partitions[0]
    return result.error_code, result.low_watermark


def earliest(wire, topic, partition, version=7):
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LO(name=topic, partitions=[
        LO.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=EARLIEST,
                                max_num_offsets=1)])])
    return wire.call(request, version).topics[0].partitions[0].offset


def fetch(wire, topic, partition, offset, version=11):
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                               partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return wire.call(request, version).responses[0].partitions[0]


def log_dir_sizes(wire, version, topics=None) -> dict[tuple[str, int], int]:
    request = DescribeLogDirsRequest(topics=None if topics is None else [
        LD(topic=name, partitions=list(indexes)) for name, indexes in topics.items()])
    response = wire.call(request, version)
    assert len(response.results) == 1 and response.results[0].error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): p.partition_size
            for t in response.results[0].topics for p in t.partitions}


# -- CreatePartitions ---------------------------------------------------------------------


def test_create_partitions_with_both_admin_clients_is_seen_at_once(broker):
    create_topic(broker.bootstrap, "grow", 2)
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert error_of(confluent.create_partitions([NewPartitions("grow", 4)])["grow"]) == ErrorCode.NONE
    with Wire(broker.bootstrap) as wire:
        assert partition_counts(wire, "grow") == {"grow": 4}

        # validate_only changes nothing; refusals come back with Kafka's codes.
        assert error_of(confluent.create_partitions([NewPartitions("grow", 9)], validate_only=True)["grow"]) == \
            ErrorCode.NONE
        assert error_of(confluent.create_partitions([NewPartitions("grow", 4)])["grow"]) == \
            ErrorCode.INVALID_PARTITIONS
        assert error_of(confluent.create_partitions([NewPartitions("absent", 4)])["absent"]) == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert partition_counts(wire, "grow") == {"grow": 4}

        admin = kafka_python_admin(broker)
        try:
            admin.create_partitions({"grow": 5})
            admin.create_partitions({"grow": {"count": 7, "assignments": [[NODE_ID], [NODE_ID]]}})
        finally:
            admin.close()
        assert partition_counts(wire, "grow") == {"grow": 7}

    # Producing to, consuming from and committing offsets for the new partitions all work.
    produce_batches(broker.bootstrap, "grow", 6, 1, 3)
    produce_batches(broker.bootstrap, "grow", 3, 1, 2)
    assert consume_from(broker.bootstrap, "grow", 6, 0, 3) == [(i, records.key(i)) for i in range(3)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "grown", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("grow", 6, 3)], asynchronous=False)
        assert [tp.offset for tp in consumer.committed([TopicPartition("grow", 6)], timeout=30)] == [3]
    finally:
        consumer.close()


def test_create_partitions_every_version_and_every_refusal(broker):
    create_topic(broker.bootstrap, "widen", 1)
    create_topic(broker.bootstrap, "other", 1)
    with Wire(broker.bootstrap) as wire:
        for count, version in enumerate(versions(CreatePartitionsRequest), start=2):
            assert create_partitions(wire, version, ("widen", count)) == [("widen", ErrorCode.NONE)], f"v{version}"
            assert partition_counts(wire, "widen") == {"widen": count}
        count = partition_counts(wire, "widen")["widen"]
        refusals = [
            (("widen", count), ErrorCode.INVALID_PARTITIONS),
            (("widen", count - 1), ErrorCode.INVALID_PARTITIONS),
            (("widen", count + 2, [[NODE_ID]]), ErrorCode.INVALID_REPLICATION_ASSIGNMENT),   # one list short
            (("widen", count + 1, [[]]), ErrorCode.INVALID_REPLICATION_ASSIGNMENT),          # empty replica list
            (("widen", count + 1, [[NODE_ID + 7]]), ErrorCode.INVALID_REPLICATION_ASSIGNMENT),  # no such broker
            (("widen", count + 1, [[NODE_ID, NODE_ID]]), ErrorCode.INVALID_REPLICATION_ASSIGNMENT),
            (("widen", count + 10_001), ErrorCode.POLICY_VIOLATION),
            (("__consumer_offsets", 60), ErrorCode.POLICY_VIOLATION),
            (("absent", 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        for version in versions(CreatePartitionsRequest):
            for topic, error in refusals:
                assert create_partitions(wire, version, topic) == [(topic[0], error)], f"v{version} {topic}"
            # A topic named twice is refused once and neither entry applies; others in the request do.
            assert sorted(create_partitions(wire, version, ("widen", count + 1), ("other", version + 2),
                                            ("widen", count + 2))) == \
                [("other", ErrorCode.NONE), ("widen", ErrorCode.INVALID_REQUEST)]
            assert create_partitions(wire, version, ("widen", count + 5), validate_only=True) == \
                [("widen", ErrorCode.NONE)]
            assert partition_counts(wire, "widen", "other", "__consumer_offsets") == \
                {"widen": count, "other": version + 2, "__consumer_offsets": 50}
        assert create_partitions(wire, 3, ("widen", count + 1, [[NODE_ID]])) == [("widen", ErrorCode.NONE)]
        assert partition_counts(wire, "widen") == {"widen": count + 1}


def test_grown_partitions_survive_a_restart(broker):
    create_topic(broker.bootstrap, "kept", 1, {"retention.ms": "86400000"})
    with Wire(broker.bootstrap) as wire:
        assert create_partitions(wire, 3, ("kept", 3)) == [("kept", ErrorCode.NONE)]
    produce_batches(broker.bootstrap, "kept", 2, 2, 5)
    broker.stop()
    broker.restart()
    with Wire(broker.bootstrap) as wire:
        assert partition_counts(wire, "kept") == {"kept": 3}
    assert consume_from(broker.bootstrap, "kept", 2, 0, 10) == [(i, records.key(i)) for i in range(10)]
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).topics["kept"]
    assert sorted(listed.partitions) == [0, 1, 2]


# -- DeleteRecords, ListOffsets, Fetch, DescribeLogDirs -----------------------------------


def test_delete_records_trims_ledgers_moves_the_start_and_survives_a_restart(broker):
    # Each produce is one ~2 KB entry; a ledger rolls over once it passes 4 KB.
    create_topic(broker.bootstrap, "trim", 1, {"segment.bytes": "4096", "retention.ms": "-1"})
    with Wire(broker.bootstrap) as wire:
        empty = log_dir_sizes(wire, 4, {"trim": [0]})
        assert empty == {("trim", 0): 0}
        produce_batches(broker.bootstrap, "trim", 0, 20, 20)          # offsets 0..399
        full = log_dir_sizes(wire, 4, {"trim": [0]})[("trim", 0)]
        assert full > 20 * 20 * 100, "the partition's size counts every produced byte"

        confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
        deleted = confluent.delete_records([TopicPartition("trim", 0, 200)])
        assert next(iter(deleted.values())).result(timeout=30).low_watermark == 200
        trimmed = log_dir_sizes(wire, 4, {"trim": [0]})[("trim", 0)]
        assert trimmed < full, "ledgers wholly below the new start are dropped"

        listed = confluent.list_offsets({TopicPartition("trim", 0): OffsetSpec.earliest()})
        assert next(iter(listed.values())).result(timeout=30).offset == 200
        assert earliest(wire, "trim", 0) == 200
        for version in (5, 11):
            below = fetch(wire, "trim", 0, 0, version)  # offsets -1 with the error, as Kafka answers
            assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1), f"v{version}"
            at = fetch(wire, "trim", 0, 200, version)
            assert at.error_code == ErrorCode.NONE and at.records and at.log_start_offset == 200
        # A consumer at offset 0 is out of range and resets to the new start.
        assert consume_from(broker.bootstrap, "trim", 0, 0, 1) == [(200, records.key(200))]

        admin = kafka_python_admin(broker)
        try:
            result = admin.delete_records({KTopicPartition("trim", 0): 310})
            assert result[KTopicPartition("trim", 0)]["low_watermark"] == 310
        finally:
            admin.close()
        assert log_dir_sizes(wire, 4, {"trim": [0]})[("trim", 0)] < trimmed

    broker.stop()
    broker.restart()
    with Wire(broker.bootstrap) as wire:
        assert earliest(wire, "trim", 0) == 310
        assert fetch(wire, "trim", 0, 309).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert consume_from(broker.bootstrap, "trim", 0, 0, 90) == [(i, records.key(i)) for i in range(310, 400)]

    # -1 deletes up to the high watermark; producing continues from there.
    with Wire(broker.bootstrap) as wire:
        assert delete_records(wire, 2, "trim", 0, -1) == (ErrorCode.NONE, 400)
        assert earliest(wire, "trim", 0) == 400
    produce_batches(broker.bootstrap, "trim", 0, 1, 1)
    assert consume_from(broker.bootstrap, "trim", 0, 0, 1) == [(400, records.key(0))]


def test_offsets_by_time_never_answer_below_the_log_start(broker):
    """A start moved into the middle of a batch used to leave its earlier records findable by time."""
    create_topic(broker.bootstrap, "timed", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200})
    for i in range(10):  # one batch: offsets 0..9 at times 1000..1009
        producer.produce("timed", value=b"%d" % i, partition=0, timestamp=1_000 + i)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert next(iter(admin.delete_records([TopicPartition("timed", 0, 5)]).values())).result(30).low_watermark == 5

    def offset_for(spec):
        return next(iter(admin.list_offsets({TopicPartition("timed", 0): spec}).values())).result(30).offset

    assert offset_for(OffsetSpec.for_timestamp(1_002)) == 5
    assert offset_for(OffsetSpec.for_timestamp(1_007)) == 7
    assert offset_for(OffsetSpec.max_timestamp()) == 9


def test_delete_records_every_version_and_every_refusal(broker):
    create_topic(broker.bootstrap, "cut", 1)
    create_topic(broker.bootstrap, "compacted", 1, {"cleanup.policy": "compact"})
    produce_batches(broker.bootstrap, "cut", 0, 3, 10)          # offsets 0..29
    with Wire(broker.bootstrap) as wire:
        for start, version in zip((5, 10, 15), versions(DeleteRecordsRequest)):
            assert delete_records(wire, version, "cut", 0, start) == (ErrorCode.NONE, start), f"v{version}"
            # At or below the start changes nothing and answers the start.
            assert delete_records(wire, version, "cut", 0, start - 3) == (ErrorCode.NONE, start)
            assert delete_records(wire, version, "cut", 0, 31) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
            assert delete_records(wire, version, "cut", 0, -2) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
            assert delete_records(wire, version, "cut", 1, 0) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
            assert delete_records(wire, version, "absent", 0, 0) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
            assert delete_records(wire, version, "__consumer_offsets", 0, 0) == (ErrorCode.INVALID_TOPIC, -1)
            assert delete_records(wire, version, "compacted", 0, 0) == (ErrorCode.POLICY_VIOLATION, -1)
            assert earliest(wire, "cut", 0) == start
        assert delete_records(wire, 0, "cut", 0, 30) == (ErrorCode.NONE, 30)


def test_describe_log_dirs_every_version(broker):
    create_topic(broker.bootstrap, "sized", 2)
    produce_batches(broker.bootstrap, "sized", 1, 2, 5)
    with Wire(broker.bootstrap) as wire:
        for version in versions(DescribeLogDirsRequest):
            everything = log_dir_sizes(wire, version)
            assert everything[("sized", 0)] == 0 and everything[("sized", 1)] > 10 * 100, f"v{version}"
            assert ("__consumer_offsets", 49) in everything
            # Requested partitions and topics the broker lacks are left out.
            assert log_dir_sizes(wire, version, {"sized": [1, 5], "absent": [0]}) == \
                {("sized", 1): everything[("sized", 1)]}
            response = wire.call(DescribeLogDirsRequest(topics=[LD(topic="sized", partitions=[0])]), version)
            (result,) = response.results
            assert result.log_dir and result.topics[0].partitions[0].offset_lag == 0
            assert not result.topics[0].partitions[0].is_future_key
            if version >= 4:
                assert result.total_bytes >= result.usable_bytes > 0

    admin = kafka_python_admin(broker)
    try:
        (described,) = admin.describe_log_dirs({"sized": [0, 1]})
    finally:
        admin.close()
    assert described["broker"] == NODE_ID
    (log_dir,) = described["log_dirs"]
    sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes == {0: 0, 1: everything[("sized", 1)]}


# -- DescribeCluster ------------------------------------------------------------------------


def test_describe_cluster_every_version_and_both_admin_clients(broker):
    with Wire(broker.bootstrap) as wire:
        cluster_id = wire.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9).cluster_id
        for version in versions(DescribeClusterRequest):
            response = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                        endpoint_type=1), version)
            assert (response.error_code, response.cluster_id, response.controller_id) == \
                (ErrorCode.NONE, cluster_id, NODE_ID), f"v{version}"
            assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == \
                [(NODE_ID, "127.0.0.1", broker.port, None)]
        controllers = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                       endpoint_type=2), 1)
        assert (controllers.error_code, controllers.brokers) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, [])
        unknown = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=3), 1)
        assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = confluent.describe_cluster().result(timeout=30)
    assert described.cluster_id == cluster_id and described.controller.id == NODE_ID
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(NODE_ID, "127.0.0.1", broker.port)]
    admin = kafka_python_admin(broker)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert described["cluster_id"] == cluster_id and described["controller_id"] == NODE_ID
    assert [(b["broker_id"], b["port"]) for b in described["brokers"]] == [(NODE_ID, broker.port)]


# -- OffsetForLeaderEpoch ------------------------------------------------------------------


def epoch_end(wire, version, topic, partition, leader_epoch, current_leader_epoch=-1):
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OE(topic=topic, partitions=[
        OE.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                                    leader_epoch=leader_epoch)])])
    result = wire.call(request, version).topics[0].partitions[0]
    return result.error_code, result.leader_epoch if version >= 1 else None, result.end_offset


def test_offset_for_leader_epoch_every_version(broker):
    create_topic(broker.bootstrap, "epochs", 1)
    produce_batches(broker.bootstrap, "epochs", 0, 2, 6)             # offsets 0..11, all in epoch 0
    with Wire(broker.bootstrap) as wire:
        assert delete_records(wire, 2, "epochs", 0, 4) == (ErrorCode.NONE, 4)
        for version in versions(OffsetForLeaderEpochRequest):
            epoch = (lambda e: e) if version >= 1 else (lambda e: None)
            assert epoch_end(wire, version, "epochs", 0, 0) == (ErrorCode.NONE, epoch(0), 12), f"v{version}"
            assert epoch_end(wire, version, "epochs", 0, 1) == (ErrorCode.NONE, epoch(-1), -1)
            assert epoch_end(wire, version, "epochs", 0, -1) == (ErrorCode.NONE, epoch(-1), -1)
            # An epoch older than any the log has: the start of the first epoch after it.
            assert epoch_end(wire, version, "epochs", 0, -3) == (ErrorCode.NONE, epoch(-3), 4)
            assert epoch_end(wire, version, "epochs", 1, 0) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, epoch(-1), -1)
            assert epoch_end(wire, version, "absent", 0, 0) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, epoch(-1), -1)
            if version >= 2:
                assert epoch_end(wire, version, "epochs", 0, 0, current_leader_epoch=0) == (ErrorCode.NONE, 0, 12)
                assert epoch_end(wire, version, "epochs", 0, 0, current_leader_epoch=1) == \
                    (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)
                assert epoch_end(wire, version, "epochs", 0, 0, current_leader_epoch=-2) == \
                    (ErrorCode.FENCED_LEADER_EPOCH, -1, -1)
        produce_batches(broker.bootstrap, "epochs", 0, 1, 3)
        assert epoch_end(wire, 4, "epochs", 0, 0) == (ErrorCode.NONE, 0, 15)


# -- DescribeProducers -----------------------------------------------------------------------


def describe_producers(wire, topic, *partitions):
    request = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
        name=topic, partition_indexes=list(partitions))])
    return {p.partition_index: (p.error_code, [(s.producer_epoch, s.last_sequence, s.last_timestamp,
                                                s.coordinator_epoch, s.current_txn_start_offset)
                                               for s in p.active_producers])
            for p in wire.call(request, 0).topics[0].partitions}


def test_describe_producers_shows_an_idempotent_producer(broker):
    create_topic(broker.bootstrap, "idem", 2)
    with Wire(broker.bootstrap) as wire:
        assert describe_producers(wire, "idem", 0) == {0: (ErrorCode.NONE, [])}
        produce_batches(broker.bootstrap, "idem", 0, 3, 4, **{"enable.idempotence": True})   # sequences 0..11
        produce_batches(broker.bootstrap, "idem", 1, 1, 2)                                      # not idempotent
        assert describe_producers(wire, "idem", 0, 1, 2) == {
            0: (ErrorCode.NONE, [(0, 11, records.timestamp(11), -1, -1)]),
            1: (ErrorCode.NONE, []),
            2: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        }

    admin = kafka_python_admin(broker)
    try:
        described = admin.describe_producers([KTopicPartition("idem", 0)])
    finally:
        admin.close()
    (producer,) = described[KTopicPartition("idem", 0)].active_producers
    assert (producer.producer_epoch, producer.last_sequence, producer.last_timestamp) == \
        (0, 11, records.timestamp(11))
    assert producer.producer_id >= 0

    # The state is rebuilt from the log on start.
    broker.stop()
    broker.restart()
    with Wire(broker.bootstrap) as wire:
        assert describe_producers(wire, "idem", 0) == {0: (ErrorCode.NONE, [(0, 11, records.timestamp(11), -1, -1)])}


def test_describe_producers_shows_where_an_open_transaction_starts(broker):
    """What kafka-transactions abort and find-hanging look for: the first offset of the
    producer's open transaction, -1 once it has ended."""
    create_topic(broker.bootstrap, "open-txn", 1)
    produce_batches(broker.bootstrap, "open-txn", 0, 1, 2)  # offsets 0 and 1, no transaction
    producer = transactional(broker.bootstrap, "open-txn")
    producer.begin_transaction()
    producer.produce("open-txn", value=b"pending", partition=0)
    assert producer.flush(30) == 0
    with Wire(broker.bootstrap) as wire:
        (state,) = describe_producers(wire, "open-txn", 0)[0][1]
        assert state[4] == 2
        producer.abort_transaction(30)
        (state,) = describe_producers(wire, "open-txn", 0)[0][1]
        assert state[4] == -1


def test_api_versions_advertise_the_admin_apis(broker):
    from kafka.protocol.metadata import ApiVersionsRequest

    with Wire(broker.bootstrap) as wire:
        response = wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    for request, bounds in [(CreatePartitionsRequest, (0, 3)), (DeleteRecordsRequest, (0, 2)),
                            (DescribeClusterRequest, (0, 1)), (OffsetForLeaderEpochRequest, (0, 4)),
                            (DescribeLogDirsRequest, (0, 4)), (DescribeProducersRequest, (0, 0))]:
        assert advertised[request.API_KEY] == bounds, request.__name__
