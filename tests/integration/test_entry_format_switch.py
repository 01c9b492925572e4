"""A live topic switched from ``kafka`` to ``pulsar`` and back, while a producer writes to it.

The partition ends up holding entries of both formats; a consumer must read every
record once, at contiguous offsets, across both switches.
"""
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.protocol.consumer import FetchRequest

from kgate.protocol import record_batch
from tests.support import records
from tests.support.clients import ConfluentClient, create_topic
from tests.support.wire import Wire

TOPIC = "switching"
COUNT = 6000
CHUNK = 100
FT = FetchRequest.FetchTopic


def set_format(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("kgate.entry.format", name, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(producer: Producer, start: int, stop: int, failures: list) -> None:
    """Records ``start..stop-1`` of tests.support.records, queued (not flushed)."""
    for i in range(start, stop):
        producer.produce(TOPIC, key=records.key(i), value=records.value(i), headers=records.headers(i),
                         timestamp=records.timestamp(i), partition=0,
                         on_delivery=lambda error, _m: error and failures.append(error))


def batch_codecs(bootstrap: str) -> list[int]:
    """The codec of every stored batch in offset order, as Fetch v12 serves them."""
    codecs, offset = [], 0
    with Wire(bootstrap) as wire:
        while offset < COUNT:
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                   session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                                   topics=[FT(topic=TOPIC, partitions=[FT.FetchPartition(
                                       partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                       log_start_offset=-1, partition_max_bytes=1 << 20)])])
            data = wire.call(request, 12).responses[0].partitions[0].records
            batches = [header for _, header in record_batch.iter_headers(data) if header.last_offset >= offset]
            codecs.extend(header.compression for header in batches)
            offset = batches[-1].last_offset + 1
    return codecs


def test_switching_a_live_topic_to_pulsar_and_back_loses_nothing(broker):
    """One producer connection throughout; each switch lands while records are in flight."""
    create_topic(broker.bootstrap, TOPIC, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5,
                         "acks": "all"})
    failures: list = []
    third = COUNT // 3
    for phase, next_format in enumerate(["pulsar", "kafka", None]):
        produce(producer, phase * third, (phase + 1) * third - CHUNK, failures)
        assert producer.flush(30) == 0
        produce(producer, (phase + 1) * third - CHUNK, (phase + 1) * third, failures)
        if next_format:
            set_format(broker.bootstrap, next_format)
    assert producer.flush(30) == 0 and not failures, failures[:1]
    read = ConfluentClient.consume(broker.bootstrap, TOPIC, 1, COUNT)
    records.check_read_back(read, COUNT)
    assert len(read) == COUNT
    codecs = batch_codecs(broker.bootstrap)
    # kafka entries keep the client's lz4 batches; pulsar entries are rebuilt uncompressed.
    first_pulsar = codecs.index(0)
    back = codecs.index(3, first_pulsar)
    assert set(codecs[:first_pulsar]) == {3} and set(codecs[first_pulsar:back]) == {0} and set(codecs[back:]) == {3}
