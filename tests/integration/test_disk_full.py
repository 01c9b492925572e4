"""A full disk under an idempotent producer: KAFKA_STORAGE_ERROR per partition, nothing lost,
no connection closed, no producer epoch bump, and the broker recovers when space returns.

The data directory is a small tmpfs mounted for the test (it runs as root), filled with a
file and then freed."""
import errno
import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest, WriteTxnMarkersRequest

from kgate.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.scrape import scrape, value
from tests.support.wire import Wire
from tests.unit.record_batches import build_batch

PD = ProduceRequest.TopicProduceData
PARTITIONS = 2
RECORDS = 3_000
VALUE = 1000


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"this test mounts a tmpfs as the broker's data directory and needs root: "
                    f"mount failed: {mounted.stderr.strip()}")
    try:
        yield str(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def _fill(directory: str) -> str:
    """Write a file until the filesystem refuses another byte."""
    path = os.path.join(directory, "filler")
    with open(path, "wb", buffering=0) as fh:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    fh.write(bytes(chunk))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return path


def _wait_for(condition, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _requests(samples: dict, api: str) -> float:
    return sum(v for (name, labels), v in samples.items()
               if name == "kgate_requests_total" and dict(labels).get("api") == api)


def _commit(wire: Wire, group: str, topic: str) -> int:
    """A standalone commit (no generation) of offset 1 with 4,000 bytes of metadata: its error code."""
    part = OffsetCommitRequest.OffsetCommitRequestTopic
    response = wire.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                             group_instance_id=None, retention_time_ms=-1, topics=[part(
                                                 name=topic, partitions=[part.OffsetCommitRequestPartition(
                                                     partition_index=0, committed_offset=1,
                                                     committed_leader_epoch=-1, commit_timestamp=-1,
                                                     committed_metadata="m" * 4000)])]), 6)
    return response.topics[0].partitions[0].error_code


def _marker(wire: Wire, topic: str) -> int:
    """An ABORT marker for producer 4242 in ``topic``-0, as a coordinator sends it: its error code."""
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    response = wire.call(WriteTxnMarkersRequest(markers=[marker(
        producer_id=4242, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]), 1)
    return response.markers[0].topics[0].partitions[0].error_code


def test_disk_full_answers_storage_error_and_recovers_when_space_returns(tmp_path, small_disk):
    broker = BrokerProcess(small_disk, {"kgate.metrics.listener": "127.0.0.1:0"},
                           log_path=str(tmp_path / "broker.log")).start()
    try:
        create_topic(broker.bootstrap, "full", PARTITIONS, {"segment.bytes": str(256 * 1024)})
        create_topic(broker.bootstrap, "probe", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
                             "retry.backoff.max.ms": 500})
        acked: dict[tuple[int, int], bytes] = {}
        failures = []

        def delivered(err, message):
            if err is not None:
                failures.append(err)
            else:
                acked[(message.partition(), message.offset())] = message.value()

        def produce(first: int, count: int) -> None:
            for i in range(first, first + count):
                producer.produce("full", value=b"%06d" % i + bytes(VALUE - 6), partition=i % PARTITIONS,
                                 on_delivery=delivered)
                producer.poll(0)

        produce(0, RECORDS // 3)
        assert producer.flush(30) == 0 and not failures
        filler = _fill(small_disk)
        produce(RECORDS // 3, RECORDS - RECORDS // 3)
        _wait_for(lambda: value(scrape(broker.metrics_url), "kgate_storage_write_errors_total") >= PARTITIONS,
                  "produce to fail on the full disk")

        with Wire(broker.bootstrap) as wire:  # a client sees the error per partition, on a connection kept open
            answer = wire.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
                PD(name="probe", partition_data=[PD.PartitionProduceData(
                    index=0, records=build_batch([bytes(64 * 1024)]))])]), 8).responses[0].partition_responses[0]
            assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # An offset commit is answered with a retriable error too (it used to be a traceback).
            assert _commit(wire, "full-disk-group", "full") == ErrorCode.COORDINATOR_NOT_AVAILABLE
            # So is a transaction marker another broker's coordinator sends (a fault run: the
            # request failed inside the broker and closed the coordinator's connection).
            assert _marker(wire, "probe") == ErrorCode.KAFKA_STORAGE_ERROR
            assert wire.call(MetadataRequest(topics=None), 1).brokers
        assert broker.alive()

        os.unlink(filler)
        assert producer.flush(60) == 0, "records still undelivered after space returned"
        assert not failures, f"{len(failures)} deliveries failed, first: {failures[0]}"
        assert len(acked) == RECORDS
        samples = scrape(broker.metrics_url)
        assert _requests(samples, "InitProducerId") == 1, "the producer bumped its epoch or started over"
    finally:
        broker.stop()

    consumer = Consumer({"bootstrap.servers": broker.restart().bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("full", p, 0) for p in range(PARTITIONS)])
        read: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 30
        while len(read) < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                assert not message.error(), message.error()
                assert (message.partition(), message.offset()) not in read, "an offset was served twice"
                read[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
        broker.stop()
    assert read == acked, "what was acknowledged is not what is stored"
    for partition in range(PARTITIONS):
        offsets = sorted(offset for p, offset in read if p == partition)
        assert offsets == list(range(len(offsets))), "offsets have gaps or were reused"
    with open(broker.log_path) as fh:
        log = fh.read()
    assert "Traceback" not in log
    assert log.count("level=error") <= PARTITIONS + 1, "error lines per request, not one per partition"


def test_sigterm_on_a_full_disk_logs_the_failed_hand_over_and_exits_cleanly(tmp_path, small_disk):
    """The ownership hand-over cannot be written: it is logged, the broker exits 0 (it ended
    with exit 1 and an uncaught sqlite3 error), and what was acknowledged is all there after
    space returns."""
    broker = BrokerProcess(small_disk, log_path=str(tmp_path / "broker.log")).start()
    create_topic(broker.bootstrap, "kept", PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[tuple[int, int], bytes] = {}

    def delivered(err, message):
        if err is None:
            acked[(message.partition(), message.offset())] = message.value()
    for i in range(200):
        producer.produce("kept", value=b"%06d" % i, partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0 and len(acked) == 200
    del producer
    filler = _fill(small_disk)
    try:
        assert broker.stop() == 0, "a clean exit"
    finally:
        os.unlink(filler)
    with open(broker.log_path) as fh:
        log = fh.read()
    assert "Traceback" not in log
    assert "hand-over" in log and "level=error" in log, "the failed hand-over is logged"
    consumer = Consumer({"bootstrap.servers": broker.restart().bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    read: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([TopicPartition("kept", p, 0) for p in range(PARTITIONS)])
        _wait_for(lambda: read.update({(m.partition(), m.offset()): m.value()
                                       for m in consumer.consume(500, timeout=0.5) if not m.error()})
                  or len(read) >= len(acked), "the acknowledged records")
    finally:
        consumer.close()
        broker.stop()
    assert read == acked
