"""The group coordinator: the groups' requests, run on the coordinator runtime's group shards.

Each ``__consumer_offsets`` partition this broker serves is a :class:`GroupShard`
that the runtime loads by replaying the partition, appends to, times and compacts.
This front finds a request's shard (by ``abs(java_hash(group id)) % partitions``),
runs the shard's rule there and answers when the runtime says the records are
durable; a JoinGroup or SyncGroup that parks is answered when a later step releases it.
"""
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING

from kgate.metadata.cluster import BrokerInfo
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator import Clock, CoordinatorRuntime, PartitionWriter
from ..coordinator.internal_topics import InternalTopics
from .assignors import assignor_name
from .consumer_machine import Heartbeat, HeartbeatReply
from .effects import JoinResult
from .group import Group
from .machine import JoinRequest
from .modern_group import CommittedPartition
from .placement import partition_for
from .records import CommittedOffset
from .shard import GroupConfig, GroupShard, Settling, Topics
from .share_machine import ShareHeartbeat, ShareHeartbeatReply
from .streams_machine import StreamsHeartbeat, StreamsHeartbeatReply

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's key and value strings carry an int16 length, so no longer group id can be stored.
MAX_GROUP_ID_BYTES = 32767


class GroupCoordinator:
    def __init__(self, settings: "Settings", cluster: InternalTopics, writer: PartitionWriter, clock: Clock,
                 topics: Callable[[], Topics], internal: Callable[[str], bool],
                 configured: Callable[[str, str], int | None] = lambda _group, _name: None,
                 share_member_gone: Callable[[str, str], Awaitable[None]] | None = None):
        """``configured(group, name)``: a number the group's own configs set (gateway/group_configs.py), or None."""
        self.cluster = cluster
        self.num_partitions = settings["offsets.topic.num.partitions"]
        self.max_metadata_bytes = settings["offset.metadata.max.bytes"]
        self.consumer_heartbeat_ms = settings["group.consumer.heartbeat.interval.ms"]
        self.share_heartbeat_default_ms = settings["group.share.heartbeat.interval.ms"]
        self.streams_heartbeat_default_ms = settings["group.streams.heartbeat.interval.ms"]
        self._configured = configured
        config = GroupConfig(
            min_session_ms=settings["group.min.session.timeout.ms"],
            max_session_ms=settings["group.max.session.timeout.ms"],
            initial_delay_ms=settings["group.initial.rebalance.delay.ms"], max_size=settings["group.max.size"],
            consumer_session_ms=settings["group.consumer.session.timeout.ms"],
            consumer_heartbeat_ms=self.consumer_heartbeat_ms,
            consumer_session_of=lambda group_id: configured(group_id, "consumer.session.timeout.ms"),
            consumer_assignors=consumer_assignors(settings["group.consumer.assignors"]),
            consumer_max_size=settings["group.consumer.max.size"],
            migration_policy=settings["group.consumer.migration.policy"],
            share_session_ms=settings["group.share.session.timeout.ms"],
            share_max_size=settings["group.share.max.size"],
            share_session_of=lambda group_id: configured(group_id, "share.session.timeout.ms"),
            share_member_gone=share_member_gone,
            streams_session_ms=settings["group.streams.session.timeout.ms"],
            streams_max_size=settings["group.streams.max.size"],
            streams_standby_replicas=settings["group.streams.num.standby.replicas"],
            streams_session_of=lambda group_id: configured(group_id, "streams.session.timeout.ms"),
            streams_standby_of=lambda group_id: configured(group_id, "streams.num.standby.replicas"),
            retention_ms=settings["offsets.retention.minutes"] * 60_000,
            retention_check_ms=settings["offsets.retention.check.interval.ms"])
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, writer, clock, lambda index: GroupShard(index, config, topics, internal),
            settings["kgate.offsets.compaction.min.records"])

    # -- start-up, loading and placement -----------------------------------------------------

    async def start(self) -> None:
        """Create the offsets topic if the cluster has none; partitions load as they are gained."""
        if self.cluster.partition_count(OFFSETS_TOPIC) is None:
            await self.cluster.create_internal_topic(OFFSETS_TOPIC, self.num_partitions)
        self.num_partitions = self.cluster.partition_count(OFFSETS_TOPIC) or self.num_partitions

    async def close(self) -> None:
        await self.runtime.close()

    async def gain(self, index: int) -> None:
        """Serve the groups of offsets partition ``index``, which this broker now owns: replay it."""
        await self.runtime.load(index)

    def lose(self, index: int) -> None:
        """Stop serving the groups of offsets partition ``index``: its new owner replays them."""
        self.runtime.unload(index)
        log.debug("group coordinator lost %s-%d", OFFSETS_TOPIC, index)

    def heartbeat_ms(self, group_id: str) -> int:
        """The heartbeat interval a consumer group's members are told: the group's own, or the broker's."""
        return self._configured(group_id, "consumer.heartbeat.interval.ms") or self.consumer_heartbeat_ms

    def share_heartbeat_ms(self, group_id: str) -> int:
        """The heartbeat interval a share group's members are told: the group's own, or the broker's."""
        return self._configured(group_id, "share.heartbeat.interval.ms") or self.share_heartbeat_default_ms

    def streams_heartbeat_ms(self, group_id: str) -> int:
        """The heartbeat interval a streams group's members are told: the group's own, or the broker's."""
        return self._configured(group_id, "streams.heartbeat.interval.ms") or self.streams_heartbeat_default_ms

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_of(self, group_id: str) -> BrokerInfo | None:
        """The live broker owning the group's offsets partition (its coordinator), if any."""
        if self.cluster.partition_count(OFFSETS_TOPIC) is None:
            return None
        return self.cluster.owner(OFFSETS_TOPIC, self.partition_of(group_id))

    def check_group_id(self, group_id: str | None, allow_empty: bool) -> int:
        """Kafka's rule: only the offset and admin APIs accept an empty group id. The group's partition."""
        if group_id is None or (not group_id and not allow_empty) or len(group_id.encode()) > MAX_GROUP_ID_BYTES:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id is empty or too long")
        index = self.partition_of(group_id)
        if not self.runtime.owns(index):
            owner = self.coordinator_of(group_id)
            if owner is not None and owner.node_id == self.cluster.node_id:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this group")
        return index

    @property
    def groups(self) -> Mapping[str, Group]:
        """Every group this broker coordinates."""
        return {group_id: group for shard in self.runtime.shards.values() for group_id, group in shard.groups.items()}

    # -- the machines' requests ------------------------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinResult:
        index = self.check_group_id(request.group_id, allow_empty=False)
        return await self._settle(index, lambda shard, now: shard.settle(shard.machine.join(now, request)))

    async def sync(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: dict[str, bytes]) -> tuple[ErrorCode, bytes]:
        index = self.check_group_id(group_id, allow_empty=False)
        return await self._settle(index, lambda shard, now: shard.settle(shard.machine.sync(
            now, group_id, generation, member_id, group_instance_id, protocol_type, protocol, assignments)))

    async def consumer_heartbeat(self, request: Heartbeat) -> HeartbeatReply:
        """ConsumerGroupHeartbeat (KIP-848): answered once the records it changed are durable."""
        index = self.check_group_id(request.group_id, allow_empty=False)
        return await self._settle(index, lambda shard, now: shard.settle(
            shard.consumers.heartbeat(now, request, shard.topics())))

    async def share_heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatReply:
        """ShareGroupHeartbeat (KIP-932): answered once the records it changed are durable."""
        index = self.check_group_id(request.group_id, allow_empty=True)  # an empty id is INVALID_REQUEST there
        return await self._settle(index, lambda shard, now: shard.settle(
            shard.shares.heartbeat(now, request, shard.topics())))

    async def streams_heartbeat(self, request: StreamsHeartbeat) -> StreamsHeartbeatReply:
        """StreamsGroupHeartbeat (KIP-1071): answered once the records it changed are durable."""
        index = self.check_group_id(request.group_id, allow_empty=True)  # an empty id is INVALID_REQUEST there
        return await self._settle(index, lambda shard, now: shard.settle(
            shard.streams.heartbeat(now, request, shard.topics())))

    def check_share_offsets_alterable(self, group_id: str) -> None:
        """KafkaError unless ``group_id`` is an empty share group coordinated here."""
        index = self.check_group_id(group_id, allow_empty=False)
        self.runtime.shard(index).shares.check_offsets_alterable(group_id)

    async def prepare_share_offsets_alter(self, group_id: str) -> None:
        """KafkaError unless ``group_id`` is an empty share group coordinated here, or no group
        at all: then an empty share group is made (and stored) for its offsets to be set."""
        index = self.check_group_id(group_id, allow_empty=False)
        await self._settle(index, lambda shard, now: shard.settle(shard.shares.prepare_offsets_alter(group_id)))

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        index = self.check_group_id(group_id, allow_empty=False)
        settling, _ = self.runtime.run(index, lambda shard, now: shard.settle(
            shard.machine.heartbeat(now, group_id, generation, member_id, group_instance_id)))
        return settling.reply

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Remove members given as ``(member id, group instance id)``; one error per member. Answered
        once the records it wrote are durable (classic members of a consumer group leaving)."""
        index = self.check_group_id(group_id, allow_empty=False)
        return await self._settle(index, lambda shard, now: shard.settle(shard.machine.leave(now, group_id, leaving)))

    def check_commit(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                     partitions: Collection[CommittedPartition] = ()) -> ErrorCode:
        """Whether this member may commit ``partitions`` (topic name, id, index) for this generation
        (Kafka's checks, in Kafka's order)."""
        index = self.check_group_id(group_id, allow_empty=True)
        settling, _ = self.runtime.run(index, lambda shard, now: shard.settle(shard.machine.check_commit(
            now, group_id, generation, member_id, group_instance_id, partitions)))
        return settling.reply

    async def _settle(self, index: int, operation):
        """A request's reply: once the records it hangs on are durable, and its parked
        future (if it parked) is answered."""
        settling: Settling
        settling, durable = self.runtime.run(index, operation)
        if settling.report is not None:
            try:
                await durable
            except Exception:
                log.exception("group %s: storing generation %d failed", settling.report.group_id,
                              settling.report.value.generation)
                stored = False
            else:
                stored = True
            if self.runtime.owns(index):
                self.runtime.run(index, lambda shard, now: shard.assignment_stored(now, settling, stored))
        elif settling.waits_for_records:
            await durable
        return settling.reply if settling.parked is None else await settling.parked

    # -- offsets ------------------------------------------------------------------------------

    async def commit(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Store already-checked offsets; returns once they are durable."""
        await self.runtime.write(self.partition_of(group_id), lambda shard, now: shard.commit(group_id, offsets))

    async def commit_in_transaction(self, group_id: str, producer_id: int, producer_epoch: int,
                                    offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """TxnOffsetCommit: store the offsets as the producer's transactional records; the group
        sees them only when the transaction's COMMIT marker reaches this partition."""
        await self.runtime.write(self.partition_of(group_id), lambda shard, now: shard.commit(
            group_id, offsets, (producer_id, producer_epoch)))

    def transaction_ended(self, index: int, producer_id: int, commit: bool) -> None:
        """A marker was appended to offsets partition ``index``: its producer's offsets count, or are dropped."""
        self.runtime.transaction_ended(index, producer_id, commit)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> dict:
        """Committed offsets of ``partitions`` (None: every partition the group has one for)."""
        index = self.check_group_id(group_id, allow_empty=True)
        group = self.runtime.shard(index).groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        """OffsetDelete: per partition NONE or GROUP_SUBSCRIBED_TO_TOPIC."""
        index = self.check_group_id(group_id, allow_empty=True)
        return await self.runtime.write(index, lambda shard, now: shard.delete_offsets(group_id, partitions))

    # -- admin --------------------------------------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        index = self.check_group_id(group_id, allow_empty=True)
        return self.runtime.shard(index).groups.get(group_id)

    def list_groups(self) -> list[Group]:
        """The groups this broker coordinates (ListGroups asks every broker, as with Kafka)."""
        return list(self.groups.values())

    async def delete_group(self, group_id: str) -> ErrorCode:
        index = self.check_group_id(group_id, allow_empty=True)
        error = await self.runtime.write(index, lambda shard, now: shard.delete_group(group_id))
        if error == ErrorCode.NONE and self.runtime.owns(index):
            self.runtime.run(index, lambda shard, now: shard.forget_group(group_id))
        return error

    async def forget_topic(self, topic: str) -> None:
        """Drop every group's offsets for a deleted topic (tombstones in the log)."""
        for index in list(self.runtime.shards):
            await self.runtime.write(index, lambda shard, now: shard.forget_topic(topic))


def consumer_assignors(setting: str) -> list[str]:
    """``group.consumer.assignors``: assignor names (or Kafka's class names), in preference order."""
    names = [assignor_name(name) for name in setting.split(",") if name.strip()]
    return [name for name in names if name is not None]
