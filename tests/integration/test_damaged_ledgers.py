"""Damaged ledgers on disk: the broker starts, the damaged partitions answer KAFKA_STORAGE_ERROR
(produce, fetch, list-offsets), every other partition serves, and wrong bytes are never served;
an entry found damaged when read refuses only its offsets and later ones, what lies before it
is still served."""
import asyncio
import json
import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record import MemoryRecords

from kgate.metadata.cluster import TOPICS, Topic, ledger_list_path
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.protocol.error_codes import ErrorCode
from tests.support.clients import create_topic
from tests.support.scrape import scrape, value
from tests.support.wire import Wire
from tests.unit.record_batches import build_batch

FT = FetchRequest.FetchTopic
LO = ListOffsetsRequest.ListOffsetsTopic
PD = ProduceRequest.TopicProduceData
RECORDS = 200
METRICS = {"kgate.metrics.listener": "127.0.0.1:0"}


def _produce(bootstrap: str, topic: str, partitions, count: int = RECORDS, batches: int = 4) -> None:
    """``count`` records to each partition, in ``batches`` flushes: several entries per ledger."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for batch in range(batches):
        for partition in partitions:
            for i in range(batch * count // batches, (batch + 1) * count // batches):
                producer.produce(topic, value=b"%s-%d-%06d" % (topic.encode(), partition, i), partition=partition)
        assert producer.flush(30) == 0


def _ledgers(data_dir: str, topic: str, partition: int) -> list[dict]:
    """The chain of a stopped broker's partition, as its metadata store records it."""
    async def read():
        store = EmbeddedMetadataStore(os.path.join(data_dir, "metadata.sqlite"))
        try:
            node = await store.get(f"{TOPICS}/{topic}")
            chain = await store.get(ledger_list_path(Topic.decode(topic, node.data), partition))
            return json.loads(chain.data)["ledgers"]
        finally:
            await store.close()
    return asyncio.run(read())


def _ledger_path(data_dir: str, ledger_id: int) -> str:
    return os.path.join(data_dir, "ledgers", f"{ledger_id:019d}.ledger")


def _answers(bootstrap: str, topic: str, partition: int, fetch_offset: int = 0,
             timestamp: int = -1) -> dict[str, tuple[int, bytes | None]]:
    """Error code (and records, for fetch) of a fetch from ``fetch_offset``, a produce and a
    list-offsets (latest, or ``timestamp``), on the wire."""
    with Wire(bootstrap) as wire:
        fetched = wire.call(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=fetch_offset, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""), 11).responses[0].partitions[0]
        produced = wire.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
            PD(name=topic, partition_data=[PD.PartitionProduceData(index=partition, records=build_batch([b"new"]))])
        ]), 8).responses[0].partition_responses[0]
        listed = wire.call(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LO(name=topic, partitions=[
            LO.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp,
                                    max_num_offsets=1)])]), 5).topics[0].partitions[0]
    return {"produce": (produced.error_code, None), "fetch": (fetched.error_code, fetched.records),
            "list_offsets": (listed.error_code, listed.offset if listed.error_code == ErrorCode.NONE else None)}


def _error_lines(broker, *words: str) -> list[str]:
    with open(broker.log_path) as fh:
        return [line for line in fh if "level=error" in line and all(word in line for word in words)]


def _wait_for(condition, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_damaged_ledgers_serve_only_what_lies_before_the_damage(broker_factory):
    """A sealed ledger cut 30 bytes short, and an open ledger damaged in its middle by a crash
    (valid entries after the damage): the broker starts, those two partitions answer
    KAFKA_STORAGE_ERROR from the damage on with one ERROR line each (the recovery one names
    what lies after the damage), still serve the entries before it, nothing is truncated,
    and the healthy partition keeps serving. (The whole partitions went offline.)"""
    broker = broker_factory(**METRICS)
    create_topic(broker.bootstrap, "t", 3)
    _produce(broker.bootstrap, "t", [0])  # entries of 50 records each
    assert broker.stop() == 0  # partition 0's ledger is sealed
    broker.restart()
    _produce(broker.bootstrap, "t", [1, 2])
    broker.kill()  # partition 1's ledger stays open, as after a crash

    sealed = _ledger_path(broker.data_dir, _ledgers(broker.data_dir, "t", 0)[0]["ledger_id"])
    os.truncate(sealed, os.path.getsize(sealed) - 30)
    unsealed = _ledger_path(broker.data_dir, _ledgers(broker.data_dir, "t", 1)[-1]["ledger_id"])
    size = os.path.getsize(unsealed)
    with open(unsealed, "r+b") as fh:  # a byte in the middle of the file: inside an entry with many after it
        fh.seek(size // 2)
        byte = fh.read(1)
        fh.seek(size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))

    broker.restart()
    for partition, served in ((0, 150), (1, None)):
        for _ in range(2):  # asked twice: still one log line
            answers = _answers(broker.bootstrap, "t", partition)
            values = _values(answers["fetch"][1])
            assert answers["fetch"][0] == ErrorCode.NONE and 0 < len(values) < RECORDS, (partition, answers)
            assert served is None or len(values) == served, "all but the entry cut short"
            assert values == [b"t-%d-%06d" % (partition, i) for i in range(len(values))]
            assert _answers(broker.bootstrap, "t", partition, len(values))["fetch"] == (
                ErrorCode.KAFKA_STORAGE_ERROR, b""), "from the damage on: refused, empty records, never null"
            assert answers["produce"][0] == answers["list_offsets"][0] == ErrorCode.KAFKA_STORAGE_ERROR, answers
            assert _answers(broker.bootstrap, "t", partition, timestamp=-2)["list_offsets"] == (ErrorCode.NONE, 0)
        assert len(_error_lines(broker, f"t-{partition}")) == 1, _error_lines(broker, f"t-{partition}")
    # What recovery found after the damage is said at ERROR with counts, and left on disk.
    recovery = _error_lines(broker, "t-1")[0]
    assert "entries" in recovery and "records" in recovery and "after the damage" in recovery, recovery
    assert os.path.getsize(unsealed) == size
    healthy = _answers(broker.bootstrap, "t", 2)
    assert {name: error for name, (error, _) in healthy.items()} == dict.fromkeys(healthy, ErrorCode.NONE)
    assert healthy["fetch"][1].count(b"t-2-") == RECORDS
    samples = scrape(broker.metrics_url)
    assert value(samples, "kgate_offline_partitions") == 2
    assert value(samples, "kgate_damaged_ledgers_total", cause="unreadable") == 1
    assert value(samples, "kgate_damaged_ledgers_total", cause="recovery") == 1
    assert broker.stop() == 0
    assert os.path.getsize(unsealed) == size, "a clean shutdown writes nothing to a damaged ledger"


def test_a_flipped_byte_in_a_sealed_ledger_is_never_served_and_what_lies_before_it_is(broker_factory):
    """The damaged entry and everything after it answer KAFKA_STORAGE_ERROR; the entries
    before it are still served, to the wire and to a consumer starting from the earliest
    offset (the whole partition went offline, offsets before the damage included)."""
    broker = broker_factory(**METRICS)
    create_topic(broker.bootstrap, "flip", 2)
    _produce(broker.bootstrap, "flip", [0, 1])  # entries hold records 0-49, 50-99, 100-149, 150-199
    assert broker.stop() == 0
    path = _ledger_path(broker.data_dir, _ledgers(broker.data_dir, "flip", 0)[0]["ledger_id"])
    with open(path, "r+b") as fh:
        data = fh.read()
        at = data.index(b"flip-0-000100")
        fh.seek(at + len(b"flip-0-0001"))
        fh.write(b"9")  # the record reads flip-0-000190 now: a value that was produced, at the wrong offset

    broker.restart()
    before = [b"flip-0-%06d" % i for i in range(100)]
    for _ in range(2):
        answers = _answers(broker.bootstrap, "flip", 0)
        assert answers["fetch"][0] == ErrorCode.NONE and _values(answers["fetch"][1]) == before
        for offset in (100, 120, 150, 199):
            assert _answers(broker.bootstrap, "flip", 0, offset)["fetch"] == (ErrorCode.KAFKA_STORAGE_ERROR, b"")
        assert answers["produce"][0] == answers["list_offsets"][0] == ErrorCode.KAFKA_STORAGE_ERROR, answers
        assert _answers(broker.bootstrap, "flip", 0, timestamp=-2)["list_offsets"] == (ErrorCode.NONE, 0)
    assert len(_error_lines(broker, "flip-0", "CRC")) == 1
    assert "from 100 on" in _error_lines(broker, "flip-0", "CRC")[0]
    assert _answers(broker.bootstrap, "flip", 1)["fetch"][1].count(b"flip-1-") == RECORDS
    samples = scrape(broker.metrics_url)
    assert value(samples, "kgate_damaged_ledgers_total", cause="checksum") == 1
    assert value(samples, "kgate_offline_partitions") == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "flip-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("flip", 0), TopicPartition("flip", 1)])  # from the earliest offset
    read: dict[int, list[bytes]] = {0: [], 1: []}

    def everything_readable():
        for message in consumer.consume(500, timeout=0.5):
            if not message.error():
                read[message.partition()].append(message.value())
        return len(read[0]) >= len(before) and len(read[1]) > RECORDS
    try:
        _wait_for(everything_readable, f"what lies before the damage, and the healthy partition: {read}")
    finally:
        consumer.close()
    assert read[0] == before and len(read[1]) == RECORDS + 1  # and the record _answers produced


def _values(records: bytes) -> list[bytes]:
    return [record.value for batch in MemoryRecords(bytes(records)) for record in batch]
