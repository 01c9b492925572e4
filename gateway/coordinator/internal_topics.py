"""What a coordinator needs of the cluster: its internal topic's size and its partitions' owners.

The broker implements it; a coordinator sees nothing else of the cluster, so its
placement answers (FindCoordinator, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
are tested against a stand-in cluster of a few lines.
"""
from typing import Protocol

from kgate.metadata.cluster import BrokerInfo

# Internal topics keep every key's last value forever, in the format their coordinators replay.
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
                          "kgate.entry.format": "kafka"}


class InternalTopics(Protocol):
    node_id: int

    def partition_count(self, topic: str) -> int | None:
        """The topic's partitions, None while it does not exist."""

    def owner(self, topic: str, index: int) -> BrokerInfo | None:
        """The live broker that serves the partition."""

    async def create_internal_topic(self, topic: str, partitions: int) -> None:
        """Create the internal topic, unless another broker did first."""
