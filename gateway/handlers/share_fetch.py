"""ShareFetch and ShareAcknowledge (KIP-932): records handed to a share group's members one by one.

A request runs in its member's share session (gateway/shares/sessions.py). Its
acknowledgements are applied first, each partition's answered on its own (its
AcknowledgeErrorCode); then each partition of the session is read through the
partition router, from where the share-partition's state says the next records are,
up to the high watermark (the last stable offset for share.isolation.level
read_committed), and the share-partition's leader here (gateway/shares/leader.py)
decides which of the records read the member acquires. With nothing acquired the request waits for an append, up to its
MaxWaitMs, as a fetch does. Closing a session (epoch -1) releases what the member held.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol import record_batch
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import ShareAcknowledgeResponse, ShareFetchResponse

from ..partition_router import Client, Followed, Local, Refused, route
from ..partition_router import Operation as Route
from ..partition_transactions import AbortedTransaction, committed_view
from ..shares.partition_state import AckBatch, Acquired, Span, SpanKind
from ..shares.records import SharePartitionKey
from ..shares.sessions import FINAL_EPOCH
from . import Context, handles
from .fetch import decode_entries, read_entries
from .waiters import appended

R = ShareFetchResponse
PD = R.ShareFetchableTopicResponse.PartitionData
A = ShareAcknowledgeResponse
STATE_AWAY = frozenset((ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH))
ANY_MAGIC = 16  # read as the newest Fetch reads: every magic, every codec


@dataclass(slots=True)
class _Read:
    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: tuple[Acquired, ...] = ()
    ledger: object | None = None  # what a waiting fetch watches for appends


@handles(ApiKey.ShareFetch)
async def share_fetch(ctx: Context, request):
    broker = ctx.broker
    group_id, member_id = request.group_id or "", request.member_id or ""
    added = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        _check(ctx, group_id, member_id)
        if request.share_session_epoch == FINAL_EPOCH and any(
                not p.acknowledgement_batches for t in request.topics for p in t.partitions):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "the final ShareFetch of a session only acknowledges")
        session, closing = broker.share_sessions.open_or_advance(group_id, member_id, request.share_session_epoch,
                                                                 added, forgotten, fetching=True)
    except KafkaError as exc:
        return R(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, acquisition_lock_timeout_ms=0,
                 responses=[], node_endpoints=[])
    acks = await _acknowledge(ctx, group_id, member_id, _ack_requests(request.topics))
    reads: dict[tuple, _Read] = {}
    if closing:
        await broker.share_leaders.release_member(group_id, member_id)
    else:
        reads = await _read_session(ctx, group_id, member_id, session.partitions, request)
    keys = list(dict.fromkeys([*reads, *acks]))
    topics: dict = {}
    for topic_id, index in keys:
        read = reads.get((topic_id, index), _Read())
        topics.setdefault(topic_id, []).append(PD(
            partition_index=index, error_code=read.error, error_message=None,
            acknowledge_error_code=acks.get((topic_id, index), ErrorCode.NONE), acknowledge_error_message=None,
            current_leader=PD.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0), records=read.records,
            acquired_records=[PD.AcquiredRecords(first_offset=a.first, last_offset=a.last,
                                                 delivery_count=a.delivery_count) for a in read.acquired]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             acquisition_lock_timeout_ms=broker.share_leaders.config_of(group_id).lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=t, partitions=parts) for t, parts in topics.items()],
             node_endpoints=[])


@handles(ApiKey.ShareAcknowledge)
async def share_acknowledge(ctx: Context, request):
    broker = ctx.broker
    group_id, member_id = request.group_id or "", request.member_id or ""
    try:
        _check(ctx, group_id, member_id)
        _, closing = broker.share_sessions.open_or_advance(group_id, member_id, request.share_session_epoch,
                                                           (), (), fetching=False)
    except KafkaError as exc:
        return A(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, responses=[], node_endpoints=[])
    acks = await _acknowledge(ctx, group_id, member_id, _ack_requests(request.topics))
    if closing:
        await broker.share_leaders.release_member(group_id, member_id)
    topics: dict = {}
    P = A.ShareAcknowledgeTopicResponse.PartitionData
    for (topic_id, index), error in acks.items():
        topics.setdefault(topic_id, []).append(P(
            partition_index=index, error_code=error, error_message=None,
            current_leader=P.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0)))
    return A(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             responses=[A.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts) for t, parts in topics.items()],
             node_endpoints=[])


def _check(ctx: Context, group_id: str, member_id: str) -> None:
    """Kafka's checks before the session: a group to read as, a member id."""
    if not group_id:
        raise KafkaError(ErrorCode.INVALID_GROUP_ID, "a share fetch names its group")
    ctx.require(Operation.READ, ResourceType.GROUP, group_id)
    if not member_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty")


def _ack_requests(topics) -> Iterator[tuple[tuple, list[AckBatch]]]:
    for topic in topics:
        for part in topic.partitions:
            if part.acknowledgement_batches:
                yield (topic.topic_id, part.partition_index), [
                    AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                    for b in part.acknowledgement_batches]


async def _acknowledge(ctx: Context, group_id: str, member_id: str, wanted) -> dict[tuple, ErrorCode]:
    """Each partition's acknowledgements applied whole or refused whole, with Kafka's error."""
    answers = {}
    for (topic_id, index), batches in wanted:
        try:
            _topic(ctx, topic_id)
            await ctx.broker.share_leaders.acknowledge(SharePartitionKey(group_id, topic_id, index), member_id, batches)
            answers[(topic_id, index)] = ErrorCode.NONE
        except KafkaError as exc:
            answers[(topic_id, index)] = exc.code
    return answers


def _topic(ctx: Context, topic_id):
    topic = ctx.broker.topic_by_id(topic_id)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
    ctx.require(Operation.READ, ResourceType.TOPIC, topic.name)
    return topic


async def _read_session(ctx: Context, group_id: str, member_id: str, partitions, request) -> dict[tuple, _Read]:
    """Read every partition of the session; with nothing acquired, wait for an append and read again."""
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    while True:
        budget = [request.max_records if request.max_records > 0 else 500]
        reads = {tp: await _read_one(ctx, group_id, member_id, tp, request.max_bytes, budget) for tp in partitions}
        remaining = deadline - time.monotonic()
        if any(r.acquired for r in reads.values()) or remaining <= 0:
            return reads
        ledgers = [r.ledger for r in reads.values() if r.ledger is not None]
        if not ledgers:
            return reads
        await appended(ledgers, remaining)


async def _read_one(ctx: Context, group_id: str, member_id: str, tp: tuple, max_bytes: int,
                    budget: list[int]) -> _Read:
    broker = ctx.broker
    topic_id, index = tp
    try:
        topic = _topic(ctx, topic_id)
        decision = await route(broker, Client.of(ctx.connection), topic, index, Route.FETCH)
        if isinstance(decision, Refused):
            return _Read(decision.error)
        if not isinstance(decision, Local | Followed):
            return _Read(ErrorCode.NOT_LEADER_FOR_PARTITION)
        partition = decision.partition
        ledger = partition.ledger
        key = SharePartitionKey(group_id, topic_id, index)
        start, hw = ledger.log_start_offset, ledger.high_watermark
        offset = await broker.share_leaders.fetch_offset(key, topic.name, partition.leader_epoch, start, hw)
        committed = broker.share_leaders.config_of(group_id).read_committed
        limit = partition.transactions.last_stable_offset(hw) if committed else hw
        if offset >= limit or budget[0] <= 0:
            return _Read(ledger=ledger)
        entries = await read_entries(broker, decision, offset, max(max_bytes, 1), True)
        aborted: list[AbortedTransaction] = []
        if committed:
            entries, aborted = committed_view(partition.transactions, entries, offset, limit, start)
        chunks, error = decode_entries(entries, ANY_MAGIC)
        acquired = await broker.share_leaders.acquire(key, member_id, list(_spans(chunks, entries, aborted)), budget[0])
    except KafkaError as exc:
        # The share-partition's state could not be loaded or written (its coordinator loading or
        # moving, or this leader's state fenced and dropped): nothing this time, the member fetches again.
        return _Read(ErrorCode.NONE if exc.code in STATE_AWAY else exc.code)
    budget[0] -= sum(a.last - a.first + 1 for a in acquired)
    # Only the batches holding acquired records go back: the member would skip the others.
    handed = [chunk for chunk, stored in zip(chunks, entries)
              if any(a.first <= stored.header.last_offset and stored.header.base_offset <= a.last for a in acquired)]
    return _Read(error, b"".join(handed), tuple(acquired), ledger)


def _spans(chunks, entries, aborted: list[AbortedTransaction]) -> Iterator[Span]:
    """The offsets each batch read holds, and whether they are data, an aborted transaction's, or a marker."""
    for chunk, stored in zip(chunks, entries):
        if stored.header.magic < 2:
            yield Span(stored.header.base_offset, stored.header.last_offset)
            continue
        for _, header in record_batch.iter_headers(chunk):
            kind = SpanKind.CONTROL if header.is_control else SpanKind.ABORTED if header.is_transactional and any(
                a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
                for a in aborted) else SpanKind.DATA
            yield Span(header.base_offset, header.last_offset, kind)



