"""Fetch: stored batches returned as they are, with a delayed-fetch wait.

Each entry is handed to its entry format with what the request version can read:
Fetch v0-1 reads magic 0, v2-3 magic 1 (down-converted, as Kafka does, keeping each
batch's codec), v4+ anything, and only v10+ zstd (older ones get
UNSUPPORTED_COMPRESSION_TYPE for a partition holding zstd data).

A fetch that finds fewer than ``min_bytes`` waits until any of its partitions'
high watermark moves or ``max_wait_ms`` passes, then reads again.

Fetch v7+ may use incremental fetch sessions (KIP-227, gateway/fetch_sessions.py):
a full fetch with epoch 0 opens one when the cache has room, an incremental fetch
reads every partition of its session and answers only those with something new.
"""
import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol import message_set
from kgate.protocol.conversion import magic_of
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.fetch_answer import (
    AbortedTransaction,
    FetchAnswer,
    PartitionFetchAnswer,
    RecordChunks,
    TopicFetchAnswer,
)
from kgate.protocol.inflate import DEFAULT_LIMIT
from kgate.storage.entry_formats import EntryUnreadable, decode_entry
from kgate.storage.ledger import CorruptLedger
from kgate.storage.managed_ledger import DamagedEntry

from ..fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition
from ..partition_router import Client, Decision, Followed, Local, Redirect, Refused, route
from ..partition_router import Operation as Route
from ..partition_transactions import READ_COMMITTED, committed_view
from . import Context, handles
from .broker_view import BrokerView
from .waiters import appended

log = logging.getLogger(__name__)

MIN_VERSION_FOR_ZSTD = 10
MIN_VERSION_READING_ANY_MAGIC = 4


def readable_magic(version: int) -> int:
    """The highest message format a Fetch of ``version`` may return (KIP-32, KIP-98)."""
    return 0 if version <= 1 else 1 if version < MIN_VERSION_READING_ANY_MAGIC else 2


@dataclass(slots=True)
class _Target:
    """One partition a fetch asked for, and where the partition router sends it."""

    topic: Any  # the request's topic entry (or a fetch session's cached partition)
    part: Any  # the request's partition entry (idem)
    decision: Decision


@handles(ApiKey.Fetch)
async def fetch(ctx: Context, request):
    """Session, route, read (waiting for data as the request allows), answer."""
    broker = ctx.broker
    uses_ids = ctx.version >= 13
    session, refused = _session(ctx, request, uses_ids)
    if refused is not None:
        return FetchAnswer(refused, INVALID_SESSION_ID, [])
    if ctx.version >= 11 and request.rack_id:
        ctx.connection.said_zone(request.rack_id, broker.metrics)
    wanted = ((c, c) for c in session.partitions.values()) if session is not None else \
        ((t, p) for t in request.topics for p in t.partitions)
    targets = await _route(ctx, wanted)
    await _catch_up(broker, targets)
    responses, total, served = await _read_until_ready(ctx, request, targets)
    ctx.held_bytes = total
    for topic, (size, count) in served.items():
        broker.metrics.fetched(topic, size, count)
    session_id = INVALID_SESSION_ID
    if session is not None:
        session_id = session.id
        responses = _news(session, list(session.partitions), responses)
    elif ctx.version >= 7 and request.session_epoch == INITIAL_EPOCH:
        session_id = broker.fetch_sessions.create(time.monotonic() * 1000, uses_ids, {
            _key(target.topic, target.part.partition, uses_ids): CachedPartition(
                target.topic.topic, target.topic.topic_id, target.part.partition, target.part.fetch_offset,
                target.part.partition_max_bytes, pd.high_watermark, pd.log_start_offset)
            for target, (_, pd) in zip(targets, responses, strict=True)})
    return FetchAnswer(ErrorCode.NONE, session_id, _group(responses))


def _session(ctx: Context, request, uses_ids: bool):
    """The incremental fetch session (KIP-227) the request continues, or None; and the error
    that refuses the request (an unknown session or a wrong epoch), or None."""
    fetch_sessions = ctx.broker.fetch_sessions
    if ctx.version < 7:
        return None, None
    if request.session_epoch <= INITIAL_EPOCH:
        if request.session_id != INVALID_SESSION_ID:
            fetch_sessions.remove(request.session_id)  # a full fetch closes the session it names
        return None, None
    error, session = fetch_sessions.incremental(request.session_id, request.session_epoch, uses_ids,
                                                time.monotonic() * 1000)
    if session is None:
        return None, error
    session.update(((_key(t, p.partition, uses_ids), t, p) for t in request.topics for p in t.partitions),
                   (_key(f, index, uses_ids) for f in request.forgotten_topics_data for index in f.partitions))
    if not session.partitions:  # everything forgotten: Kafka closes the session and answers sessionless
        fetch_sessions.remove(session.id)
        return None, None
    return session, None


def _key(topic, partition: int, uses_ids: bool) -> tuple:
    """A session partition's identity: by topic id from Fetch v13, by name before (as Kafka keys them)."""
    return (topic.topic_id if uses_ids else topic.topic), partition


async def _route(ctx: Context, wanted) -> list[_Target]:
    """Where each ``(topic, partition request)`` wanted is served (gateway/partition_router.py),
    its topic resolved and authorized once per run of the same topic."""
    broker = ctx.broker
    by_name = ctx.version < 13
    client = Client.of(ctx.connection, may_redirect=ctx.version >= 11)
    targets = []
    last = None
    for topic_request, part in wanted:
        if (topic_request.topic, topic_request.topic_id) != last:
            last = (topic_request.topic, topic_request.topic_id)
            topic = broker.topics.get(topic_request.topic) if by_name else broker.topic_by_id(topic_request.topic_id)
            # By name, Kafka refuses an unauthorized topic whether or not it exists; by id, an unknown id stays unknown.
            name = topic_request.topic if by_name else topic.name if topic else None
            allowed = name is None or ctx.allowed(Operation.READ, ResourceType.TOPIC, name)
        if not allowed:
            decision: Decision = Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif topic is None:
            decision = Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if by_name else ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            decision = await route(broker, client, topic, part.partition, Route.FETCH)
        targets.append(_Target(topic_request, part, decision))
    return targets


async def _catch_up(broker: BrokerView, targets: list[_Target]) -> None:
    """Followed partitions are caught up to their owners' high watermarks (as the owners'
    standing polls told, or asked now: gateway/followers.py); those an owner refuses are
    refused to the client too."""
    followed = [t.decision.partition for t in targets if isinstance(t.decision, Followed)]
    if not followed:
        return
    offsets = {(t.decision.partition.topic, t.decision.partition.index): t.part.fetch_offset
               for t in targets if isinstance(t.decision, Followed)}
    refused = await broker.followers.refresh(followed, offsets)
    for target in targets:
        if isinstance(target.decision, Followed):
            partition = target.decision.partition
            error = refused.get((partition.topic, partition.index))
            if error is not None:
                target.decision = Refused(error)


async def _read_until_ready(ctx: Context, request, targets: list[_Target]) -> tuple[list, int, dict]:
    """Read, and while less than ``min_bytes`` came back, wait for appends (or for the
    connection's held answers to drain) until ``max_wait_ms``; the bytes answered are
    held by the connection until the socket has taken them."""
    broker = ctx.broker
    version = ctx.version
    stages = broker.metrics.fetch_stage
    held = ctx.connection.responses
    max_bytes = request.max_bytes if version >= 3 else 2**31 - 1
    deadline = time.monotonic() + request.max_wait_ms / 1000
    ledgers = _read_here(targets)
    # A client sent to another broker hears so at once, as from Kafka; with nothing read here, nothing to wait for.
    waits = bool(ledgers) and not any(isinstance(t.decision, Redirect) for t in targets)
    committed_only = _reads_committed(request, version)
    while True:
        room = held.room()
        began = time.monotonic()
        # The room stays this fetch's while its reads are awaited, so a concurrent fetch
        # cannot count on it too; what the answer holds is taken for good below.
        reserved = max(0, min(max_bytes, room))
        held.take(reserved)
        try:
            responses, total, served = await _read(broker, targets, min(max_bytes, room), version,
                                                   progress=room > 0, committed_only=committed_only)
        finally:
            held.give(reserved)
        now = time.monotonic()
        stages["read"].observe(now - began)
        remaining = deadline - now
        if room <= 0 and remaining > 0 and not _has_errors(responses):
            # Answers already read for other fetches fill the budget: wait for them to be sent.
            broker.metrics.fetch_budget_waits.inc()
            await held.wait_for_room(remaining)
        elif not waits or total >= request.min_bytes or remaining <= 0 or _has_errors(responses):
            break
        else:
            await _wait_for_appends(broker, ledgers, targets, remaining)
        stages["wait"].observe(time.monotonic() - now)
    held.take(total)  # no await since the reservation was given back: the room is still there
    return responses, total, served


def _read_here(targets: list[_Target]) -> list:
    """The ledgers of every partition read here (for its owner, a view of its ledgers)."""
    return [t.decision.partition.ledger for t in targets if isinstance(t.decision, Local | Followed)]


async def _wait_for_appends(broker: BrokerView, ledgers: list, targets: list[_Target], remaining: float) -> None:
    """Until a ledger read here confirms new entries or ``remaining`` seconds pass. Partitions
    read here for their owners move when their owners' standing polls say so, or, for owners
    that serve no standing poll, when a long poll asked for this fetch does."""
    followed = [t.decision.partition for t in targets if isinstance(t.decision, Followed)]
    poll = asyncio.ensure_future(broker.followers.wait(followed, remaining)) if followed else None
    try:
        await appended(ledgers, remaining)
    finally:
        if poll is not None and not poll.done():
            poll.cancel()


def _reads_committed(request, version: int) -> bool:
    return version >= 4 and request.isolation_level == READ_COMMITTED


def _news(session, keys: list, responses: list) -> list:
    """What an incremental answer carries: the session's partitions with something new
    (in session order, ``keys`` the order they were read in); those that returned data
    go to the back of the session."""
    kept = []
    for key, (cached, pd) in zip(keys, responses, strict=True):
        if cached.must_answer(pd):
            kept.append((cached, pd))
            if pd.records:
                session.to_the_back(key)
    return kept


class _Budget:
    """What a fetch may still return: ``max_bytes`` across partitions, and whether the first
    partition holding data returns a batch regardless (Kafka's progress rule)."""

    __slots__ = ("left", "progress", "total", "served")

    def __init__(self, max_bytes: int, progress: bool):
        self.left = max_bytes
        self.progress = progress
        self.total = 0
        self.served: dict[str, list[int]] = {}

    @property
    def min_one(self) -> bool:
        return self.progress and self.total == 0

    def may_read(self) -> bool:
        return self.left > 0 or self.min_one

    def spend(self, topic: str, size: int, records: int) -> None:
        self.total += size
        self.left -= size
        counts = self.served.setdefault(topic, [0, 0])
        counts[0] += size
        counts[1] += records


async def _read(broker: BrokerView, targets: list[_Target], max_bytes: int, version: int,
                progress: bool = True, committed_only: bool = False) -> tuple[list, int, dict]:
    """Partition responses, their total bytes, and per topic the (bytes, records) served.

    Kafka's rule: with ``progress`` the first partition holding data returns at least one
    whole batch even past ``max_bytes`` or its own partition_max_bytes, so a batch larger
    than the limits is not stuck; every later partition stops within what remains of
    ``max_bytes`` (and its own limit), leaving a batch that does not fit for the next fetch.
    With ``committed_only`` (read_committed) a partition is read up to its last stable
    offset, with the aborted transactions of what is returned.
    """
    budget = _Budget(max_bytes, progress)
    responses = []
    for target in targets:
        decision = target.decision
        if isinstance(decision, Refused):
            answer = _refused(target.part.partition, decision.error)
        elif isinstance(decision, Redirect):
            answer = _redirected(target.part, decision)
        else:
            assert isinstance(decision, Local | Followed)  # a fetch is never routed by reference
            answer = await _read_partition(broker, target.part, decision, budget, version, committed_only)
        responses.append((target.topic, answer))
    return responses, budget.total, budget.served


def _redirected(part, decision: Redirect):
    """Read from the client's own zone: nothing is read here, the offsets are this broker's."""
    partition = decision.partition
    assert partition is not None  # a fetch is redirected only from a partition served here
    ledger = partition.ledger
    hw = ledger.high_watermark
    return PartitionFetchAnswer(part.partition, ErrorCode.NONE, hw, partition.transactions.last_stable_offset(hw),
                                ledger.log_start_offset, preferred_read_replica=decision.broker)


async def _read_partition(broker: BrokerView, part, decision: Local | Followed, budget: _Budget, version: int,
                          committed_only: bool):
    """One partition's answer: its records from ``part.fetch_offset`` within the budget.

    Fetches before v4 may need what is stored down-converted, per record: that runs in
    a thread, each batch inflated within kgate.max.inflated.batch.bytes, so the event
    loop goes on serving other connections meanwhile.
    """
    partition = decision.partition
    ledger = partition.ledger
    hw = ledger.high_watermark
    start = ledger.log_start_offset
    lso = partition.transactions.last_stable_offset(hw)
    error = ErrorCode.NONE
    records: RecordChunks | bytes = b""
    aborted = None
    if not start <= part.fetch_offset <= hw:
        return _refused(part.partition, ErrorCode.OFFSET_OUT_OF_RANGE, read_refused=True)
    if budget.may_read() and (not committed_only or part.fetch_offset < lso):
        try:
            entries = await read_entries(broker, decision, part.fetch_offset,
                                         min(part.partition_max_bytes, budget.left), budget.min_one)
        except KafkaError as refused:
            return _refused(part.partition, refused.code)
        if committed_only:
            entries, aborted = committed_view(partition.transactions, entries, part.fetch_offset, lso, start)
        if version < MIN_VERSION_READING_ANY_MAGIC:
            chunks, error = await asyncio.get_running_loop().run_in_executor(
                None, decode_entries, entries, version, broker.settings["kgate.max.inflated.batch.bytes"])
        else:
            chunks, error = decode_entries(entries, version)
        if chunks and magic_of(chunks[0]) < 2:
            chunks[0] = message_set.from_offset(chunks[0], part.fetch_offset)
        records = RecordChunks(chunks)
        partition.bytes_out += len(records)
        budget.spend(partition.topic, len(records), sum(stored.header.record_count for stored in entries[:len(chunks)]))
    aborted_transactions = [AbortedTransaction(a.producer_id, a.first_offset) for a in aborted] if aborted else None
    return PartitionFetchAnswer(part.partition, error, hw, lso, start, aborted_transactions, records=records)


async def read_entries(broker: BrokerView, decision: Local | Followed, offset: int, max_bytes: int,
                   min_one: bool) -> list:
    """What a fetch at ``offset`` reads, or KafkaError. A damaged entry refuses its offsets
    and every later one (KAFKA_STORAGE_ERROR); what lies before it is still served."""
    partition = decision.partition
    end = decision.damaged_from if isinstance(decision, Local) else None
    if end is not None and offset >= end:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
    try:
        return await partition.ledger.read(offset, max_bytes, min_one=min_one, end=end)
    except CorruptLedger as damage:
        if isinstance(decision, Followed):
            # Not ours to judge (a ledger retention or compaction replaced mid-read): the owner serves it.
            raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION) from None
        broker.take_offline(partition.topic, partition.index, damage)
        if isinstance(damage, DamagedEntry) and offset < damage.offset:
            return await read_entries(broker, Local(partition, damage.offset), offset, max_bytes, min_one)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR) from None


def _refused(index: int, error: ErrorCode, read_refused: bool = False):
    """A partition answered with an error, as Kafka answers one: offsets -1 and empty records,
    never null (librdkafka rejects a whole response holding a null record set). Aborted
    transactions are an empty list, but null where the read itself refused (an offset out
    of range), as Kafka's log read answers."""
    return PartitionFetchAnswer(index, error, -1, -1, -1, None if read_refused else [])


def decode_entries(entries, version, inflate_limit: int = DEFAULT_LIMIT) -> tuple[list, ErrorCode]:
    """Entries as the fetch version can read them, up to the first one that cannot be served.

    Entries before it are returned so the client progresses; the error comes back
    when its fetch reaches the unreadable entry itself.
    """
    max_magic, zstd = readable_magic(version), version >= MIN_VERSION_FOR_ZSTD
    chunks = []
    for stored in entries:
        try:
            chunks.append(decode_entry(stored, max_magic, zstd, inflate_limit))
        except EntryUnreadable as exc:
            return chunks, ErrorCode.NONE if chunks else exc.code
    return chunks, ErrorCode.NONE


def _has_errors(responses) -> bool:
    return any(pd.error_code != ErrorCode.NONE for _, pd in responses)


def _group(responses):
    """Runs of partitions of one topic under one topic entry (a topic may recur, as in Kafka's answers)."""
    topics = []
    last = None
    for topic_request, pd in responses:
        if (topic_request.topic, topic_request.topic_id) != last:
            topics.append(TopicFetchAnswer(topic_request.topic, topic_request.topic_id, []))
            last = (topic_request.topic, topic_request.topic_id)
        topics[-1].partitions.append(pd)
    return topics
