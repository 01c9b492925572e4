"""KIP-1071's streams groups: StreamsGroupHeartbeat and StreamsGroupDescribe.

The rules live in ``gateway.groups.streams_machine``; this module translates the wire, checks
Kafka's ACLs (Read on the group; Describe on every topic the topology names; Create on the
cluster or on each internal topic the broker is to create for the group) and creates the
internal topics the machine found missing, with the configs the application asked for.
"""
import logging

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.metadata.cluster import TopicExists
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import StreamsGroupDescribeResponse, StreamsGroupHeartbeatResponse

from ..config import ConfigError
from ..groups.records import StreamsGroupTopologyValue
from ..groups.streams_group import Assignment, TaskOffsets, tasks_of
from ..groups.streams_machine import StreamsHeartbeat, StreamsHeartbeatReply
from ..groups.streams_topology import MISSING_INTERNAL_TOPICS
from ..topic_configs import check as check_topic_config
from . import Context, handles
from .groups import describe_kind

log = logging.getLogger(__name__)
NOT_REQUESTED, NOT_STORED = 0, 1  # StreamsGroupDescribe's TopologyDescriptionStatus
R = StreamsGroupHeartbeatResponse
E = R.EndpointToPartitions


@handles(ApiKey.StreamsGroupHeartbeat)
async def streams_group_heartbeat(ctx: Context, request):
    topology = _topology(request.topology)
    heartbeat = StreamsHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        client_id=ctx.header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        topology=topology, owned=_owned(request), process_id=request.process_id,
        user_endpoint=None if request.user_endpoint is None else (request.user_endpoint.host,
                                                                  request.user_endpoint.port),
        client_tags=None if request.client_tags is None else {t.key: t.value for t in request.client_tags},
        endpoint_epoch=request.endpoint_information_epoch, shutdown_application=request.shutdown_application,
        task_offsets=_offsets(request.task_offsets), task_end_offsets=_offsets(request.task_end_offsets))
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        if topology is not None and not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)
                                            for name in _named_topics(topology)):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        reply = await ctx.broker.groups.streams_heartbeat(heartbeat)
    except KafkaError as exc:
        return _answer(ctx, request.group_id, StreamsHeartbeatReply(exc.code, exc.message))
    if reply.create:
        reply.status = [s for s in reply.status if s[0] != MISSING_INTERNAL_TOPICS] + await _create(ctx, reply.create)
    return _answer(ctx, request.group_id, reply)


def _topology(topology):
    """The request's topology as the group's record holds it (the same fields)."""
    if topology is None:
        return None
    V = StreamsGroupTopologyValue
    S = V.Subtopology

    def info(t):
        return S.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                           topic_configs=[S.TopicInfo.KeyValue(key=c.key, value=c.value) for c in t.topic_configs])
    return V(epoch=topology.epoch, subtopologies=[S(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        source_topic_regex=list(s.source_topic_regex),
        state_changelog_topics=[info(t) for t in s.state_changelog_topics],
        repartition_sink_topics=list(s.repartition_sink_topics),
        repartition_source_topics=[info(t) for t in s.repartition_source_topics],
        copartition_groups=[S.CopartitionGroup(source_topics=list(g.source_topics),
                                               source_topic_regex=list(g.source_topic_regex),
                                               repartition_source_topics=list(g.repartition_source_topics))
                            for g in s.copartition_groups]) for s in topology.subtopologies])


def _named_topics(topology) -> set[str]:
    return {name for s in topology.subtopologies
            for name in (*s.source_topics, *s.repartition_sink_topics,
                         *(t.name for t in (*s.state_changelog_topics, *s.repartition_source_topics)))}


def _offsets(reported) -> TaskOffsets | None:
    if reported is None:
        return None
    offsets: TaskOffsets = {}
    for task in reported:
        offsets.setdefault(task.subtopology_id, {})[task.partition] = task.offset
    return offsets


def _described_offsets(offsets: TaskOffsets) -> list:
    T = StreamsGroupDescribeResponse.DescribedGroup.Member.TaskOffset
    return [T(subtopology_id=subtopology, partition=partition, offset=offset)
            for subtopology, by_partition in sorted(offsets.items())
            for partition, offset in sorted(by_partition.items())]


def _owned(request) -> Assignment | None:
    kinds = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if all(kind is None for kind in kinds):
        return None
    return Assignment(*(tasks_of(kind) for kind in kinds))


async def _create(ctx: Context, missing: dict[str, tuple[int, dict[str, str]]]) -> list[tuple[int, str]]:
    """Create the internal topics a group lacks, as Kafka does for a heartbeat; the status
    that stays: topics still missing, and those the principal may not create."""
    broker = ctx.broker
    may_create_any = ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quietly=True)
    refused = []
    for name, (partitions, asked) in sorted(missing.items()):
        if not (may_create_any or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)):
            refused.append(name)
            continue
        configs = {}
        for key, value in asked.items():
            try:
                configs[key] = check_topic_config(key, value, broker.settings)
            except ConfigError as exc:
                log.warning("internal topic %s: config %s=%s left out: %s", name, key, value, exc)
        try:
            await broker.create_topic(name, partitions, configs)
        except TopicExists:
            pass
    status = [(MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {', '.join(sorted(missing))}")]
    if refused:
        status.append((MISSING_INTERNAL_TOPICS, f"Unauthorized to CREATE on topics {', '.join(refused)}."))
    return status


def _answer(ctx: Context, group_id: str, reply: StreamsHeartbeatReply):
    """Kafka's answer: an error leaves the fields at their defaults; a member that left is
    given no interval."""
    failed = reply.error != ErrorCode.NONE
    live = not failed and reply.member_epoch >= 0
    interval = ctx.broker.groups.streams_heartbeat_ms(group_id) if live else 0
    settings = ctx.broker.settings
    tasks = ({"active_tasks": None, "standby_tasks": None, "warmup_tasks": None} if reply.assignment is None
             else reply.assignment.fields(R.TaskIds))
    return R(throttle_time_ms=0, error_code=reply.error, error_message=reply.message,
             member_id=None if failed else reply.member_id, member_epoch=0 if failed else reply.member_epoch,
             heartbeat_interval_ms=interval, acceptable_recovery_lag_legacy=0,
             task_offset_interval_ms=settings["group.streams.task.offset.interval.ms"] if live else 0,
             acceptable_recovery_lag=settings["group.streams.acceptable.recovery.lag"] if live else -1,
             status=None if failed else [R.Status(status_code=code, status_detail=detail)
                                         for code, detail in reply.status],
             **tasks, endpoint_information_epoch=reply.endpoint_epoch,
             partitions_by_user_endpoint=None if reply.endpoints is None else [E(
                 user_endpoint=E.Endpoint(host=host, port=port), active_partitions=_partitions(active),
                 standby_partitions=_partitions(standby)) for (host, port), active, standby in reply.endpoints])


def _partitions(by_topic: dict[str, set[int]]) -> list:
    return [E.TopicPartition(topic=name, partitions=sorted(parts)) for name, parts in sorted(by_topic.items())
            if parts]


@handles(ApiKey.StreamsGroupDescribe)
async def streams_group_describe(ctx: Context, request):
    D = StreamsGroupDescribeResponse.DescribedGroup
    M = D.Member

    def described(group_id: str, streams, operations):
        topology = streams.topology
        return D(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state=streams.state,
            group_epoch=streams.epoch, assignment_epoch=streams.assignment_epoch,
            topology=None if topology is None else D.Topology(epoch=topology.epoch, subtopologies=None if streams.status
                                                              else [_described_subtopology(D, s, streams)
                                                                    for s in topology.subtopologies]),
            members=[M(member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                       client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                       process_id=m.process_id,
                       user_endpoint=None if m.user_endpoint is None else M.Endpoint(host=m.user_endpoint[0],
                                                                                     port=m.user_endpoint[1]),
                       client_tags=[M.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
                       task_offsets=_described_offsets(m.task_offsets),
                       task_end_offsets=_described_offsets(m.task_end_offsets),
                       assignment=M.Assignment(**m.assigned.fields(M.Assignment.TaskIds)),
                       target_assignment=M.Assignment(**streams.target.get(m.member_id, Assignment()).fields(
                           M.Assignment.TaskIds)),
                       is_classic=False)
                     for m in streams.members.values()],
            authorized_operations=operations, assignor_name="sticky",
            topology_description_status=NOT_STORED if ctx.version >= 1 and request.include_topology_description
            else NOT_REQUESTED)
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=describe_kind(
        ctx, request, D, lambda group: group.streams, "Group {} is not a streams group.", described))


def _described_subtopology(D, s, streams):
    """As configured: internal topics with the partition counts the group gives them."""
    T = D.Topology.Subtopology

    def info(t):
        return T.TopicInfo(name=t.name, partitions=streams.internal_partitions.get(t.name, t.partitions),
                           replication_factor=t.replication_factor,
                           topic_configs=[T.TopicInfo.KeyValue(key=c.key, value=c.value) for c in t.topic_configs])
    return T(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
             repartition_sink_topics=list(s.repartition_sink_topics),
             state_changelog_topics=[info(t) for t in s.state_changelog_topics],
             repartition_source_topics=[info(t) for t in s.repartition_source_topics])

