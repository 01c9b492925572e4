"""The conformance suite's CI subset: each scenario against Apache Kafka 4.4 and kgate, one
of each per module (and a secured pair, SASL users and ACL authorizers, for the secured
scenarios, and pairs started with the settings a scenario names); every divergence must be
explained in conformance/known.py (scripts/conformance runs them all and writes
conformance/REPORT.md). Beside the scenarios,
what a real client reads where the raw exchanges cannot show it all, from both brokers."""
import secrets
import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

from conformance.brokers import KGATE_SETTINGS, Pair
from conformance.known import classify
from conformance.run import run_scenario, select
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture

CI = select([], ci_only=True)
# One worker runs the module, so Kafka and each pair start once (scripts/test: --dist loadgroup);
# spread over the workers, each started its own, up to nine Kafka brokers in all.
pytestmark = pytest.mark.xdist_group("conformance")


@pytest.fixture(scope="module")
def kgate(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("kgate")), KGATE_SETTINGS).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def plain(kafka_broker, kgate):  # noqa: F811
    return kafka_broker.bootstrap, kgate.bootstrap


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The other pairs of brokers (conformance/brokers.py), each started when a scenario first
    needs it and kept for the module's others."""
    started: dict = {}

    def addresses(kind):
        if kind not in started:
            started[kind] = Pair(str(tmp_path_factory.mktemp("pair")), *kind).start()
        return started[kind].addresses
    yield addresses
    for pair in started.values():
        pair.stop()


def test_the_subset_covers_every_family():
    assert {s.family for s in CI} == {s.family for s in select([])}


@pytest.mark.parametrize("scenario", CI, ids=[s.name for s in CI])
def test_scenario_has_no_unexplained_divergence(scenario, request):
    addresses = request.getfixturevalue("plain") if scenario.pair == (False, ()) \
        else request.getfixturevalue("pairs")(scenario.pair)
    unexplained = [d for d, known in classify(run_scenario(scenario, *addresses)) if known is None]
    assert not unexplained, "\n".join(f"{d.label}: {d.path}: Kafka {d.kafka!r}, kgate {d.kgate!r}"
                                      for d in unexplained)


PRODUCER_TIME = 1_700_000_000_000


def _produce_and_read(bootstrap: str, topic: str, count: int) -> tuple[list, list]:
    """(delivery report timestamps, consumed timestamps) of ``count`` records sent at PRODUCER_TIME."""
    delivered: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, timestamp=PRODUCER_TIME + i,
                         on_delivery=lambda err, msg: delivered.append(err or msg.timestamp()))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list = []
    deadline = time.monotonic() + 30
    while len(read) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.timestamp())
    consumer.close()
    return delivered, read


@pytest.mark.parametrize("broker", [0, 1], ids=["kafka", "kgate"])
@pytest.mark.parametrize("timestamp_type", ["LogAppendTime", "CreateTime"])
def test_confluent_kafka_reads_the_timestamp_type_each_broker_stamps(plain, broker, timestamp_type):
    """librdkafka reads the batch's timestamp type: on a LogAppendTime topic, delivery reports
    and consumed records carry the broker's clock (one time per batch), never the producer's."""
    bootstrap = plain[broker]
    topic = f"stamp-{timestamp_type}-{secrets.token_hex(4)}"
    create_topic(bootstrap, topic, 1, {"message.timestamp.type": timestamp_type})
    before = int(time.time() * 1000)
    delivered, read = _produce_and_read(bootstrap, topic, 3)
    after = int(time.time() * 1000)
    assert len(read) == 3
    if timestamp_type == "CreateTime":
        expected = [(TIMESTAMP_CREATE_TIME, PRODUCER_TIME + i) for i in range(3)]
        assert delivered == read == expected
        return
    assert {kind for kind, _ in read + delivered} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(before <= stamp <= after for _, stamp in read)
    assert [stamp for _, stamp in delivered] == [stamp for _, stamp in read]
