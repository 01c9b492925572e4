"""What survives a broker stopping: a clean restart, and kill -9 under an acks=all producer."""
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest

from tests.support import records, wire
from tests.support.clients import ConfluentClient, create_topic
from tests.unit.record_batches import build_batch

PARTITIONS = 4


def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()
            if ConfigSource(entry.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG}



def test_restart_keeps_data_and_topic_configs(broker):
    configs = {"retention.ms": "86400000", "segment.bytes": "1048576", "max.message.bytes": "2097152"}
    create_topic(broker.bootstrap, "kept", PARTITIONS, configs)
    create_topic(broker.bootstrap, "empty", 2)
    # Small segments, so the data spans several ledgers per partition.
    ConfluentClient.produce(broker.bootstrap, "kept", 30_000, value_size=400)
    assert broker.stop() == 0, "SIGTERM should shut the broker down cleanly"

    broker.restart()
    assert _topic_configs(broker.bootstrap, "kept") == configs
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert {name: len(t.partitions) for name, t in metadata.topics.items()} == \
        {"kept": PARTITIONS, "empty": 2, "__consumer_offsets": 50}
    consumed = ConfluentClient.consume(broker.bootstrap, "kept", PARTITIONS, 30_000)
    records.check_read_back(consumed, 30_000, value_size=400)
    assert len(consumed) == 30_000


def test_kill_9_loses_no_acknowledged_record_and_producer_continues(broker):
    total, kill_after = 40_000, 10_000
    create_topic(broker.bootstrap, "crash", PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 120_000, "reconnect.backoff.ms": 50,
                         "reconnect.backoff.max.ms": 500})
    acked: dict[int, tuple[int, int]] = {}
    failures = []

    def delivered(err, message):
        if err is None:
            acked[records.index_of_key(message.key())] = (message.partition(), message.offset())
        else:
            failures.append(err)

    acked_at_kill = None
    deadline = time.monotonic() + 180
    for i in range(total):
        while True:
            try:
                producer.produce("crash", key=records.key(i), value=records.value(i), headers=records.headers(i),
                                 timestamp=records.timestamp(i), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        # Keep a bounded window in flight, so the kill lands mid-stream, not after it.
        while len(acked) + len(failures) < i - 3_000:
            producer.poll(0.05)
            assert time.monotonic() < deadline, "producing took too long"
        producer.poll(0)
        if acked_at_kill is None and len(acked) >= kill_after:
            broker.kill()
            acked_at_kill = len(acked)
            broker.restart()
        assert time.monotonic() < deadline, "producing took too long"
    assert producer.flush(120) == 0, "records still undelivered after the restart"
    assert acked_at_kill is not None and acked_at_kill < total, "the kill did not happen mid-run"
    assert not failures, f"{len(failures)} deliveries failed, first: {failures[0]}"

    consumed = ConfluentClient.consume(broker.bootstrap, "crash", PARTITIONS, total)
    at = {(r.partition, r.offset): records.index_of(r) for r in consumed}
    assert len(at) == len(consumed), "an offset was returned twice"
    for i, position in acked.items():
        assert at.get(position) == i, f"record {i} acknowledged at {position} but read back as {at.get(position)}"
    # Idempotence carried across the crash: nothing stored twice, nothing missing.
    records.check_read_back(consumed, total)


def test_acks_1_is_answered_once_stored_whatever_its_timeout(broker):
    """Kafka applies a produce's timeout to acks=all's replication only: an acks=1 request is
    answered when appended (here: durable) even past its timeout, or a client retrying on
    REQUEST_TIMED_OUT stores its records twice (kafka-node's default ackTimeoutMs is 100 ms)."""
    count = 300
    create_topic(broker.bootstrap, "acks-1", 1)
    sock = wire.connect(broker.bootstrap)
    try:
        frames = b"".join(wire.encode_request(ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1, topic_data=[ProduceRequest.TopicProduceData(
                name="acks-1", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=build_batch([b"%d" % n]))])]), 8, n) for n in range(count))
        sock.sendall(frames)  # pipelined: the later ones wait for group commits well past 1 ms
        answers = [wire.read_response(sock, ApiKey.Produce, 8, n).responses[0].partition_responses[0]
                   for n in range(count)]
    finally:
        sock.close()
    assert [a.error_code for a in answers] == [0] * count
    assert [a.base_offset for a in answers] == list(range(count))
