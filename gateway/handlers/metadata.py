"""Metadata: brokers, topics and partition leaders, with auto topic creation."""
import logging
import uuid

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataResponse

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.metadata.cluster import TopicExists, invalid_topic_name
from kgate.metadata.store import StoreUnavailable
from kgate.protocol.error_codes import ErrorCode

from ..partition_router import Client, Local, Refused, lead
from . import Context, handles

log = logging.getLogger(__name__)

R = MetadataResponse


@handles(ApiKey.Metadata)
async def metadata(ctx: Context, request):
    broker = ctx.broker
    version = ctx.version
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        # All topics: those the principal may describe (Kafka filters, without logging denials).
        wanted: list[tuple[str | None, uuid.UUID | None]] = [
            (name, None) for name in sorted(broker.topics)
            if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name, quietly=True)]
        auto_create = False
    else:
        wanted = [_resolved(ctx, topic) for topic in requested]
        auto_create = (request.allow_auto_topic_creation if version >= 4 else True) and \
            broker.settings["auto.create.topics.enable"]
    with_operations = version >= 8 and request.include_topic_authorized_operations
    brokers = await _brokers(ctx)  # before the leaders: it finds which zone brokers can be named
    topics = [await _describe(ctx, name, topic_id, auto_create, with_operations) for name, topic_id in wanted]
    authorizer = broker.authorizer
    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=rack)
                 for node_id, (host, port, rack) in brokers.items()],
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
        # kafka-python encodes None as Kafka's "not requested" marker (only bit 31 set).
        authorized_operations=authorizer.authorized_operations(ctx.connection, ResourceType.CLUSTER, CLUSTER_NAME)
        if 8 <= version <= 10 and request.include_cluster_authorized_operations else None,
    )


async def _brokers(ctx: Context) -> dict:
    """Every live broker (DESIGN rule 6), but to a client of a zone with live brokers only those:
    it is told its own zone's brokers as leaders of every partition, and a broker it is not
    told of is one it never opens a connection to (librdkafka and kafka-python ask any broker
    they know for metadata). Coordinators elsewhere stay reachable: FindCoordinator gives
    their address.

    A zone broker this broker cannot reach is left out (and out of the leaders ``lead``
    names): killed or cut off, it stays registered until its metadata session ends, and a
    client told only of it would have no broker left to ask again."""
    broker = ctx.broker
    live = broker.live_brokers(ctx.connection)
    zone = ctx.connection.zone
    if zone is None or ctx.connection.peer_broker is not None or not broker.followers.available:
        return live
    await broker.peers.probe(node_id for node_id, found in live.items()
                             if found[2] == zone and node_id != broker.node_id)
    own = {node_id: found for node_id, found in live.items() if found[2] == zone and broker.peers.reachable(node_id)}
    return own or live


def _resolved(ctx: Context, topic) -> tuple[str | None, uuid.UUID | None]:
    """A requested topic as (name, the id it was asked for by): v10+ may name it by id."""
    if topic.name is None and ctx.version >= 10:
        found = ctx.broker.topic_by_id(topic.topic_id)
        return (found.name if found else None), topic.topic_id
    return topic.name, None


async def _describe(ctx: Context, name, by_id, auto_create, with_operations):
    """One topic's answer. Asked by id, a topic the principal may not describe is refused
    with its name withheld and the id kept, as Kafka does: an id is not sensitive, a name is."""
    broker = ctx.broker
    if name is None:
        return R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=by_id,
                                       partitions=[], authorized_operations=None)
    operations = (broker.authorizer.authorized_operations(ctx.connection, ResourceType.TOPIC, name)
                  if with_operations else None)
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
        return R.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       name=name if by_id is None else None, topic_id=by_id, partitions=[],
                                       authorized_operations=None)
    topic = broker.topics.get(name)
    if topic is None:
        problem = invalid_topic_name(name)
        may_create = auto_create and (
            ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quietly=True)
            or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name))
        if problem or not may_create:
            return R.MetadataResponseTopic(
                error_code=ErrorCode.INVALID_TOPIC if problem else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                name=name, partitions=[], authorized_operations=operations)
        try:
            topic = await broker.create_topic(name, broker.settings["num.partitions"], {})
        except (TopicExists, StoreUnavailable):
            # Another broker made it a moment ago and this one has not learned it yet, or the
            # metadata store cannot be reached to make it: Kafka's answer for a topic being
            # created, which clients retry.
            topic = broker.topics.get(name)
            if topic is None:
                return R.MetadataResponseTopic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, partitions=[],
                                               authorized_operations=operations)
    return R.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=broker.is_internal(topic.name),
        partitions=[_partition(ctx, topic, index) for index in range(topic.partitions)],
        authorized_operations=operations)


def _partition(ctx: Context, topic, index):
    """The partition's leader as the partition router names it to this client
    (gateway/partition_router.py, ``lead``): none while it has no serving owner, and clients retry."""
    decision = lead(ctx.broker, Client.of(ctx.connection), topic, index)
    if isinstance(decision, Refused):
        return R.MetadataResponseTopic.MetadataResponsePartition(
            error_code=decision.error, partition_index=index, leader_id=-1, leader_epoch=-1,
            replica_nodes=[], isr_nodes=[], offline_replicas=[])
    if isinstance(decision, Local):
        node, epoch = ctx.broker.node_id, decision.partition.leader_epoch
    else:
        # As that broker published it (gateway/epoch_book.py): -1 from a zone's broker, which
        # names itself for a partition owned elsewhere, and from an owner still opening it.
        node = decision.broker
        epoch = ctx.broker.epoch_book.epoch(node, topic.topic_id, index)
    return R.MetadataResponseTopic.MetadataResponsePartition(
        error_code=ErrorCode.NONE, partition_index=index, leader_id=node, leader_epoch=epoch,
        replica_nodes=[node], isr_nodes=[node], offline_replicas=[])

