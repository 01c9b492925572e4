"""What each broker serves, at which leader epoch: so that any broker's Metadata names a
partition's leader epoch, as any Kafka broker's metadata image does.

A partition's epoch history is in ``/leader-epochs`` (metadata.cluster), which only its
owner reads. Each broker also keeps one ephemeral node, ``/serving/<broker id>`` =
``{"<topic id hex>": [[partition, epoch], ...]}``, the partitions it has opened and the
epoch it opened each at, and every broker watches the others'. One node per broker rather
than a watch per partition: brokers are few and partitions many, and a failover's
hundreds of newly opened partitions go out in a few writes. The node ends with its broker's
session, as its claims do. (A store caps a node's size: ZooKeeper's default 1 MiB is some
60,000 partitions on one broker.)
"""
import json
import uuid
from collections.abc import Mapping

from .store import MetadataStore, put

SERVING = "/serving"

# (topic id, partition) -> the leader epoch its owner opened it at
Epochs = Mapping[tuple[uuid.UUID, int], int]


def path(broker_id: int) -> str:
    return f"{SERVING}/{broker_id}"


def encode(epochs: Epochs) -> bytes:
    by_topic: dict[str, list[list[int]]] = {}
    for (topic_id, index), epoch in sorted(epochs.items()):
        by_topic.setdefault(topic_id.hex, []).append([index, epoch])
    return json.dumps(by_topic, separators=(",", ":")).encode()


def decode(data: bytes) -> dict[tuple[uuid.UUID, int], int]:
    return {(uuid.UUID(hex=topic_id), index): epoch
            for topic_id, pairs in json.loads(data).items() for index, epoch in pairs}


async def publish(store: MetadataStore, broker_id: int, epochs: Epochs) -> None:
    """Write this broker's node, created in its current session when missing (it went with
    an expired one)."""
    await put(store, path(broker_id), encode(epochs), ephemeral=True)


async def read(store: MetadataStore, broker_id: int) -> dict[tuple[uuid.UUID, int], int]:
    """What the broker has published; nothing when it has no node (not started, or gone)."""
    node = await store.get(path(broker_id))
    return decode(node.data) if node is not None else {}
