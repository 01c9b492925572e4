"""Incremental fetch sessions (KIP-227) on the wire, and with kafka-python 3, which uses them.

librdkafka (confluent-kafka 2.16) never opens a fetch session: it sends every fetch
with epoch -1, so the real client here is kafka-python's consumer.
"""
from confluent_kafka import Producer
from kafka.protocol.consumer import FetchRequest

from kgate.protocol.error_codes import ErrorCode
from tests.support import records
from tests.support.clients import KafkaPythonClient, create_topic
from tests.support.scrape import scrape, value
from tests.support.wire import Wire

TOPIC = "sessions"
VERSION = 12  # by topic name; the session rules are the same by topic id from v13
FT = FetchRequest.FetchTopic
FORGET = FetchRequest.ForgottenTopic


def produce(bootstrap: str, partition: int, count: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def fetch(wire, session_id, epoch, offsets: dict[int, int], forget=()):
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
        session_epoch=epoch, topics=[FT(topic=TOPIC, partitions=[FT.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1, last_fetched_epoch=-1,
            partition_max_bytes=1 << 20) for p, offset in offsets.items()])] if offsets else [],
        forgotten_topics_data=[FORGET(topic=TOPIC, partitions=list(forget))] if forget else [], rack_id="")
    return wire.call(request, VERSION)


def answered(response) -> dict[int, tuple[int, bool]]:
    """``{partition: (high watermark, carries records)}`` of a fetch answer."""
    return {p.partition_index: (p.high_watermark, bool(p.records)) for t in response.responses for p in t.partitions}


def test_a_session_answers_only_what_changed_and_checks_ids_and_epochs(broker):
    create_topic(broker.bootstrap, TOPIC, 3)
    produce(broker.bootstrap, 0)
    with Wire(broker.bootstrap) as wire:
        full = fetch(wire, 0, 0, {0: 0, 1: 0, 2: 0})
        session = full.session_id
        assert full.error_code == ErrorCode.NONE and session != 0
        assert answered(full) == {0: (1, True), 1: (0, False), 2: (0, False)}

        # Partition 0 moves on; nothing else changed, so the answer is empty.
        nothing = fetch(wire, session, 1, {0: 1})
        assert (nothing.error_code, nothing.session_id, answered(nothing)) == (ErrorCode.NONE, session, {})
        produce(broker.bootstrap, 2, count=2)
        news = fetch(wire, session, 2, {})
        assert answered(news) == {2: (2, True)}, "a partition not named in the request is read from the session"

        stale = fetch(wire, session, 2, {})
        assert (stale.error_code, stale.session_id, answered(stale)) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, {})
        unknown = fetch(wire, session + 1, 1, {})
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # Forgotten partitions leave the session; forgetting the last closes it (a sessionless answer).
        produce(broker.bootstrap, 1)
        assert answered(fetch(wire, session, 3, {2: 2}, forget=[1])) == {}
        closed = fetch(wire, session, 4, {}, forget=[0, 2])
        assert (closed.error_code, closed.session_id) == (ErrorCode.NONE, 0)
        assert fetch(wire, session, 5, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # A full fetch with epoch -1 closes the session it names and opens none.
        again = fetch(wire, 0, 0, {1: 0}).session_id
        final = fetch(wire, again, -1, {1: 0})
        assert (final.session_id, answered(final)) == (0, {1: (1, True)})
        assert fetch(wire, again, 1, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_no_session_slots_means_full_fetches_only(broker_factory):
    broker = broker_factory(**{"max.incremental.fetch.session.cache.slots": 0})
    create_topic(broker.bootstrap, TOPIC, 1)
    with Wire(broker.bootstrap) as wire:
        full = fetch(wire, 0, 0, {0: 0})
        assert (full.error_code, full.session_id, answered(full)) == (ErrorCode.NONE, 0, {0: (0, False)})


def test_kafka_python_consumes_through_a_session(broker_factory):
    """kafka-python 3 opens a session and fetches incrementally; every record arrives once, in order."""
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    count, partitions = 3000, 12
    create_topic(broker.bootstrap, TOPIC, partitions)
    KafkaPythonClient.produce(broker.bootstrap, TOPIC, count)
    consumed = KafkaPythonClient.consume(broker.bootstrap, TOPIC, partitions, count, timeout=60,
                                         fetch_max_bytes=64 * 1024, max_partition_fetch_bytes=16 * 1024)
    records.check_read_back(consumed, count)
    assert len(consumed) == count
    samples = scrape(broker.metrics_url)  # the session outlives the consumer, as in Kafka, until evicted
    assert value(samples, "kgate_fetch_sessions") == 1
    assert value(samples, "kgate_fetch_session_partitions") == partitions
