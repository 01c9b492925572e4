"""The partition router's decisions, for each kind of client and operation.

A stand-in broker view answers only what routing asks (which partitions it serves, who
owns the rest, the zones' brokers); the zone tests in tests/integration hold the same
rules with real brokers.
"""
import asyncio
import uuid
from dataclasses import dataclass, field

import pytest

from kgate.gateway.partition_router import (
    ByReference,
    Client,
    Followed,
    Local,
    Operation,
    Redirect,
    Refused,
    lead,
    route,
)
from kgate.metadata.cluster import BrokerInfo, Topic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

TOPIC = Topic("t", uuid.uuid4(), 4)
OWNERS = {0: 1, 1: 1, 2: 2, 3: 3}  # partition -> owner; this broker is 1, in zone a
RACKS = {1: "a", 2: "a", 3: "b"}


@dataclass
class Metrics:
    fallbacks: list = field(default_factory=list)

    def zone_fallback(self, zone):
        self.fallbacks.append(zone)


@dataclass
class Followers:
    available: bool = True
    refused: dict = field(default_factory=dict)

    async def partition(self, topic, index):
        return ("followed", topic.name, index)

    async def refresh(self, partitions):
        return self.refused


@dataclass
class View:
    followers: Followers = field(default_factory=Followers)
    metrics: Metrics = field(default_factory=Metrics)
    node_id: int = 1
    zone: str = "a"
    zone_brokers: dict = field(default_factory=lambda: {"a": None, "b": 3})
    damaged: dict = field(default_factory=dict)  # index -> the first damaged offset

    def partition(self, name, index):
        if not 0 <= index < TOPIC.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if index in self.damaged:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
        if OWNERS[index] != self.node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION)
        return ("local", name, index)

    def damaged_partition(self, name, index):
        return (("local", name, index), self.damaged[index]) if index in self.damaged else None

    def leader(self, topic, index):
        owner = OWNERS[index]
        return BrokerInfo(owner, {"PLAINTEXT": f"127.0.0.1:{9000 + owner}"}, RACKS[owner])

    def zone_broker(self, zone, topic, index):
        owner = OWNERS[index]
        return owner if RACKS[owner] == zone else self.zone_brokers[zone]


def decide(view, client, index, operation):
    return asyncio.run(route(view, client, TOPIC, index, operation))


@pytest.mark.parametrize("operation", list(Operation))
def test_an_owned_partition_is_served_here_to_a_client_of_no_zone(operation):
    assert decide(View(), Client(None), 0, operation) == Local(("local", "t", 0))


@pytest.mark.parametrize("operation", list(Operation))
def test_another_owners_partition_is_refused_to_a_client_of_no_zone(operation):
    assert decide(View(), Client(None), 2, operation) == Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)


def test_a_client_of_this_zone_reads_and_describes_another_owners_partition_here():
    client = Client("a")
    assert decide(View(), client, 2, Operation.FETCH) == Followed(("followed", "t", 2))
    assert decide(View(), client, 2, Operation.DESCRIBE) == Followed(("followed", "t", 2))
    assert decide(View(), client, 2, Operation.OWNED) == Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)


def test_an_offset_lookup_is_refused_what_the_owner_refuses():
    view = View(followers=Followers(refused={("t", 2): ErrorCode.KAFKA_STORAGE_ERROR}))
    assert decide(view, Client("a"), 2, Operation.DESCRIBE) == Refused(ErrorCode.KAFKA_STORAGE_ERROR)


def test_a_produce_from_this_zone_for_another_owner_goes_by_reference():
    owner = BrokerInfo(3, {"PLAINTEXT": "127.0.0.1:9003"}, "b")
    assert decide(View(), Client("a"), 3, Operation.PRODUCE) == ByReference(owner)


def test_nothing_is_followed_for_a_peer_broker_or_where_the_store_cannot_show_a_ledger():
    assert decide(View(), Client("a", peer=True), 2, Operation.FETCH) == Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)
    view = View(followers=Followers(available=False))
    assert decide(view, Client("a"), 3, Operation.PRODUCE) == Refused(ErrorCode.NOT_LEADER_FOR_PARTITION)


def test_a_fetch_from_another_zone_goes_to_its_zones_broker_from_v11_only():
    assert decide(View(), Client("b", may_redirect=True), 0, Operation.FETCH) == Redirect(3, ("local", "t", 0))
    assert decide(View(), Client("b"), 0, Operation.FETCH) == Local(("local", "t", 0))


def test_a_zone_without_a_broker_falls_back_to_the_owner_and_is_counted():
    view = View(zone="b", zone_brokers={"a": None, "b": 3, "c": None})
    assert decide(view, Client("c", may_redirect=True), 0, Operation.FETCH) == Local(("local", "t", 0))
    assert view.metrics.fallbacks == ["c"]


def test_an_unknown_partition_is_refused_as_unknown():
    assert decide(View(), Client("a"), 9, Operation.FETCH) == Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_metadata_names_the_owner_or_the_clients_zone_broker():
    view = View()
    assert lead(view, Client(None), TOPIC, 0) == Local(("local", "t", 0))
    assert lead(view, Client(None), TOPIC, 3) == Redirect(3)
    assert lead(view, Client("b"), TOPIC, 0) == Redirect(3)  # zone b's broker leads it for zone b
    assert lead(view, Client("b", peer=True), TOPIC, 0) == Local(("local", "t", 0))


def test_a_damaged_partition_is_read_below_its_damage_and_written_nowhere():
    view = View(damaged={0: 40})
    assert decide(view, Client(None), 0, Operation.FETCH) == Local(("local", "t", 0), 40)
    assert decide(view, Client(None), 0, Operation.DESCRIBE) == Local(("local", "t", 0), 40)
    assert decide(view, Client(None), 0, Operation.PRODUCE) == Refused(ErrorCode.KAFKA_STORAGE_ERROR)
    assert decide(view, Client(None), 0, Operation.OWNED) == Refused(ErrorCode.KAFKA_STORAGE_ERROR)
    assert lead(view, Client(None), TOPIC, 0) == Local(("local", "t", 0))
