"""The Prometheus endpoint, scraped after real traffic: every figure moves as the traffic says."""
from confluent_kafka import Consumer

from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value

TOPIC = "measured"
COUNT = 1000


def test_metrics_follow_the_traffic(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": 0})
    before = scrape(broker.metrics_url)
    assert value(before, "kgate_topic_records_in_total", topic=TOPIC) == 0
    create_topic(broker.bootstrap, TOPIC, 3)
    ConfluentClient.produce(broker.bootstrap, TOPIC, COUNT)
    assert len(ConfluentClient.consume(broker.bootstrap, TOPIC, 3, COUNT)) == COUNT
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watched",
                         "client.software.name": "metrics-test", "client.software.version": "1.2.3"})
    consumer.subscribe([TOPIC])
    try:
        def stable_group():
            consumer.poll(0.2)
            samples = scrape(broker.metrics_url)
            return value(samples, "kgate_groups", state="STABLE") == 1 and samples
        samples = wait_for(stable_group, timeout=30, what="a Stable group in the metrics")
        assert value(samples, "kgate_connections", client_software_name="metrics-test",
                     client_software_version="1.2.3") >= 1
    finally:
        consumer.close()
    assert value(samples, "kgate_topic_records_in_total", topic=TOPIC) == COUNT
    assert value(samples, "kgate_topic_records_out_total", topic=TOPIC) >= COUNT
    assert value(samples, "kgate_topic_bytes_in_total", topic=TOPIC) > COUNT * 100
    produces = sum(v for (name, labels), v in samples.items()
                   if name == "kgate_requests_total" and ("api", "Produce") in labels)
    assert produces >= 1
    for stage in ("queued", "decode", "append", "fsync", "respond"):
        assert value(samples, "kgate_produce_stage_seconds_count", stage=stage) >= 1, stage
    for stage in ("queued", "decode", "read", "respond"):
        assert value(samples, "kgate_fetch_stage_seconds_count", stage=stage) >= 1, stage
    assert value(samples, "kgate_ledgers", topic=TOPIC) == 3
    assert value(samples, "kgate_ledger_bytes", topic=TOPIC) > COUNT * 100
    # Ownership and the metadata event manager: the topic's creation came back as an event.
    assert value(samples, "kgate_partitions_owned", topic=TOPIC) == 3
    assert value(samples, "kgate_metadata_event_processing_seconds_count", event="topics_changed") >= 1
    assert value(samples, "kgate_metadata_event_queue_seconds_count", event="topics_changed") >= 1
