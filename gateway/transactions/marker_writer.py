"""Where a transaction's marker is written: by the partition's one writer (DESIGN rule 5).

Appended here when this broker serves the partition, else sent to its owner as
WriteTxnMarkers (``marker_sender``). A marker appended to a ``__consumer_offsets``
partition also tells that partition's group shard to count or drop the producer's
transactional offsets.
"""
from collections.abc import Callable, Mapping

from kgate.metadata.cluster import BrokerInfo, Topic
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.clock import Clock
from ..groups import OFFSETS_TOPIC
from ..partition import Partition
from ..peer_links import PeerLinks
from .marker_delivery import Marker
from .marker_sender import send_marker


class BrokerMarkerWriter:
    def __init__(self, node_id: int, partitions: Mapping[tuple[str, int], Partition],
                 topics: Callable[[], Mapping[str, Topic]], leader: Callable[[Topic, int], BrokerInfo | None],
                 peers: Callable[[], PeerLinks], clock: Clock, offsets_marker: Callable[[int, int, bool], None]):
        self.node_id = node_id
        self.partitions = partitions
        self.topics = topics
        self.leader = leader
        self.peers = peers
        self.clock = clock
        # (offsets partition, producer id, commit): the group shard there ends the producer's offsets.
        self.offsets_marker = offsets_marker

    async def write(self, topic: str, index: int, marker: Marker) -> None:
        known = self.topics().get(topic)
        if known is None:
            return
        partition = self.partitions.get((topic, index))
        if partition is not None:
            await self.append_local(partition, marker)
            return
        owner = self.leader(known, index)
        if owner is None or owner.node_id == self.node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION, f"no broker serves {topic}-{index}")
        error = await send_marker(self.peers(), owner.node_id, marker.producer_id, marker.epoch, marker.commit,
                                  marker.coordinator_epoch, topic, index)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"broker {owner.node_id} answered {error.name}")

    async def append_local(self, partition: Partition, marker: Marker) -> None:
        """Append a marker to a partition this broker serves; return once it is durable."""
        durable = await partition.append_marker(marker.producer_id, marker.epoch, marker.commit,
                                                marker.coordinator_epoch, self.clock.now_ms())
        if partition.topic == OFFSETS_TOPIC:
            self.offsets_marker(partition.index, marker.producer_id, marker.commit)
        await durable
