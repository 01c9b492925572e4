"""Two brokers' epoch books over one embedded metadata store: what one broker opens, the
other names with its epoch, and forgets when it is closed or the broker goes; a burst of
openings is a few writes."""
import asyncio
import uuid

from kgate.gateway.epoch_book import EpochBook
from kgate.metadata import serving
from kgate.metadata.cluster import Topic
from kgate.metadata.events import Event, EventManager
from kgate.metadata.stores.embedded import EmbeddedMetadataStore


class CountingStore(EmbeddedMetadataStore):
    def __init__(self, path):
        super().__init__(path)
        self.writes = 0

    async def set(self, path, data, version):
        self.writes += path.startswith(serving.SERVING)
        return await super().set(path, data, version)

    async def create(self, path, data, ephemeral=False, make_parents=True):
        self.writes += path.startswith(serving.SERVING)
        return await super().create(path, data, ephemeral, make_parents)


async def until(condition, what, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


async def books(tmp_path):
    store = CountingStore(str(tmp_path / "metadata.db"))
    made = []
    for node_id in (1, 2):
        events = EventManager()
        book = EpochBook(store, node_id)
        events.on(Event.SERVING, book.refresh)
        events.start()
        book.follow([1, 2], events)
        made.append(book)
    return store, made


async def test_what_one_broker_opens_the_other_names_with_its_epoch_until_it_is_closed(tmp_path):
    store, (one, two) = await books(tmp_path)
    topic = Topic("t", uuid.uuid4(), 4)
    assert two.epoch(1, topic.topic_id, 0) == -1
    one.opened(topic, 0, 3)
    one.opened(topic, 1, 0)
    await until(lambda: (two.epoch(1, topic.topic_id, 0), two.epoch(1, topic.topic_id, 1)) == (3, 0),
                "broker 2 to learn broker 1's epochs")
    assert two.epoch(2, topic.topic_id, 0) == -1, "broker 2 does not own it"
    assert one.epoch(1, topic.topic_id, 0) == -1, "a broker's own partitions are answered from the partition"
    one.closed("t", 0)
    await until(lambda: two.epoch(1, topic.topic_id, 0) == -1, "broker 2 to learn it was closed")
    assert two.epoch(1, topic.topic_id, 1) == 0


async def test_a_burst_of_openings_is_a_few_writes_and_a_departed_broker_names_nothing(tmp_path):
    store, (one, two) = await books(tmp_path)
    topic = Topic("t", uuid.uuid4(), 300)
    for index in range(300):
        one.opened(topic, index, 1)
        if index % 50 == 0:
            await asyncio.sleep(0)  # openings finish one by one on the event loop
    await until(lambda: all(two.epoch(1, topic.topic_id, i) == 1 for i in range(300)), "all 300 published")
    assert store.writes <= 3, store.writes
    await store.delete(serving.path(1))  # the node goes with broker 1's session
    await until(lambda: two.epoch(1, topic.topic_id, 0) == -1, "broker 2 to forget broker 1's epochs")
    one.close()
