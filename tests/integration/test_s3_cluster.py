"""Brokers on object storage (a real SeaweedFS) with the S3 WAL: no shared filesystem, each
broker with a data directory of its own, driven by real clients through kill -9 and SIGSTOP."""
import signal
import uuid

import pytest
from kafka.protocol.api_key import ApiKey

from kgate.protocol.error_codes import ErrorCode
from tests.integration.test_cluster import produce_request
from tests.support import records as R
from tests.support.clients import ConfluentClient, create_topic
from tests.support.cluster import SESSION_TIMEOUT_MS, AckedProducer, KgateCluster, check_delivery, read_all
from tests.support.member_process import wait_for
from tests.support.ports import free_ports
from tests.support.scrape import scrape, value
from tests.support.wire import Wire, encode_request, read_response
from tests.support.zookeeper import ZooKeeperServer

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("s3_cluster")]
PARTITIONS = 4


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), free_ports(1)[0]).start().wait_serving()
    yield server
    server.stop()


@pytest.fixture
def cluster(tmp_path, zookeeper, bucket_url):
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/{uuid.uuid4().hex}", size=2, storage=bucket_url,
                           **{"offsets.topic.num.partitions": 2, "kgate.s3.wal.commit.interval.ms": 50})
    yield cluster.start()
    cluster.stop()


def test_one_broker_on_s3_produces_and_consumes_and_restarts_from_objects(broker_factory, bucket_url):
    broker = broker_factory(**{"kgate.storage": bucket_url, "kgate.metrics.listener": "127.0.0.1:0"})
    create_topic(broker.bootstrap, "on-s3", 2)
    ConfluentClient.produce(broker.bootstrap, "on-s3", 500, value_size=300)
    assert sorted(c.key for c in ConfluentClient.consume(broker.bootstrap, "on-s3", 2, 500)) == \
        sorted(R.key(i) for i in range(500))
    samples = scrape(broker.metrics_url)
    wal_objects = value(samples, "kgate_wal_objects_total")
    assert 0 < wal_objects <= value(samples, "kgate_object_requests_total", kind="put")
    # Every plain PUT is timed (conditional creates are not on the acknowledgement path).
    assert wal_objects <= value(samples, "kgate_object_put_seconds_count") <= \
        value(samples, "kgate_object_requests_total", kind="put")
    assert value(samples, "kgate_wal_object_bytes_total") > 500 * 300
    # The consumer read what this broker had just written: from memory, with no GET.
    assert value(samples, "kgate_object_cache_hit_ratio") == 1.0
    assert broker.stop() == 0, "SIGTERM should shut a broker on S3 down cleanly"
    again = broker_factory(**{"kgate.storage": bucket_url, "kgate.metrics.listener": "127.0.0.1:0"})
    # Opening its partitions rebuilt their offsets and producer state from the index heads,
    # without fetching the 150 KB of records.
    assert value(scrape(again.metrics_url), "kgate_object_bytes_total", kind="get") < 500 * 300 / 10
    assert sorted(c.key for c in ConfluentClient.consume(again.bootstrap, "on-s3", 2, 500)) == \
        sorted(R.key(i) for i in range(500))


def test_kill_9_of_the_owner_loses_no_acknowledged_record_and_the_other_broker_serves_from_objects(cluster):
    create_topic(cluster.bootstrap, "failover", PARTITIONS)
    leaders = cluster.wait_leaders("failover", PARTITIONS, {0, 1})
    victim = leaders[0]
    producer = AckedProducer("confluent", cluster.bootstrap, "failover", 4000, per_second=800,
                             **{"enable.idempotence": True}).start()
    wait_for(lambda: len(producer.acked) > 800, 60, "acknowledgements before the kill")
    cluster.brokers[victim].kill()
    survivor = 1 - victim
    # Its data directory is its own: everything the survivor serves comes from metadata and objects.
    cluster.wait_leaders("failover", PARTITIONS, {survivor}, timeout=SESSION_TIMEOUT_MS / 1000 + 5)
    producer.join()
    assert not producer.failed, producer.failed[:3]
    assert len(producer.acked) == 4000
    check_delivery(read_all(cluster.brokers[survivor].bootstrap, "failover", PARTITIONS), producer.acked)


def test_a_paused_broker_cannot_add_data_after_it_resumes(cluster):
    create_topic(cluster.bootstrap, "paused", PARTITIONS)
    leaders = cluster.wait_leaders("paused", PARTITIONS, {0, 1})
    victim = leaders[0]
    lost = [p for p, leader in leaders.items() if leader == victim]
    producer = AckedProducer("confluent", cluster.bootstrap, "paused", 3000, per_second=600,
                             **{"enable.idempotence": True}).start()
    wait_for(lambda: len(producer.acked) > 600, 60, "acknowledgements before the pause")
    late = Wire(cluster.brokers[victim].bootstrap)
    process = cluster.brokers[victim].process
    process.send_signal(signal.SIGSTOP)
    try:
        cluster.wait_leaders("paused", PARTITIONS, {1 - victim}, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        # Handled the moment it resumes, before it learns its session is gone: only the
        # writer lease stops the WAL object it then writes from being acknowledged.
        late.sock.sendall(encode_request(produce_request("paused", lost[0]), 7, correlation_id=1))
    finally:
        process.send_signal(signal.SIGCONT)
    answer = read_response(late.sock, ApiKey.Produce, 7, 1).responses[0].partition_responses[0]
    late.close()
    assert answer.error_code == ErrorCode.NOT_LEADER_FOR_PARTITION, answer
    producer.join()
    assert not producer.failed, producer.failed[:3]
    stored = read_all(cluster.brokers[1 - victim].bootstrap, "paused", PARTITIONS)
    check_delivery(stored, producer.acked)
    # Idempotent, so exactly what was sent: one more would be the paused broker's late record.
    assert len(stored) == 3000


def test_with_local_wals_a_killed_owners_partitions_wait_for_its_restart_and_lose_nothing(
        tmp_path, zookeeper, bucket_url):
    # A commit interval past the test's length: acknowledged entries stay in the local WALs.
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/{uuid.uuid4().hex}", size=2, storage=bucket_url,
                           **{"offsets.topic.num.partitions": 2, "kgate.s3.wal.commit.interval.ms": 600_000})
    try:
        for node_id in (0, 1):
            cluster.start_broker(node_id, **{"kgate.wal": f"file:{tmp_path}/wal-{node_id}"})
        cluster.wait_live({0, 1})
        create_topic(cluster.bootstrap, "local-wal", PARTITIONS)
        leaders = cluster.wait_leaders("local-wal", PARTITIONS, {0, 1})
        victim, survivor = leaders[0], 1 - leaders[0]
        producer = AckedProducer("confluent", cluster.bootstrap, "local-wal", 2000, per_second=400,
                                 **{"enable.idempotence": True}).start()
        wait_for(lambda: len(producer.acked) > 400, 60, "acknowledgements before the kill")
        cluster.brokers[victim].kill()
        # The survivor takes the partition over but refuses to serve it short of what only the
        # victim's WAL holds: KAFKA_STORAGE_ERROR (retriable), not a truncated log.
        wire = Wire(cluster.brokers[survivor].bootstrap)

        def refused():
            wire.sock.sendall(encode_request(produce_request("local-wal", 0), 7, correlation_id=1))
            answer = read_response(wire.sock, ApiKey.Produce, 7, 1).responses[0].partition_responses[0]
            assert answer.error_code in (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR), answer
            return answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        wait_for(refused, SESSION_TIMEOUT_MS / 1000 + 15, "the survivor to hold the partition and refuse it")
        wire.close()
        cluster.brokers[victim].restart(timeout=60)  # its WAL goes up; the partition is served again
        producer.join()
        assert not producer.failed, producer.failed[:3]
        assert len(producer.acked) == 2000
        stored = read_all(cluster.bootstrap, "local-wal", PARTITIONS)
        check_delivery(stored, producer.acked)
        assert len(stored) == 2000
    finally:
        cluster.stop()
