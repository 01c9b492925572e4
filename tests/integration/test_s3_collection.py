"""Nothing leaks from object storage: WAL objects whose ledgers are all gone (retention, topic
deletion) are deleted by the broker, and ``kgate storage check`` agrees with the bucket.
A real broker on a real SeaweedFS, driven by confluent-kafka."""
import asyncio
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient
from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for

pytestmark = pytest.mark.slow


def wal_objects(bucket_url: str) -> list[str]:
    return asyncio.run(ObjectClient(BucketLocation.parse(bucket_url)).keys("wal/"))


def storage_check(bucket_url: str, data_dir: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgate", "storage", "check", "--storage", bucket_url,
                           "--data-dir", data_dir], capture_output=True, text=True, timeout=60)


def produce_rounds(bootstrap: str, topic: str, rounds: int) -> None:
    """One record per round, each acknowledged before the next is sent: one WAL object each."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list = []
    for i in range(rounds):
        producer.produce(topic, f"round {i}".encode(), on_delivery=lambda err, _msg: err and failures.append(err))
        assert producer.flush(30) == 0
    assert not failures, failures


def test_retention_and_topic_deletion_delete_wal_objects_and_storage_check_finds_what_is_missing(
        broker_factory, bucket_url):
    broker = broker_factory(**{"kgate.storage": bucket_url, "kgate.s3.wal.commit.interval.ms": 20,
                               "log.retention.check.interval.ms": 200, "kgate.s3.gc.interval.ms": 200})
    create_topic(broker.bootstrap, "doomed", 2)
    create_topic(broker.bootstrap, "short", 1, {"retention.ms": "1000", "segment.bytes": "14"})
    ConfluentClient.produce(broker.bootstrap, "doomed", 300)
    before = len(wal_objects(bucket_url))
    # Every record a ledger of its own (segment.bytes=1), in an object of its own.
    produce_rounds(broker.bootstrap, "short", 4)
    assert len(wal_objects(bucket_url)) == before + 4

    # Retention drops the three sealed ledgers; the objects holding only them go, the last stays.
    wait_for(lambda: len(wal_objects(bucket_url)) == before + 1, 30, "the retained ledgers' WAL objects to go")

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics(["doomed", "short"]).values():
        future.result(timeout=30)
    wait_for(lambda: not wal_objects(bucket_url), 30, "the deleted topics' WAL objects to go")
    clean = storage_check(bucket_url, broker.data_dir)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # A sealed ledger's index piece names its object: removed by hand, the check says so.
    create_topic(broker.bootstrap, "kept", 1, {"segment.bytes": "14"})
    produce_rounds(broker.bootstrap, "kept", 2)
    first, _second = wal_objects(bucket_url)
    asyncio.run(ObjectClient(BucketLocation.parse(bucket_url)).delete([first]))
    damaged = storage_check(bucket_url, broker.data_dir)
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    assert [line.split()[:2] for line in damaged.stdout.splitlines()] == [["missing", first]]
