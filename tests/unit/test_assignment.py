"""Partition ownership by rendezvous hashing with a per-topic cap: even, stable, agreed."""
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kgate.metadata.assignment import assign

brokers = st.sets(st.integers(0, 50), min_size=1, max_size=8)


@given(st.text(min_size=1, max_size=20), st.integers(1, 64), brokers)
def test_every_partition_has_a_live_owner_and_no_broker_more_than_its_share(topic, partitions, live):
    owners = assign(topic, partitions, live)
    assert len(owners) == partitions and set(owners) <= live
    share = -(-partitions // len(live))
    assert max(Counter(owners).values()) <= share


@given(st.text(min_size=1, max_size=20), st.integers(1, 64), brokers)
def test_every_broker_computes_the_same_owners_whatever_order_it_lists_brokers_in(topic, partitions, live):
    assert assign(topic, partitions, sorted(live)) == assign(topic, partitions, sorted(live, reverse=True))


def test_a_broker_leaving_moves_only_the_partitions_it_owned():
    before = assign("orders", 12, [0, 1, 2])
    after = assign("orders", 12, [0, 2])
    assert [p for p in range(12) if before[p] != after[p]] == [p for p in range(12) if before[p] == 1]


def test_a_fourth_broker_takes_about_a_quarter_of_many_topics():
    topics = [f"topic-{i}" for i in range(200)]
    moved = sum(a != b for t in topics for a, b in zip(assign(t, 12, [0, 1, 2]), assign(t, 12, [0, 1, 2, 3])))
    assert 0.25 <= moved / (12 * len(topics)) <= 0.35
    assert all(Counter(assign(t, 12, [0, 1, 2, 3])) == Counter({0: 3, 1: 3, 2: 3, 3: 3}) for t in topics)


def test_no_live_broker_no_owners():
    assert assign("orders", 3, []) == []


def test_a_brokers_owners_follow_the_live_brokers_the_partition_count_and_the_overrides():
    """Ownership answers Metadata's per-partition question from one assignment per change."""
    import uuid
    from types import SimpleNamespace

    from kgate.gateway.ownership import Ownership
    from kgate.metadata.cluster import Topic

    broker = SimpleNamespace(cluster=SimpleNamespace(brokers={0: None, 1: None}, placements={}))
    ownership = Ownership(broker)
    topic = Topic("t", uuid.uuid4(), 6)
    assert ownership.owners(topic) == assign("t", 6, [0, 1])
    broker.cluster.brokers = {1: None, 2: None}
    assert ownership.owners(topic) == assign("t", 6, [1, 2])
    assert ownership.owners(Topic("t", topic.topic_id, 9)) == assign("t", 9, [1, 2])
    hashed = ownership.owners(topic)[0]
    broker.cluster.placements = {"t": {0: 3 - hashed}}
    assert ownership.owners(topic)[0] == 3 - hashed
