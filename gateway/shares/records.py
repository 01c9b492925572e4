"""The records the share coordinator keeps in ``__share_group_state``, as Kafka lays them out.

Key: int16 version 0 (ShareSnapshotKey), then group id, topic id and partition. Value:
ShareSnapshotValue, the share-partition's whole state: state epoch, start offset and the
in-flight window's state batches. kgate writes only snapshots, never Kafka's delta
records (ShareUpdateKey, version 1): the window is bounded by
``share.partition.max.record.locks``, so a snapshot stays small, and compaction by key
keeps one record per share-partition. A null value is a tombstone (the group was deleted).
"""
import base64
import uuid
from dataclasses import dataclass

from kafka.protocol.api_data import ApiData

from ..coordinator.record_codec import CorruptRecord as CorruptRecord  # what decode raises
from ..coordinator.record_codec import decoding, key_version, unknown_key_version
from . import schemas
from .partition_state import DeliveryState, SharePartitionState, StateBatch


class ShareSnapshotKey(ApiData, load_json=schemas):  # type: ignore[call-arg]  # kafka-python's untyped class keyword
    pass


class ShareSnapshotValue(ApiData, load_json=schemas):  # type: ignore[call-arg]  # kafka-python's untyped class keyword
    pass


SNAPSHOT_KEY_VERSION = 0
SNAPSHOT_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True, order=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """What places it on a partition of ``__share_group_state``: Kafka's ``group:topicId:partition``,
        the topic id in Kafka's URL-safe base64 without padding."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{topic}:{self.partition}"

    @classmethod
    def from_coordinator_key(cls, key: str) -> "SharePartitionKey | None":
        """The share-partition a FindCoordinator share key names, None if it is not one."""
        parts = (key or "").rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            return None
        group_id, topic, partition = parts
        try:
            topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4)))
            index = int(partition)
        except ValueError:
            return None
        return cls(group_id, topic_id, index) if index >= 0 else None


def key(share_key: SharePartitionKey) -> bytes:
    return ShareSnapshotKey(group_id=share_key.group_id, topic_id=share_key.topic_id,
                            partition=share_key.partition).encode(version=SNAPSHOT_KEY_VERSION)


def value(state: SharePartitionState, leader_epoch: int = 0, delivery_complete: int = -1) -> bytes:
    batches = [ShareSnapshotValue.StateBatch(first_offset=b.first, last_offset=b.last, delivery_state=int(b.state),
                                             delivery_count=b.delivery_count) for b in state.state_batches()]
    return ShareSnapshotValue(snapshot_epoch=0, state_epoch=state.state_epoch, leader_epoch=leader_epoch,
                              start_offset=state.start_offset, delivery_complete_count=delivery_complete,
                              state_batches=batches).encode(version=SNAPSHOT_VALUE_VERSION)


def decode(key_bytes: bytes,
           value_bytes: bytes | None) -> tuple[SharePartitionKey, SharePartitionState | None, int, int]:
    """The share-partition, its state (None: a tombstone), the leader epoch last stored with it and
    the delivery-complete count its leader last wrote."""
    with decoding():
        version = key_version(key_bytes)
        if version != SNAPSHOT_KEY_VERSION:
            raise unknown_key_version(version)
        k = ShareSnapshotKey.decode(key_bytes[2:], version=version, header=False)
        share_key = SharePartitionKey(k.group_id, k.topic_id, k.partition)
        if value_bytes is None:
            return share_key, None, -1, -1
        v = ShareSnapshotValue.decode(value_bytes)
        batches = [StateBatch(b.first_offset, b.last_offset, DeliveryState(b.delivery_state), b.delivery_count)
                   for b in v.state_batches or ()]
        state = SharePartitionState.restore(v.start_offset, v.state_epoch, batches, advance=False)
        return share_key, state, v.leader_epoch, v.delivery_complete_count
