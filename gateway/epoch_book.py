"""Every partition's leader epoch, so that Metadata from any broker carries it.

Kafka's clients keep the highest leader epoch they have heard of each partition and ignore
a Metadata answer with an older one (KIP-320: Java's Metadata, librdkafka's leader
update), so a broker that has not caught up cannot send them back to a former leader. An
answer without an epoch (-1) turns that off: the client forgets what it knew and takes the
next answer whatever its age, and librdkafka checks its fetch position again (an
OffsetForLeaderEpoch round trip, fetching stopped) each time an epoch reappears. A broker
that did not own a partition used to answer -1 for it.

Each broker publishes the partitions it has opened with their epochs (metadata.serving)
and reads the others' as they change, through the event queue. A partition is named with
the epoch its leader published, or -1 while that leader has not published it yet (it is
still opening it): never an epoch paired with a leader that did not open it at that epoch.
"""
import asyncio
import logging
import uuid
from collections.abc import Iterable

from kgate.metadata import serving
from kgate.metadata.cluster import Topic
from kgate.metadata.events import Event, EventManager
from kgate.metadata.store import MetadataStore

log = logging.getLogger(__name__)

# Changes within this long of the first go out as one write: a broker opening hundreds of
# partitions at once (a failover, a start) writes its node a few times, not once for each.
PUBLISH_DELAY_SECONDS = 0.1
RETRY_SECONDS = 1.0


class EpochBook:
    def __init__(self, store: MetadataStore, node_id: int):
        self._store = store
        self._node_id = node_id
        # This broker's partitions: (topic name, partition) -> (topic id, epoch opened at).
        self._own: dict[tuple[str, int], tuple[uuid.UUID, int]] = {}
        # Other brokers' as last read: broker id -> (topic id, partition) -> epoch.
        self._others: dict[int, dict[tuple[uuid.UUID, int], int]] = {}
        self._watched: set[int] = set()
        self._due: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task | None = None
        self._failing = False
        self._closed = False

    def epoch(self, broker_id: int, topic_id: uuid.UUID, index: int) -> int:
        """The epoch ``broker_id`` opened the partition at; -1 when it has published none."""
        return self._others.get(broker_id, {}).get((topic_id, index), -1)

    # -- this broker's partitions ---------------------------------------------------------

    def opened(self, topic: Topic, index: int, epoch: int) -> None:
        self._own[(topic.name, index)] = (topic.topic_id, epoch)
        self._changed()

    def closed(self, name: str, index: int) -> None:
        if self._own.pop((name, index), None) is not None:
            self._changed()

    def _changed(self) -> None:
        if self._due is None and not self._closed:
            self._due = asyncio.get_running_loop().call_later(PUBLISH_DELAY_SECONDS, self._publish)

    def _publish(self) -> None:
        self._due = None
        if self._writing is not None and not self._writing.done():
            self._changed()  # after the write under way, which may predate the change
            return
        self._writing = asyncio.create_task(self._write(), name="publish-epochs")

    async def _write(self) -> None:
        epochs = {(topic_id, index): epoch for (_name, index), (topic_id, epoch) in self._own.items()}
        try:
            await serving.publish(self._store, self._node_id, epochs)
        except Exception as exc:  # noqa: BLE001 - the store out of reach: other brokers answer -1 meanwhile
            if not self._failing:
                log.warning("publishing this broker's leader epochs failed (%r); retrying every %.0f s",
                            exc, RETRY_SECONDS)
            self._failing = True
            asyncio.get_running_loop().call_later(RETRY_SECONDS, self._changed)
            return
        if self._failing:
            log.info("published this broker's leader epochs again")
        self._failing = False

    # -- other brokers' -------------------------------------------------------------------

    def follow(self, broker_ids: Iterable[int], events: EventManager) -> None:
        """Watch the node of each broker not watched yet (a watch outlives its broker, and
        serves it again if it comes back with the same id)."""
        for broker_id in broker_ids:
            if broker_id != self._node_id and broker_id not in self._watched:
                self._watched.add(broker_id)
                self._store.watch(serving.path(broker_id), events.poster(Event.SERVING, broker_id))
                events.post(Event.SERVING, broker_id)  # not every store's watch fires once when armed

    async def refresh(self, broker_id: int) -> None:
        """Read one broker's node again (the event handler)."""
        epochs = await serving.read(self._store, broker_id)
        if epochs:
            self._others[broker_id] = epochs
        else:
            self._others.pop(broker_id, None)

    def close(self) -> None:
        self._closed = True  # a retry still timed does nothing
        if self._due is not None:
            self._due.cancel()
        if self._writing is not None:
            self._writing.cancel()
