"""Ownership's reconcile against a stand-in broker (its cluster state and partition opening
are the layer below): the partitions it gains are opened side by side, no more than
OPEN_CONCURRENCY at once, and one that fails is raised only once every other has ended; and
the claims count as lost from the moment a session expiry is reported until its partitions
are dropped."""
import asyncio
import uuid

import pytest

from kgate.gateway.ownership import OPEN_CONCURRENCY, Ownership
from kgate.metadata.cluster import Topic
from kgate.metadata.events import Event, EventManager
from kgate.metadata.store import Session


class Opening:
    """The broker's side of gaining: claims always granted, each opening held until released."""

    node_id = 0
    registration_wait = 0.0

    def __init__(self, failing: int | None = None):
        self.partitions: dict = {}
        self.offline: dict = {}
        self.damaged: dict = {}
        self.cluster = self
        self.brokers = {0: None}
        self.placements: dict = {}
        self.failing = failing
        self.open_now = 0
        self.most_open = 0
        self.go = asyncio.Event()
        self.share_leaders = self
        self.dropped: list[tuple[str, int]] = []  # share-partitions' live state let go with their partition
        self.epoch_book = self
        self.published: dict[tuple[str, int], int] = {}  # what other brokers are told this one serves
        self.events = EventManager()  # not started: what is posted stays queued

    def drop(self, name, index):
        self.dropped.append((name, index))

    def opened(self, topic, index, epoch):
        self.published[(topic.name, index)] = epoch

    def closed(self, name, index):
        self.published.pop((name, index), None)

    async def claim(self, topic, index, broker_id):
        return True

    async def release(self, *args):
        pass

    async def new_epoch(self, topic, index, start_offset):
        return [[0, 0]]

    async def open_partition(self, topic, index):
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            await self.go.wait()
            if index == self.failing:
                raise RuntimeError(f"partition {index} could not be opened")
            return Partition()
        finally:
            self.open_now -= 1


class Partition:
    class ledger:
        next_offset = 0

        @staticmethod
        def abandon():
            pass

    leader_epoch = 0


async def reconcile_while_released(broker, partitions):
    ownership = Ownership(broker)  # type: ignore[arg-type]
    reconcile = asyncio.ensure_future(ownership.reconcile(Topic("t", uuid.uuid4(), partitions), summary=False))
    while broker.open_now < min(partitions, OPEN_CONCURRENCY):
        await asyncio.sleep(0)
    broker.go.set()
    return await reconcile


async def test_partitions_are_opened_side_by_side_within_the_bound():
    broker = Opening()
    gained, lost = await asyncio.wait_for(reconcile_while_released(broker, 3 * OPEN_CONCURRENCY), 5)
    assert (gained, lost) == (3 * OPEN_CONCURRENCY, 0)
    assert broker.most_open == OPEN_CONCURRENCY
    assert len(broker.partitions) == 3 * OPEN_CONCURRENCY


async def test_partitions_not_yet_opening_when_the_broker_list_changes_are_left_to_its_reconcile():
    broker = Opening()
    ownership = Ownership(broker)  # type: ignore[arg-type]
    reconcile = asyncio.ensure_future(ownership.reconcile(Topic("t", uuid.uuid4(), 3 * OPEN_CONCURRENCY),
                                                          summary=False))
    while broker.open_now < OPEN_CONCURRENCY:
        await asyncio.sleep(0)
    broker.events.post(Event.BROKERS)
    broker.go.set()
    gained, lost = await asyncio.wait_for(reconcile, 5)
    assert (gained, lost) == (OPEN_CONCURRENCY, 0) and len(broker.partitions) == OPEN_CONCURRENCY
    assert broker.most_open == OPEN_CONCURRENCY


async def test_a_reconcile_of_every_topic_leaves_the_rest_to_a_newer_broker_list():
    broker = Opening()
    broker.go.set()
    broker.topics = {name: Topic(name, uuid.uuid4(), 2) for name in ("a", "b")}
    ownership = Ownership(broker)  # type: ignore[arg-type]
    broker.events.post(Event.BROKERS)
    await ownership.reconcile_all()
    assert broker.partitions == {}
    broker.events = EventManager()
    await ownership.reconcile_all()
    assert sorted(broker.partitions) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


async def test_a_partition_that_fails_to_open_is_raised_after_the_others_are_served():
    broker = Opening(failing=2)
    with pytest.raises(RuntimeError, match="partition 2"):
        await asyncio.wait_for(reconcile_while_released(broker, 6), 5)
    assert broker.open_now == 0
    assert sorted(index for _, index in broker.partitions) == [0, 1, 3, 4, 5]


async def test_claims_count_as_lost_from_the_expiry_report_until_its_partitions_are_dropped():
    """The report comes from the store's thread at once; the drop waits its turn in the event
    queue, behind events that may be retrying against the store. Between the two, the
    partitions may be another broker's already: nothing of them is served."""
    broker = Opening()
    broker.go.set()
    ownership = Ownership(broker)  # type: ignore[arg-type]
    await ownership.reconcile(Topic("t", uuid.uuid4(), 3), summary=False)
    assert not ownership.claims_lost and len(broker.partitions) == 3
    assert broker.published == {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    ownership.session_reported(Session.EXPIRED)
    ownership.session_reported(Session.CONNECTED)  # a new session, the expiry still unhandled
    assert ownership.claims_lost and len(broker.partitions) == 3
    await ownership.session_changed(Session.EXPIRED)
    assert not ownership.claims_lost and broker.partitions == {} and broker.published == {}
    assert sorted(broker.dropped) == [("t", 0), ("t", 1), ("t", 2)]


async def test_one_drop_covers_every_expiry_reported_before_it():
    """The event queue merges an expiry report into the one still waiting: two expiries 11 s
    apart were dropped once, and a count of reports left the claims lost for good, every
    partition refused, reads included (fault run seed 12: the drain read nothing)."""
    broker = Opening()
    broker.go.set()
    ownership = Ownership(broker)  # type: ignore[arg-type]
    await ownership.reconcile(Topic("t", uuid.uuid4(), 3), summary=False)
    ownership.session_reported(Session.EXPIRED)
    ownership.session_reported(Session.EXPIRED)  # merged into the event still waiting
    await ownership.session_changed(Session.EXPIRED)
    assert not ownership.claims_lost and broker.partitions == {}
    ownership.session_reported(Session.EXPIRED)  # a later one waits for its own event
    assert ownership.claims_lost
    await ownership.session_changed(Session.EXPIRED)
    assert not ownership.claims_lost
