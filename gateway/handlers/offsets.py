"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete.

Offsets carry their metadata string and leader epoch exactly as committed. Commits
for partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the rest of the
request still commits, as in Kafka.
"""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..groups.modern_group import CommittedPartition
from ..groups.records import CommittedOffset, now_ms
from . import Context, handles

OCTopic = OffsetCommitResponse.OffsetCommitResponseTopic
OCPartition = OCTopic.OffsetCommitResponsePartition


@handles(ApiKey.OffsetCommit)
async def offset_commit(ctx: Context, request):
    version = ctx.version
    broker = ctx.broker
    coordinator = broker.groups
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    try:
        ctx.require(Operation.READ, ResourceType.GROUP, request.group_id)
        error = coordinator.check_commit(request.group_id, generation, member_id,
                                         request.group_instance_id if version >= 7 else None,
                                         committed_partitions(broker, request.topics))
    except KafkaError as exc:
        error = exc.code
    now = now_ms()
    # v2-v4 carry a retention time; v1 a per-partition commit timestamp.
    retention = request.retention_time_ms if 2 <= version <= 4 else -1

    def committed(p, metadata: str) -> CommittedOffset:
        stamp = p.commit_timestamp if version == 1 and p.commit_timestamp >= 0 else now
        return CommittedOffset(p.committed_offset, p.committed_leader_epoch if version >= 6 else -1, metadata, stamp,
                               stamp + retention if retention >= 0 else -1)

    accepted, results = commits_to_store(ctx, request.topics, error, committed)
    await store_commits(accepted, results, lambda: coordinator.commit(request.group_id, accepted))
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OCTopic(name=topic.name, partitions=[
            OCPartition(partition_index=p.partition_index, error_code=results[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


def committed_partitions(broker, topics) -> list[CommittedPartition]:
    """A commit's partitions of known topics, by topic name and id (an unknown topic's
    partitions are refused on their own)."""
    return [(topic.name, broker.topics[topic.name].topic_id, p.partition_index)
            for topic in topics if topic.name in broker.topics for p in topic.partitions]


def commits_to_store(ctx: Context, topics, error: ErrorCode, committed) -> tuple[dict, dict]:
    """Kafka's checks of each partition of a commit, in Kafka's order: the request's own
    ``error``, then READ on the topic, the partition's existence and the metadata's size.

    Returns the offsets to store (``committed(partition, metadata)`` makes each) and every
    partition's error code.
    """
    broker = ctx.broker
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    results = {}
    for topic in topics:
        known = broker.topics.get(topic.name)
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if error != ErrorCode.NONE:
                results[tp] = error
            elif not readable:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or not 0 <= p.partition_index < known.partitions:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > broker.groups.max_metadata_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = committed(p, metadata)
                results[tp] = ErrorCode.NONE
    return accepted, results


async def store_commits(accepted: dict, results: dict, store) -> None:
    """Await ``store()`` for the ``accepted`` offsets; if it fails, nothing is stored and they
    answer the coordinator's error (COORDINATOR_NOT_AVAILABLE when the store refused the append)."""
    if not accepted:
        return
    try:
        await store()
        return
    except KafkaError as exc:
        code = exc.code
    for tp in accepted:
        results[tp] = code


@handles(ApiKey.OffsetFetch)
async def offset_fetch(ctx: Context, request):
    version = ctx.version
    if version >= 8:
        groups = [_fetch_group(ctx, g.group_id, g.topics, version) for g in request.groups]
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    # v0-v1 always name their partitions; null ("all") exists from v2.
    group = _fetch_group(ctx, request.group_id, request.topics, version)
    return OffsetFetchResponse(throttle_time_ms=0, topics=group.topics, error_code=group.error_code)


def _fetch_group(ctx: Context, group_id, topics, version):
    """One group's answer, in the v8+ shape (the older shape reuses its topics and error)."""
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics if version >= 8 else OffsetFetchResponse.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartitions if version >= 8 else T.OffsetFetchResponsePartition
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    found, hidden, error = _committed(ctx, group_id, wanted)
    if error and version >= 2:  # the group's error alone, as Kafka lists no topics with it (v0-1: per partition)
        return G(group_id=group_id, topics=[], error_code=error)
    by_topic: dict[str, list] = {}
    for (topic, partition), committed in sorted(found.items(), key=lambda item: item[0]):
        by_topic.setdefault(topic, []).append(P(
            partition_index=partition, committed_offset=committed.offset if committed else -1,
            committed_leader_epoch=committed.leader_epoch if committed else -1,
            metadata=committed.metadata if committed else "",
            # Before v2 there is no top-level error: each partition carries it.
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic in hidden
            else error if version < 2 else ErrorCode.NONE))
    return G(group_id=group_id, topics=[T(name=name, partitions=parts) for name, parts in by_topic.items()],
             error_code=error)


def _committed(ctx: Context, group_id, wanted) -> tuple[dict, set[str], ErrorCode]:
    """The group's committed offsets of ``wanted`` (None: all), the topics the principal may not
    describe, and the group's error. Named partitions of hidden topics are refused; asked for
    all, the answer leaves those topics out (Kafka's behaviour)."""
    try:
        ctx.require(Operation.DESCRIBE, ResourceType.GROUP, group_id)
        found = ctx.broker.groups.fetch_offsets(group_id, wanted)
    except KafkaError as exc:
        return {tp: None for tp in wanted or ()}, set(), exc.code
    hidden = {topic for topic, _ in found
              if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic, quietly=wanted is None)}
    found = {tp: None if tp[0] in hidden else committed for tp, committed in found.items()
             if wanted is not None or tp[0] not in hidden}
    return found, hidden, ErrorCode.NONE


@handles(ApiKey.OffsetDelete)
async def offset_delete(ctx: Context, request):
    R = OffsetDeleteResponse
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    readable = {t.name for t in request.topics if ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)}
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name in readable]
    try:
        results = await ctx.broker.groups.delete_offsets(request.group_id, wanted)
    except KafkaError as exc:
        return R(error_code=exc.code, throttle_time_ms=0, topics=[])
    results.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    for t in request.topics if t.name not in readable for p in t.partitions})
    topics: dict[str, list] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append(R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
            partition_index=partition, error_code=error))
    return R(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        R.OffsetDeleteResponseTopic(name=name, partitions=parts) for name, parts in topics.items()])
