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

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol import message_set
from kgate.protocol.conversion import magic_of
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.inflate import DEFAULT_LIMIT
from kgate.storage.entry_formats import EntryUnreadable, decode_entry
from kgate.storage.followed_ledger import FollowedLedger
from kgate.storage.ledger import CorruptLedger, FollowingUnsupported
from kgate.storage.managed_ledger import DamagedEntry

from ..fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition
from ..partition_transactions import READ_COMMITTED, committed_view
from . import Context, handles
from .broker_view import BrokerView
from .waiters import appended

log = logging.getLogger(__name__)

R = FetchResponse
PD = R.FetchableTopicResponse.PartitionData
MIN_VERSION_FOR_ZSTD = 10
MIN_VERSION_READING_ANY_MAGIC = 4


def readable_magic(version: int) -> int:
    """The highest message format a Fetch of ``version`` may return (KIP-32, KIP-98)."""
    return 0 if version <= 1 else 1 if version < MIN_VERSION_READING_ANY_MAGIC else 2


@handles(ApiKey.Fetch)
async def fetch(ctx: Context, request):
    version = ctx.version
    broker = ctx.broker
    uses_ids = version >= 13
    session = None
    if version >= 7 and request.session_epoch > INITIAL_EPOCH:
        error, session = broker.fetch_sessions.incremental(request.session_id, request.session_epoch, uses_ids,
                                                           time.monotonic() * 1000)
        if session is None:
            return R(throttle_time_ms=0, error_code=error, session_id=INVALID_SESSION_ID, responses=[])
        session.update(((_key(t, p.partition, uses_ids), t, p) for t in request.topics for p in t.partitions),
                       (_key(f, index, uses_ids) for f in request.forgotten_topics_data for index in f.partitions))
        if not session.partitions:  # everything forgotten: Kafka closes the session and answers sessionless
            broker.fetch_sessions.remove(session.id)
            session = None
    elif version >= 7 and request.session_id != INVALID_SESSION_ID:
        broker.fetch_sessions.remove(request.session_id)  # a full fetch closes the session it names
    if version >= 11 and request.rack_id:
        ctx.connection.said_zone(request.rack_id, broker.metrics)
    if session is not None:
        keys = list(session.partitions)
        targets, followed = await _targets(ctx, ((cached, cached) for cached in session.partitions.values()))
    else:
        targets, followed = await _targets(ctx, ((t, p) for t in request.topics for p in t.partitions))
    if followed:
        refused = await broker.followers.refresh(followed)
        if refused:
            targets = [(t, p, None, refused[(partition.topic, partition.index)], -1)
                       if partition is not None and (partition.topic, partition.index) in refused
                       else (t, p, partition, missing, preferred)
                       for t, p, partition, missing, preferred in targets]
            followed = [p for p in followed if (p.topic, p.index) not in refused]
    redirected = any(preferred >= 0 for *_, preferred in targets)
    stages = broker.metrics.fetch_stage
    held = ctx.connection.responses
    max_bytes = request.max_bytes if version >= 3 else 2**31 - 1
    deadline = time.monotonic() + request.max_wait_ms / 1000
    ledgers = [p.ledger for _, _, p, _, preferred in targets if p is not None and preferred < 0]
    committed_only = version >= 4 and request.isolation_level == READ_COMMITTED
    while True:
        room = held.room()
        began = time.monotonic()
        # The room stays this fetch's while its reads are awaited, so a concurrent fetch
        # cannot count on it too; what the answer holds is taken for good below.
        limit = min(max_bytes, room)
        reserved = max(0, limit)
        held.take(reserved)
        try:
            responses, total, served = await _read(broker, targets, limit, version, progress=room > 0,
                                                   committed_only=committed_only)
        finally:
            held.give(reserved)
        now = time.monotonic()
        stages["read"].observe(now - began)
        remaining = deadline - now
        if room <= 0 and remaining > 0 and not _has_errors(responses):
            # Answers already read for other fetches fill the budget: wait for them to be sent.
            broker.metrics.fetch_budget_waits.inc()
            await held.wait_for_room(remaining)
        elif (total >= request.min_bytes or remaining <= 0 or not ledgers or redirected
              or _has_errors(responses)):
            break  # a client sent to another broker hears so at once, as from Kafka
        else:
            # Partitions read here for their owner move when the owner says so: a long poll.
            poll = asyncio.ensure_future(broker.followers.refresh(followed, remaining)) if followed else None
            try:
                await appended(ledgers, remaining)
            finally:
                if poll is not None and not poll.done():
                    poll.cancel()
        stages["wait"].observe(time.monotonic() - now)
    held.take(total)  # no await since the reservation was given back: the room is still there
    ctx.held_bytes = total
    for topic, (size, count) in served.items():
        broker.metrics.fetched(topic, size, count)
    session_id = INVALID_SESSION_ID
    if session is not None:
        session_id = session.id
        responses = _news(session, keys, responses)
    elif version >= 7 and request.session_epoch == INITIAL_EPOCH:
        session_id = broker.fetch_sessions.create(time.monotonic() * 1000, uses_ids, {
            _key(topic, part.partition, uses_ids): CachedPartition(
                topic.topic, topic.topic_id, part.partition, part.fetch_offset, part.partition_max_bytes,
                pd.high_watermark, pd.log_start_offset)
            for (topic, part, *_), (_, pd) in zip(targets, responses, strict=True)})
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=session_id, responses=_group(responses))


def _key(topic, partition: int, uses_ids: bool) -> tuple:
    """A session partition's identity: by topic id from Fetch v13, by name before (as Kafka keys them)."""
    return (topic.topic_id if uses_ids else topic.topic), partition


async def _targets(ctx: Context, wanted) -> tuple[list, list]:
    """``(topic, partition request, Partition | None, error code when None, preferred read replica or -1)``
    per ``(topic, partition request)`` wanted, the topic resolved and authorized once per run of the
    same topic; and the partitions among them read here for their owner (gateway/followers.py).

    Zones (gateway/zones.py): a Fetch v11+ client in another zone than this broker is sent to
    a broker of its own zone (preferred_read_replica) when there is one; a client in this
    broker's zone reads a partition owned elsewhere here, from shared storage.
    """
    broker = ctx.broker
    by_name = ctx.version < 13
    zone = ctx.connection.zone
    redirect = ctx.version >= 11 and zone is not None and zone != broker.zone and ctx.connection.peer_broker is None
    follow = zone is not None and zone == broker.zone and broker.followers.available
    targets = []
    followed = []
    last = None
    for topic_request, part in wanted:
        if (topic_request.topic, topic_request.topic_id) != last:
            last = (topic_request.topic, topic_request.topic_id)
            topic = broker.topics.get(topic_request.topic) if by_name else broker.topic_by_id(topic_request.topic_id)
            # By name, Kafka refuses an unauthorized topic whether or not it exists; by id, an unknown id stays unknown.
            name = topic_request.topic if by_name else topic.name if topic else None
            allowed = name is None or ctx.allowed(Operation.READ, ResourceType.TOPIC, name)
        partition, missing, preferred = None, None, -1
        if not allowed:
            missing = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if by_name else ErrorCode.UNKNOWN_TOPIC_ID
        else:
            try:
                partition = broker.partition(topic.name, part.partition)
            except KafkaError as error:
                damaged = broker.damaged_partition(topic.name, part.partition)
                partition, missing = (damaged[0], None) if damaged is not None else (None, error.code)
            if missing == ErrorCode.NOT_LEADER_FOR_PARTITION and follow:
                try:
                    partition, missing = await broker.followers.partition(topic, part.partition), None
                    followed.append(partition)
                except (OSError, FollowingUnsupported) as exc:
                    log.warning("%s-%d: cannot follow its ledgers here: %s", topic.name, part.partition, exc)
            elif partition is not None and redirect and zone is not None:
                replica = broker.zone_broker(zone, topic.name, part.partition)
                if replica is None:
                    if broker.followers.available:  # else the store keeps every client on the owners
                        broker.metrics.zone_fallback(zone)
                elif replica != broker.node_id:
                    preferred = replica
        targets.append((topic_request, part, partition, missing, preferred))
    return targets, followed


async def _entries(broker: BrokerView, partition, offset: int, max_bytes: int, min_one: bool) -> list:
    """What a fetch at ``offset`` reads, or KafkaError. A damaged entry refuses its offsets
    and every later one (KAFKA_STORAGE_ERROR); what lies before it is still served."""
    ledger = partition.ledger
    damaged = broker.damaged_partition(partition.topic, partition.index)
    end = None if damaged is None else damaged[1]
    if end is not None and offset >= end:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
    try:
        return await ledger.read(offset, max_bytes, min_one=min_one, end=end)
    except CorruptLedger as damage:
        if isinstance(ledger, FollowedLedger):
            # Not ours to judge (a ledger retention or compaction replaced mid-read): the owner serves it.
            raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION) from None
        broker.take_offline(partition.topic, partition.index, damage)
        if isinstance(damage, DamagedEntry) and offset < damage.offset:
            return await _entries(broker, partition, offset, max_bytes, min_one)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR) from None


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


async def _read(broker: BrokerView, targets: list, max_bytes: int, version: int,
                progress: bool = True, committed_only: bool = False) -> tuple[list, int, dict]:
    """Partition responses, their total bytes, and per topic the (bytes, records) served.

    Kafka's rule: with ``progress`` the first partition holding data returns at least one
    whole batch even past ``max_bytes`` or its own partition_max_bytes, so a batch larger
    than the limits is not stuck; every later partition stops within what remains of
    ``max_bytes`` (and its own limit), leaving a batch that does not fit for the next fetch.
    With ``committed_only`` (read_committed) a partition is read up to its last stable
    offset, with the aborted transactions of what is returned.

    Fetches before v4 may need what is stored down-converted, per record: that runs in
    a thread, each batch inflated within kgate.max.inflated.batch.bytes, so the event
    loop goes on serving other connections meanwhile.
    """
    responses = []
    total = 0
    served: dict[str, list[int]] = {}
    for topic_request, part, partition, missing, preferred in targets:
        if partition is None:
            responses.append((topic_request, _refused(part.partition, missing)))
            continue
        ledger = partition.ledger
        hw = ledger.high_watermark
        start = ledger.log_start_offset
        error = ErrorCode.NONE
        records = b""
        lso = partition.transactions.last_stable_offset(hw)
        aborted = None
        if preferred >= 0:
            pass  # read from the client's own zone: nothing is read here
        elif not start <= part.fetch_offset <= hw:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        elif (max_bytes > 0 or (progress and total == 0)) and (not committed_only or part.fetch_offset < lso):
            try:
                entries = await _entries(broker, partition, part.fetch_offset,
                                         min(part.partition_max_bytes, max_bytes), progress and total == 0)
            except KafkaError as refused:
                responses.append((topic_request, _refused(part.partition, refused.code)))
                continue
            if committed_only:
                entries, aborted = committed_view(partition.transactions, entries, part.fetch_offset, lso, start)
            if version < MIN_VERSION_READING_ANY_MAGIC:
                chunks, error = await asyncio.get_running_loop().run_in_executor(
                    None, decode_entries, entries, version, broker.settings["kgate.max.inflated.batch.bytes"])
            else:
                chunks, error = decode_entries(entries, version)
            if chunks and magic_of(chunks[0]) < 2:
                chunks[0] = message_set.from_offset(chunks[0], part.fetch_offset)
            records = b"".join(chunks)
            total += len(records)
            max_bytes -= len(records)
            counts = served.setdefault(partition.topic, [0, 0])
            counts[0] += len(records)
            counts[1] += sum(stored.header.record_count for stored in entries[:len(chunks)])
        responses.append((topic_request, PD(
            partition_index=part.partition, error_code=error, high_watermark=hw, last_stable_offset=lso,
            log_start_offset=start, preferred_read_replica=preferred, records=records,
            aborted_transactions=[PD.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                  for a in aborted] if aborted else None)))
    return responses, total, served


def _refused(index: int, error: ErrorCode):
    """A partition answered with an error: empty records, never null (librdkafka rejects a
    whole response holding a null record set)."""
    return PD(partition_index=index, error_code=error, high_watermark=-1, last_stable_offset=-1,
              log_start_offset=-1, records=b"")


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
            topics.append(R.FetchableTopicResponse(topic=topic_request.topic, topic_id=topic_request.topic_id,
                                                   partitions=[]))
            last = (topic_request.topic, topic_request.topic_id)
        topics[-1].partitions.append(pd)
    return topics
