"""The cluster as a coordinator sees it (``InternalTopics``): this broker, node 0, owns every
internal partition but those a test moves to broker 1."""
from kgate.metadata.cluster import BrokerInfo


class StandInCluster:
    node_id = 0

    def __init__(self, partitions: int = 1):
        self.partitions = partitions
        self.moved: set[int] = set()

    def partition_count(self, topic: str) -> int:
        return self.partitions

    def owner(self, topic: str, index: int) -> BrokerInfo:
        return BrokerInfo(1 if index in self.moved else 0, {}, None)

    async def create_internal_topic(self, topic: str, partitions: int) -> None:
        raise AssertionError("the internal topic exists")
