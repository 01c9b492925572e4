"""Object storage unreachable for 10 s under an idempotent acks=all producer: produces wait or
get a retriable error, nothing acknowledged is lost, service resumes by itself.
A real broker on a real SeaweedFS, which the test stops and resumes by PID (SIGSTOP, SIGCONT)."""
import signal
import time

import pytest

from tests.support.clients import create_topic
from tests.support.cluster import AckedProducer, check_delivery, read_all
from tests.support.member_process import wait_for

pytestmark = pytest.mark.slow
PARTITIONS = 4
RECORDS = 3000
OUTAGE_SECONDS = 10


def test_ten_seconds_without_object_storage_lose_no_acknowledged_record_and_service_resumes(
        broker_factory, bucket_url, seaweedfs):
    broker = broker_factory(**{"kgate.storage": bucket_url, "kgate.s3.wal.commit.interval.ms": 50})
    create_topic(broker.bootstrap, "outage", PARTITIONS)
    producer = AckedProducer("confluent", broker.bootstrap, "outage", RECORDS, per_second=300,
                             **{"enable.idempotence": True}).start()
    wait_for(lambda: len(producer.acked) > 600, 60, "acknowledgements before the outage")
    seaweedfs.process.send_signal(signal.SIGSTOP)
    acked_before = len(producer.acked)
    try:
        # The outage lasts its full length whatever the producer does meanwhile.
        resume_at = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < resume_at:
            assert broker.process.poll() is None, "the broker exited during the outage"
            time.sleep(0.5)
        acked_during = len(producer.acked)
    finally:
        seaweedfs.process.send_signal(signal.SIGCONT)
    # The outage held acknowledgements back (at most what was in flight when it began got through)...
    assert acked_during - acked_before < 300, (acked_before, acked_during)
    # ... and they resume by themselves.
    wait_for(lambda: len(producer.acked) > acked_during, 60, "acknowledgements after the outage")
    producer.join()
    assert not producer.failed, producer.failed[:3]
    assert len(producer.acked) == RECORDS
    stored = read_all(broker.bootstrap, "outage", PARTITIONS)
    check_delivery(stored, producer.acked)
    # Idempotent, so each record once: a retry stored twice would show as one more.
    assert len(stored) == RECORDS
