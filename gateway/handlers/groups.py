"""Group membership and group admin: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe, and KIP-932's ShareGroupHeartbeat and ShareGroupDescribe.

The handlers translate between wire versions and the coordinator; the group protocol
itself lives in ``gateway.groups``.
"""
from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse
from kafka.protocol.metadata import FindCoordinatorResponse

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)

from ..groups import OFFSETS_TOPIC, JoinRequest
from ..groups.consumer_machine import Heartbeat
from ..groups.group import Group, GroupState
from ..groups.share_machine import ShareHeartbeat
from ..shares.coordinator import SHARE_STATE_TOPIC
from ..shares.records import SharePartitionKey
from ..transactions.coordinator import TRANSACTION_STATE_TOPIC
from . import Context, handles

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2


@handles(ApiKey.FindCoordinator)
async def find_coordinator(ctx: Context, request):
    if ctx.version < 4:
        key_type = request.key_type if ctx.version >= 1 else GROUP_KEY
        error, message, node_id, host, port = await _coordinator(ctx, key_type, request.key)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                       node_id=node_id, host=host, port=port)
    coordinators = []
    for key in request.coordinator_keys:
        error, message, node_id, host, port = await _coordinator(ctx, request.key_type, key)
        coordinators.append(FindCoordinatorResponse.Coordinator(
            key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)


async def _coordinator(ctx: Context, key_type: int, key: str) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port): a group's coordinator is the live owner of its
    ``__consumer_offsets`` partition, a transactional id's the owner of its ``__transaction_state``
    partition (the topic is created on the first such request, as Kafka does)."""
    broker = ctx.broker
    if key_type == TRANSACTION_KEY:
        if not key:
            return ErrorCode.INVALID_REQUEST, "empty transactional id", -1, "", -1
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
        await broker.transactions.ensure_topic()
        owner = broker.transactions.coordinator_of(key)
        placement = TRANSACTION_STATE_TOPIC, broker.transactions.partition_of(key)
    elif key_type == GROUP_KEY:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, key or ""):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
        owner = broker.groups.coordinator_of(key or "")
        placement = OFFSETS_TOPIC, broker.groups.partition_of(key or "")
    elif key_type == SHARE_KEY:  # a share-partition's state: asked by brokers and Kafka's tools
        if not ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, -1, "", -1
        share_key = SharePartitionKey.from_coordinator_key(key)
        if share_key is None:
            return ErrorCode.INVALID_REQUEST, f"{key!r} is not a share-partition key (group:topicId:partition)", \
                -1, "", -1
        await broker.shares.ensure_topic()
        owner = broker.shares.owner_of(share_key)
        placement = SHARE_STATE_TOPIC, broker.shares.partition_of(share_key)
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    zone = ctx.connection.zone
    if owner is not None and zone is not None and ctx.connection.peer_broker is None and owner.rack != zone:
        # A broker of the client's zone, which forwards the coordinator requests (gateway/handlers/forward.py).
        routed = broker.zone_broker(zone, *placement)
        if routed is not None:
            return _located(ctx, routed)
        if broker.followers.available:
            broker.metrics.zone_fallback(zone)
    return _located(ctx, owner.node_id if owner is not None else None)


def _located(ctx: Context, node_id: int | None) -> tuple[ErrorCode, str | None, int, str, int]:
    address = ctx.broker.live_brokers(ctx.connection).get(node_id) if node_id is not None else None
    if node_id is None or address is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no live broker owns the coordinator's partition", -1, "", -1
    return ErrorCode.NONE, None, node_id, address[0], address[1]


@handles(ApiKey.JoinGroup)
async def join_group(ctx: Context, request):
    version = ctx.version
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=version >= 4, skip_assignment_supported=version >= 9)
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        result = await ctx.broker.groups.join(join)
    except KafkaError as exc:
        return JoinGroupResponse(throttle_time_ms=0, error_code=exc.code, generation_id=-1, protocol_type=None,
                                 protocol_name=None if version >= 7 else "", leader="", skip_assignment=False,
                                 member_id=request.member_id, members=[])
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
        # Before v7 the protocol name is not nullable: errors carry an empty one.
        protocol_type=result.protocol_type, protocol_name=result.protocol if version >= 7 else (result.protocol or ""),
        leader=result.leader_id, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])


@handles(ApiKey.SyncGroup)
async def sync_group(ctx: Context, request):
    version = ctx.version
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        error, assignment = await ctx.broker.groups.sync(
            request.group_id, request.generation_id, request.member_id,
            request.group_instance_id if version >= 3 else None,
            request.protocol_type if version >= 5 else None, request.protocol_name if version >= 5 else None,
            {a.member_id: a.assignment for a in request.assignments})
    except KafkaError as exc:
        error, assignment = exc.code, b""
    group = ctx.broker.groups.describe(request.group_id) if error == ErrorCode.NONE else None
    return SyncGroupResponse(throttle_time_ms=0, error_code=error,
                             protocol_type=group.protocol_type if group is not None else None,
                             protocol_name=group.protocol if group is not None else None, assignment=assignment)


@handles(ApiKey.Heartbeat)
async def heartbeat(ctx: Context, request):
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        error = ctx.broker.groups.heartbeat(request.group_id, request.generation_id, request.member_id,
                                            request.group_instance_id if ctx.version >= 3 else None)
    except KafkaError as exc:
        error = exc.code
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


@handles(ApiKey.LeaveGroup)
async def leave_group(ctx: Context, request):
    batch = ctx.version >= 3
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in request.members] if batch else [(request.member_id, None)])
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        errors = await ctx.broker.groups.leave(request.group_id, leaving)
    except KafkaError as exc:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=exc.code, members=[])
    if not batch:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=errors[0], members=[])
    # v3+: the top-level error is for the request; members carry their own.
    return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, members=[
        LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
        for (m, i), e in zip(leaving, errors)])


@handles(ApiKey.DescribeGroups)
async def describe_groups(ctx: Context, request):
    coordinator = ctx.broker.groups
    authorizer = ctx.broker.authorizer
    described = []
    for group_id in request.groups:
        operations = (authorizer.authorized_operations(ctx.connection, ResourceType.GROUP, group_id)
                      if ctx.version >= 3 and request.include_authorized_operations else None)
        try:
            ctx.require(Operation.DESCRIBE, ResourceType.GROUP, group_id)
            group = coordinator.describe(group_id)
        except KafkaError as exc:  # Kafka's groupError: an unknown (empty) state
            described.append(_described(group_id, exc.code, ""))
            continue
        if group is None:
            # Kafka describes an unknown group as Dead, without an error.
            described.append(_described(group_id, ErrorCode.NONE, GroupState.DEAD.value, operations=operations))
            continue
        if _modern(group) is not None:
            described.append(_described(group_id, ErrorCode.GROUP_ID_NOT_FOUND, GroupState.DEAD.value,
                                        message=f"group {group_id} is not a classic group"))
            continue
        stable = group.is_(GroupState.STABLE)
        members = [DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, member_metadata=m.metadata(group.protocol) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        described.append(_described(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                                    group.protocol or "" if stable else "", members, operations))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def _described(group_id, error, state, protocol_type="", protocol="", members=(), operations=None, message=None):
    return DescribeGroupsResponse.DescribedGroup(
        error_code=error, error_message=message, group_id=group_id, group_state=state, protocol_type=protocol_type,
        protocol_data=protocol, members=list(members),
        # kafka-python encodes None as Kafka's "not requested" (INT32_MIN).
        authorized_operations=operations)


@handles(ApiKey.ListGroups)
async def list_groups(ctx: Context, request):
    try:
        groups = ctx.broker.groups.list_groups()
    except KafkaError as exc:
        return ListGroupsResponse(throttle_time_ms=0, error_code=exc.code, groups=[])
    states = {s.lower() for s in request.states_filter} if ctx.version >= 4 and request.states_filter else None
    types = {t.lower() for t in request.types_filter} if ctx.version >= 5 and request.types_filter else None
    # Kafka lists every group to a principal that may describe the cluster, else those it may describe.
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, quietly=True):
        groups = [g for g in groups if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id, quietly=True)]
    listed = [ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=_protocol_type(g),
                                             group_state=_state(g), group_type=_type(g))
              for g in groups
              if (states is None or _state(g).lower() in states) and (types is None or _type(g) in types)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=listed)


@handles(ApiKey.DeleteGroups)
async def delete_groups(ctx: Context, request):
    results = []
    for group_id in request.groups_names:
        try:
            ctx.require(Operation.DELETE, ResourceType.GROUP, group_id)
            error = await ctx.broker.groups.delete_group(group_id)
            if error == ErrorCode.NONE:
                await ctx.broker.share_departures.group_deleted(group_id)  # a share group's, if it was one
        except KafkaError as exc:
            error = exc.code
        results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


def _modern(group: Group):
    """The group's state when it is a consumer, share or streams group, else None (classic)."""
    return group.share or group.consumer or group.streams


def _type(group: Group) -> str:
    modern = _modern(group)
    return "classic" if modern is None else modern.FAMILY


def _state(group: Group) -> str:
    modern = _modern(group)
    return group.state.value if modern is None else modern.state


def _protocol_type(group: Group) -> str:
    return _type(group) if _modern(group) is not None else group.protocol_type or ""


@handles(ApiKey.ConsumerGroupHeartbeat)
async def consumer_group_heartbeat(ctx: Context, request):
    owned = request.topic_partitions
    heartbeat = Heartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        client_id=ctx.header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed=request.subscribed_topic_names,
        # "": no regex (what librdkafka sends with a list of topic names); null: unchanged.
        regex=request.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=request.server_assignor,
        owned=None if owned is None else {tp.topic_id: set(tp.partitions) for tp in owned if tp.partitions})
    R = ConsumerGroupHeartbeatResponse
    try:
        _may_heartbeat(ctx, request.group_id, request.subscribed_topic_names)
        if request.member_epoch != 0 and not request.member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty")
        reply = await ctx.broker.groups.consumer_heartbeat(heartbeat)
    except KafkaError as exc:
        return _heartbeat_answer(R, exc.code, exc.message)
    return _heartbeat_answer(R, reply.error, reply.message, reply, ctx.broker.groups.heartbeat_ms(request.group_id))


def _may_heartbeat(ctx: Context, group_id: str, topics) -> None:
    """Kafka's KafkaApis, for either heartbeat: Read on the group, and a member may not learn
    of (or be assigned) a topic it may not describe."""
    ctx.require(Operation.READ, ResourceType.GROUP, group_id)
    if not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in set(topics or ())):
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _heartbeat_answer(R, error: ErrorCode, message: str | None, reply=None, interval: int = 0):
    """A consumer or share heartbeat's response, as Kafka answers: an error leaves the member
    id unset and the epoch and the interval at the fields' defaults (0), and a member that
    left (epoch -1, or -2 for a static one) is given no interval either."""
    if reply is None:
        return R(throttle_time_ms=0, error_code=error, error_message=message, member_id=None, member_epoch=0,
                 heartbeat_interval_ms=0)
    assignment = None if reply.assignment is None else R.Assignment(topic_partitions=[
        R.Assignment.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
        for topic_id, parts in sorted(reply.assignment.items())])
    failed = error != ErrorCode.NONE
    return R(throttle_time_ms=0, error_code=error, error_message=message, member_id=reply.member_id,
             member_epoch=0 if failed else reply.member_epoch,
             heartbeat_interval_ms=0 if failed or reply.member_epoch < 0 else interval, assignment=assignment)


@handles(ApiKey.ConsumerGroupDescribe)
async def consumer_group_describe(ctx: Context, request):
    D = ConsumerGroupDescribeResponse.DescribedGroup

    def described(group_id: str, consumer, operations):
        return D(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state=consumer.state,
            group_epoch=consumer.epoch, assignment_epoch=consumer.assignment_epoch, assignor_name=consumer.assignor,
            members=[D.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed), subscribed_topic_regex=m.regex,
                              assignment=_assignment(ctx, m.assigned),
                              target_assignment=_assignment(ctx, consumer.target.get(m.member_id, {})))
                     for m in consumer.members.values()],
            authorized_operations=operations)
    # Kafka's answer for a missing group and for a classic one alike.
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=describe_kind(
        ctx, request, D, lambda group: group.consumer, "group {} is not a consumer group", described))


def describe_kind(ctx: Context, request, D, kind, not_found: str, described) -> list:
    """ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe alike: each group ``described`` from its
    state of the asked ``kind``, or GROUP_ID_NOT_FOUND when it has none, with Kafka's message
    for a missing group or ``not_found`` for one of another type."""
    groups = []
    for group_id in request.group_ids:
        try:
            ctx.require(Operation.DESCRIBE, ResourceType.GROUP, group_id)
            group = ctx.broker.groups.describe(group_id)
            if group is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            state = kind(group)
            if state is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, not_found.format(group_id))
        except KafkaError as exc:
            groups.append(D(error_code=exc.code, error_message=exc.message, group_id=group_id, group_state="",
                            group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[]))
            continue
        operations = (ctx.broker.authorizer.authorized_operations(ctx.connection, ResourceType.GROUP, group_id)
                      if request.include_authorized_operations else None)
        groups.append(described(group_id, state, operations))
    return groups


@handles(ApiKey.ShareGroupHeartbeat)
async def share_group_heartbeat(ctx: Context, request):
    heartbeat = ShareHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        client_id=ctx.header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        rack_id=request.rack_id, subscribed=request.subscribed_topic_names)
    R = ShareGroupHeartbeatResponse
    try:
        _may_heartbeat(ctx, request.group_id, request.subscribed_topic_names)
        reply = await ctx.broker.groups.share_heartbeat(heartbeat)
    except KafkaError as exc:
        return _heartbeat_answer(R, exc.code, exc.message)
    interval = 0 if reply.error or reply.member_epoch < 0 else ctx.broker.groups.share_heartbeat_ms(request.group_id)
    return _heartbeat_answer(R, reply.error, reply.message, reply, interval)


@handles(ApiKey.ShareGroupDescribe)
async def share_group_describe(ctx: Context, request):
    D = ShareGroupDescribeResponse.DescribedGroup

    def described(group_id: str, share, operations):
        return D(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state=share.state,
            group_epoch=share.epoch, assignment_epoch=share.assignment_epoch, assignor_name="simple",
            members=[D.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                              client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                              assignment=_assignment(ctx, m.assigned, D.Member.Assignment))
                     for m in share.members.values()],
            authorized_operations=operations)
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=describe_kind(
        ctx, request, D, lambda group: group.share, "Group {} is not a share group.", described))


def _assignment(ctx: Context, partitions, A=ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment):
    return A(topic_partitions=[A.TopicPartitions(topic_id=topic_id, topic_name=_topic_name(ctx, topic_id),
                                                 partitions=sorted(parts))
                               for topic_id, parts in sorted(partitions.items())])


def _topic_name(ctx: Context, topic_id) -> str:
    topic = ctx.broker.topic_by_id(topic_id)
    return topic.name if topic is not None else ""
