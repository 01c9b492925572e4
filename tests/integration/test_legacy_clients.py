"""Clients of the 0.9/0.10 era besides the venv's kafka-python, against a real broker in
every entry format: kafka-python 2.0.2 and 1.4.7 pinned to api_version (0, 9) and
(0, 10, 0), Sarama 1.22 at V0_9_0_0 .. V2_1_0_0, kcat (librdkafka 2.0.2) and
confluent-kafka, each both forced to the 0.9 generation (no ApiVersions) and as they are.

Each cell produces keyed records with every codec its generation allows and reads them
back (offsets contiguous from 0 per partition, as its delivery reports said); today's
confluent-kafka reads the same records at the same offsets; the old client reads
records today's client wrote (down-converted to its magic); where it has groups, a
group member commits part of a topic and the next one resumes after it. The broker's
request counters show that each pinned client spoke exactly its generation.
"""
import dataclasses
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from storage import entry_formats
from tests.support import records
from tests.support.clients import ConfluentClient, create_topic
from tests.support.legacy_clients.clients import Confluent, Kcat, OldKafkaPython, Sarama

COUNT = 2000
PARTITIONS = 3

# client, (Produce version, Fetch version) it must send without ever sending ApiVersions
# (None: a client that negotiates with ApiVersions)
CELLS = [
    (OldKafkaPython("2.0.2", (0, 9)), (1, 1)),
    (OldKafkaPython("2.0.2", (0, 10, 0)), (2, 2)),
    (OldKafkaPython("1.4.7", (0, 9)), (1, 1)),
    (OldKafkaPython("1.4.7", (0, 10, 0)), (2, 2)),
    (Sarama("V0_9_0_0"), (0, 1)),
    (Sarama("V0_10_0_0"), (2, 2)),
    (Sarama("V0_10_2_0"), (2, 3)),
    (Sarama("V2_1_0_0"), (3, 4)),
    (Kcat(legacy=True), (1, 1)),
    (Kcat(legacy=False), None),
    (Confluent(legacy=True), (1, 1)),
    (Confluent(legacy=False), None),
]

pytestmark = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)


@pytest.fixture
def broker(broker_factory):
    # One group member at a time: no reason to wait for others to join.
    return broker_factory(**{"group.initial.rebalance.delay.ms": 0, "kgate.metrics.listener": "127.0.0.1:0"})


def requests_answered(broker) -> dict[tuple[str, int], float]:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {(s.labels["api"], int(s.labels["version"])): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "kgate_requests_total"}


def check(consumed, magic, with_headers, with_timestamps, sent_between=None):
    """records.check_read_back for ``magic``; ``sent_between``: (first, last) epoch ms for
    records whose create time the client's clock gave (checked, then set to the expected
    one)."""
    if sent_between is not None and magic > 0:
        first, last = sent_between
        late = [r for r in consumed if not first <= r.timestamp <= last]
        assert not late, f"{len(late)} timestamps outside the produce, e.g. {late[0]}"
        consumed = [dataclasses.replace(r, timestamp=records.timestamp(records.index_of(r))) for r in consumed]
        with_timestamps = True
    records.check_read_back(consumed, COUNT, with_headers=with_headers and magic == 2,
                            with_timestamps=with_timestamps and magic > 0)


class Wire:
    """The (API, version) pairs the broker answered while the old client alone was talking."""

    def __init__(self, broker):
        self.broker = broker
        self.sent: set[tuple[str, int]] = set()

    def __call__(self, call, *args, **kwargs):
        before = requests_answered(self.broker)
        result = call(*args, **kwargs)
        self.sent |= {key for key, value in requests_answered(self.broker).items() if value > before.get(key, 0)}
        return result

    def versions(self, api: str) -> set[int]:
        return {version for name, version in self.sent if name == api}


@pytest.mark.parametrize("client, wire", CELLS, ids=[client.name for client, _ in CELLS])
def test_produce_consume_group_and_cross_generation_reads(broker, client, wire):
    unavailable = client.available()
    if unavailable:
        pytest.fail(unavailable)
    spoken = Wire(broker)
    for codec in client.codecs:
        topic = f"{client.name}-{codec}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        started = int(time.time() * 1000)
        delivered = spoken(client.produce, broker.bootstrap, topic, COUNT, codec=codec)
        sent_between = None if client.sets_fields else (started, int(time.time() * 1000))
        own = spoken(client.consume, broker.bootstrap, topic, PARTITIONS, COUNT)
        check(own, client.magic, client.sets_fields, client.sets_fields, sent_between)
        if delivered is not None:
            assert {records.index_of(r): (r.partition, r.offset) for r in own} == delivered, \
                f"{codec}: offsets read differ from the delivery reports"
        assert len({r.partition for r in own}) == PARTITIONS, "keys should spread over every partition"
        today = ConfluentClient.consume(broker.bootstrap, topic, PARTITIONS, COUNT, timeout=60)
        check(today, client.magic, client.sets_fields, client.sets_fields, sent_between)
        assert sorted((r.partition, r.offset, r.key) for r in today) == \
            sorted((r.partition, r.offset, r.key) for r in own), f"{codec}: today's client reads other offsets"
    if client.has_groups:
        group = f"{client.name}-resumes"
        first = spoken(client.group_consume, broker.bootstrap, topic, group, COUNT // 3)
        rest = spoken(client.group_consume, broker.bootstrap, topic, group, COUNT - len(first))
        assert len(first) == COUNT // 3
        check(first + rest, client.magic, client.sets_fields, client.sets_fields, sent_between)

    # Records of today's client (magic 2, headers, timestamps), down-converted to the old magic.
    topic = f"today-for-{client.name}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    ConfluentClient.produce(broker.bootstrap, topic, COUNT, codec=client.codecs[-1])
    check(spoken(client.consume, broker.bootstrap, topic, PARTITIONS, COUNT), client.magic, True, True)

    if wire is not None:
        assert not spoken.versions("ApiVersions"), f"{client.name} sent ApiVersions: {sorted(spoken.sent)}"
        assert (spoken.versions("Produce"), spoken.versions("Fetch")) == ({wire[0]}, {wire[1]}), sorted(spoken.sent)
