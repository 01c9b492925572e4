"""Nothing leaks from object storage: WAL objects whose ledgers are all gone (retention, topic
deletion) are deleted by the broker, and ``kgate storage check`` agrees with the bucket and
collects the orphans a crash leaves. A real broker on a real SeaweedFS, driven by
confluent-kafka."""
import asyncio
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient
from tests.support import records as R
from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for

pytestmark = pytest.mark.slow


def wal_objects(bucket_url: str) -> list[str]:
    return asyncio.run(ObjectClient(BucketLocation.parse(bucket_url)).keys("wal/"))


def storage_check(bucket_url: str, data_dir: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgate", "storage", "check", "--storage", bucket_url,
                           "--data-dir", data_dir, *options], capture_output=True, text=True, timeout=60)


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


def test_storage_check_collects_the_orphans_of_a_crashed_compaction_and_a_fenced_writer_and_nothing_live(
        broker_factory, bucket_url):
    broker = broker_factory(**{"kgate.storage": bucket_url, "kgate.s3.wal.commit.interval.ms": 20,
                               "kgate.s3.compaction.interval.ms": 3_600_000})
    create_topic(broker.bootstrap, "rolled", 1, {"segment.bytes": "14"})
    create_topic(broker.bootstrap, "open", 2)
    produce_rounds(broker.bootstrap, "rolled", 3)  # sealed ledgers, each named by its sealed piece
    ConfluentClient.produce(broker.bootstrap, "open", 200)  # open ledgers: their WAL objects named by no piece yet
    bucket = ObjectClient(BucketLocation.parse(bucket_url))
    live = set(asyncio.run(bucket.keys("")))
    clean = storage_check(bucket_url, broker.data_dir, "--min-age", "0")
    assert clean.returncode == 0, clean.stdout + clean.stderr  # nothing live counts as an orphan

    # What a compaction that crashed before its piece leaves under a sealed ledger, and what a
    # writer fenced after its PUT leaves: a WAL object of its own holding live ledgers' runs.
    sealed = sorted(key for key in live if key.endswith(".sealed"))[0]
    some_wal_object = sorted(key for key in live if key.startswith("wal/"))[0]
    copy = asyncio.run(bucket.get(some_wal_object))
    crashed = sealed.rsplit("/", 1)[0] + "/data-00000000000000000000-00000000000000000000-0-9"
    fenced = "wal/0-999999/00000000000000000000"
    for key in (crashed, fenced):
        asyncio.run(bucket.put(key, copy))

    young = storage_check(bucket_url, broker.data_dir)  # not yet past the safety age: kept
    assert young.returncode == 0, young.stdout + young.stderr
    found = storage_check(bucket_url, broker.data_dir, "--min-age", "0")
    assert found.returncode == 1, found.stdout + found.stderr
    assert sorted(line.split() for line in found.stdout.splitlines()) == [["orphaned", crashed],
                                                                          ["orphaned", fenced]]
    collected = storage_check(bucket_url, broker.data_dir, "--min-age", "0", "--collect")
    assert collected.returncode == 0 and "2 collected" in collected.stderr, collected.stdout + collected.stderr
    after = set(asyncio.run(bucket.keys("")))
    assert live <= after and not {crashed, fenced} & after

    broker.stop()
    broker.restart()  # caches empty: every record read back from the bucket
    assert [r.value for r in ConfluentClient.consume(broker.bootstrap, "rolled", 1, 3)] == \
        [f"round {i}".encode() for i in range(3)]
    assert sorted(r.value for r in ConfluentClient.consume(broker.bootstrap, "open", 2, 200)) == \
        sorted(R.value(i, 100) for i in range(200))
