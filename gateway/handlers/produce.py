"""Produce: validate each batch's header and CRC, assign offsets, store, answer when durable.

Magic-2 batches are never parsed record by record (DESIGN rule 2); legacy message
sets from v0-2 requests are parsed whole (every CRC, every wrapper), and the topic's
entry format decides how either is stored. A request is
answered only once every entry it appended is durable (acks=1 and acks=all alike,
since the ledger store is the replication); acks=0 gets no answer at all.
"""
import asyncio
import logging
import time
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import Operation, ResourceType
from kgate.metadata.cluster import BrokerInfo
from kgate.protocol import log_append_time, message_set, record_batch, record_compaction, record_walk
from kgate.protocol.conversion import magic_of
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.produce_answer import PartitionAnswer, ProduceAnswer, TopicAnswer
from kgate.storage.entry_formats import EntryFormat, ProducedRecords
from kgate.storage.ledger import LedgerFenced, StoreUnavailable
from kgate.storage.store_capabilities import Staging

from ..config import COMPRESSION_TYPES, is_compacted
from ..partition import Partition
from ..partition_router import ByReference, Client, Local, Refused, route
from ..partition_router import Operation as Route
from ..producer_state import SequenceError
from ..reference_outbox import Produce, ReferenceOutbox
from . import Context, handles
from .waiters import wait_woken, wake

log = logging.getLogger(__name__)

# Produce v7 is the first version whose clients may send zstd (KIP-110).
MIN_VERSION_FOR_ZSTD = 7
# Produce v3 is the first to carry magic-2 batches (KIP-98); v0-2 carry magic 0/1 sets.
MIN_VERSION_FOR_BATCHES = 3


@dataclass(slots=True)
class _Outcome:
    """One partition's answer: an error, or the base offset once ``durable`` completes."""
    error: ErrorCode
    base_offset: int = -1
    durable: asyncio.Future | None = None
    partition: Partition | None = None
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()
    log_start: int = -1
    # The broker's time the records were stamped with, on a LogAppendTime topic.
    log_append_time: int = -1
    # Sent to the owner by reference (gateway/zones.py): ``durable`` is the owner's answer then
    # (to the reference naming this partition, ``key``, among others of the same owner).
    by_reference: bool = False
    key: tuple[str, int] = ("", -1)

    def fail(self, error: ErrorCode) -> None:
        self.error, self.base_offset, self.log_append_time = error, -1, -1


class Turn:
    """A produce request's place among its connection's produces: it appends only after
    every earlier one has.

    Requests run as concurrent tasks, and any of them may pause before appending
    (inflating a large compressed batch in slices, a legacy set parsed off the event loop,
    staging for another zone's owner, waiting behind a ledger roll), so each takes its
    place when it starts, as Kafka handles a connection's requests one at a time. One
    future per request: what it costs is small beside a reordered partition.
    """

    __slots__ = ("connection", "previous", "mine")

    def __init__(self, connection) -> None:
        self.connection = connection
        self.previous: asyncio.Future | None = connection.appending
        self.mine: asyncio.Future | None = asyncio.get_running_loop().create_future()
        connection.appending = self.mine

    async def wait(self) -> None:
        """Return once the connection's earlier produces have appended (or given up)."""
        previous = self.previous
        if previous is not None and not previous.done():
            await previous
        self.previous = None

    def release(self) -> None:
        if self.mine is not None:
            self.mine.set_result(None)
            if self.connection.appending is self.mine:
                self.connection.appending = None
            self.mine = None


class _Inflation:
    """What a request's batches may still inflate to (kgate.max.inflated.*.bytes)."""

    __slots__ = ("batch_bytes", "request_left")

    def __init__(self, settings):
        self.batch_bytes = settings["kgate.max.inflated.batch.bytes"]
        self.request_left = settings["kgate.max.inflated.request.bytes"]

    def limit(self) -> int:
        return max(0, min(self.batch_bytes, self.request_left))


@handles(ApiKey.Produce)
async def produce(ctx: Context, request):
    return await produce_in_turn(ctx, request, Turn(ctx.connection))


async def produce_in_turn(ctx: Context, request, turn: "Turn"):
    """A Produce request appended in ``turn`` (its place among the connection's produces),
    answered once what it appended is durable (nothing for acks=0)."""
    metrics = ctx.broker.metrics
    began = time.monotonic()
    try:
        results = await _append_all(ctx, request, turn)
    finally:
        turn.release()
    appended = time.monotonic()
    metrics.produce_stage["append"].observe(appended - began)
    if request.acks == 0:
        return None
    durables = [r.durable for r in results.values() if r.durable is not None]
    if durables:
        # Kafka applies the timeout to acks=all's replication only: an acks=1 answer waits for
        # the append (here: until it is durable), or a client retrying on the timeout stores twice.
        await _all_done(durables, max(request.timeout_ms, 1) / 1000 if request.acks == -1 else None)
        metrics.produce_stage["fsync"].observe(time.monotonic() - appended)
    for result in results.values():
        _settle(ctx, result)
        if result.error:
            metrics.produce_failed(ErrorCode(result.error))
    return _response(results)


async def _append_all(ctx: Context, request, turn: "Turn") -> dict[tuple[str, int], "_Outcome"]:
    """Each partition's records appended (or refused with the Kafka error), in request order.

    Partitions going by reference are staged together (on object storage, into one WAL
    object: a PUT's wait for them all rather than one each) and go to each owner in one
    reference naming all of that owner's partitions; the request holds its turn until its
    references are sent, so they go out before the connection's next produce's."""
    results: dict[tuple[str, int], _Outcome] = {}
    references = _References(ctx, request, turn)
    inflation = _Inflation(ctx.broker.settings)
    try:
        for topic_data in request.topic_data:
            for data in topic_data.partition_data:
                key = (topic_data.name, data.index)
                try:
                    results[key] = await _append(ctx, request, topic_data.name, data, turn, inflation, references)
                except RejectedRecords as rejected:
                    results[key] = _Outcome(rejected.code, message=rejected.message,
                                            record_errors=rejected.record_errors)
                except KafkaError as refused:
                    results[key] = _refused(ctx, key, refused)
                    ctx.connection.refused_batches.refused(key, data.records or b"", refused)
        for key, answer in (await references.sent()).items():
            if isinstance(answer, KafkaError):
                results[key] = _refused(ctx, key, answer)
            else:
                results[key].durable = answer
    finally:  # given up (or answered): no reference of it goes to an owner any more
        references.cancel()
    return results


def _refused(ctx: Context, key: tuple[str, int], refused: KafkaError) -> "_Outcome":
    if refused.message:
        log.warning("produce to %s-%d from %s refused (%s): %s", key[0], key[1], ctx.connection.peer,
                    refused.code.name, refused.message)
    return _Outcome(refused.code)


def _settle(ctx: Context, result: "_Outcome") -> None:
    """An appended partition's answer from its durability (or, by reference, from the owner's answer)."""
    durable, partition = result.durable, result.partition
    if result.by_reference and durable is not None:
        _settle_reference(result, durable)
    elif durable is None or partition is None:  # appended ones have both
        return
    elif not durable.done():
        result.fail(ErrorCode.REQUEST_TIMED_OUT)
    elif not durable.cancelled() and isinstance(durable.exception(), LedgerFenced):
        # Another broker took the partition over before this entry was confirmed.
        result.fail(ErrorCode.NOT_LEADER_FOR_PARTITION)
    elif durable.cancelled() or durable.exception() is not None:
        _writes_failed(ctx, partition, durable.exception() or asyncio.CancelledError("entry not made durable"))
        result.fail(ErrorCode.KAFKA_STORAGE_ERROR)


def _writes_failed(ctx: Context, partition: Partition, failure: BaseException) -> None:
    """The store refused or lost a write: counted each time, said once per episode (by the partition)."""
    partition.writes_failed(failure)
    ctx.broker.metrics.storage_write_failed()


async def _all_done(futures, timeout: float | None) -> None:
    """Return once every future is done, or after ``timeout`` seconds (None: no limit); nothing is cancelled.

    What ``asyncio.wait(futures, timeout=...)`` does, without its argument checks and
    result sets: about a quarter of its cost, paid by every produce request.
    """
    pending = {future for future in futures if not future.done()}
    if not pending:
        return
    waiter = asyncio.get_running_loop().create_future()

    def on_done(future):
        pending.discard(future)
        if not pending:
            wake(waiter)

    for future in pending:
        future.add_done_callback(on_done)
    try:
        await wait_woken(waiter, timeout)
    finally:
        for future in pending:
            future.remove_done_callback(on_done)


async def _append(ctx: Context, request, topic_name, data, turn: Turn, inflation: _Inflation,
                  references: "_References") -> _Outcome:
    broker = ctx.broker
    version = ctx.version
    if request.acks not in (-1, 0, 1):
        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
    if request.transactional_id is not None and not ctx.allowed(
            Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    ctx.require(Operation.WRITE, ResourceType.TOPIC, topic_name)
    topic = broker.topics.get(topic_name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    decision = await route(broker, Client.of(ctx.connection), topic, data.index, Route.PRODUCE)
    if isinstance(decision, ByReference):
        return references.add(topic_name, data, decision.owner)
    if isinstance(decision, Refused):
        raise KafkaError(decision.error)
    assert isinstance(decision, Local)  # what the router answers a produce
    partition = decision.partition
    if not broker.writable:
        # The metadata session is suspended: this broker may be superseded any moment.
        raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION, "metadata session suspended")
    records = data.records
    if not records:
        raise KafkaError(ErrorCode.INVALID_RECORD, "empty record set")
    if len(records) > int(broker.topic_config(topic, "max.message.bytes")):
        raise KafkaError(ErrorCode.MESSAGE_SIZE_TOO_LARGE, f"{len(records)} bytes exceed max.message.bytes")
    view = memoryview(records)
    compacted = is_compacted(broker.topic_config(topic, "cleanup.policy"))
    produced = await _validated(view, version, inflation, compacted)
    if compacted:
        _check_keys(produced, f"{topic_name}-{data.index}")
    entry_format = broker.entry_format(topic)
    if produced.batch is not None and produced.batch.attributes & record_batch.TRANSACTIONAL_FLAG:
        _check_transactional(ctx, request.transactional_id, produced.batch, topic_name, data.index, entry_format)
    codec = COMPRESSION_TYPES[broker.topic_config(topic, "compression.type")]
    await turn.wait()
    append_time = -1
    if broker.topic_config(topic, "message.timestamp.type") == log_append_time.LOG_APPEND_TIME:
        append_time = int(time.time() * 1000)
        produced = produced.stamped(append_time)
    try:
        base, durable = await partition.append(produced, entry_format, codec)
    except LedgerFenced as exc:
        broker.reopen_fenced(topic_name, data.index)
        raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION, str(exc)) from None
    except StoreUnavailable as exc:
        _writes_failed(ctx, partition, exc)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR) from None
    except SequenceError as out_of_order:
        assert produced.batch is not None  # only batches are sequence-checked
        raise ctx.connection.refused_batches.answer((topic_name, data.index), produced.batch,
                                                    out_of_order) from None
    refused = ctx.connection.refused_batches
    if refused:  # almost never: a refusal before the sequence check on this connection
        refused.appended((topic_name, data.index), produced.batch)
    partition.writes_succeeded()
    partition.bytes_in += len(records)
    broker.metrics.produced(topic_name, len(records), produced.record_count)
    return _Outcome(ErrorCode.NONE, base, durable, partition, log_append_time=append_time)


class _References:
    """A request's partitions going by reference (gateway/zones.py): each record set staged in
    shared storage as it comes, then, in the connection's turn, one produce per owner naming
    all of that owner's partitions, put in the connection's outbox (gateway/reference_outbox.py:
    pipelined produces staged together share one KgateProduceReference per owner).

    The owner reads the bytes from storage (in the region, not across zones), appends them
    exactly as a direct produce (validation, idempotent sequences, fencing, transactions)
    and answers each partition on its own once durable; this broker answers the client with
    that. Like Kafka's forwarding (KIP-590's Envelope), the reference carries the client's
    principal and address, and the owner authorizes the produce as that client; this broker
    checked the client's Write before staging, so a refused client stages nothing. References
    go out in the connection's produce order, over the one link to each owner, which keeps
    that order (gateway/handlers/produce_reference.py), so a producer's batches reach the
    owner in the order it sent them.
    """

    __slots__ = ("ctx", "request", "turn", "staging", "owners")

    def __init__(self, ctx: Context, request, turn: Turn):
        self.ctx, self.request, self.turn = ctx, request, turn
        self.staging: dict[tuple[str, int], asyncio.Task] = {}  # key -> the staged name
        self.owners: dict[int, list[tuple[tuple[str, int], int]]] = {}  # owner -> (key, size) in request order

    def add(self, topic_name: str, data, owner: BrokerInfo) -> _Outcome:
        """Start staging ``data``'s records for ``owner``; the outcome is settled from its answer."""
        records = data.records
        if not records:
            raise KafkaError(ErrorCode.INVALID_RECORD, "empty record set")
        store = self.ctx.broker.ledgers
        if not isinstance(store, Staging):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{type(store).__name__} cannot stage record sets")
        key = (topic_name, data.index)
        self.staging[key] = asyncio.ensure_future(store.stage(f"{self.ctx.broker.node_id}-", records))
        self.owners.setdefault(owner.node_id, []).append((key, len(records)))
        return _Outcome(ErrorCode.NONE, by_reference=True, key=key)

    async def sent(self) -> dict[tuple[str, int], asyncio.Future | KafkaError]:
        """Each partition's future answer from its owner (the owner's answer to this produce), or
        why it was not sent."""
        if not self.owners:
            return {}
        out: dict[tuple[str, int], asyncio.Future | KafkaError] = {}
        staged: dict[tuple[str, int], str] = {}
        for key, task in self.staging.items():
            try:
                staged[key] = await task
            except OSError as exc:
                out[key] = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"staging failed: {exc}")
        ctx, request, turn = self.ctx, self.request, self.turn
        outbox = ctx.connection.references
        if outbox is None:
            outbox = ctx.connection.references = ReferenceOutbox(ctx.broker.peers, ctx.connection.principal,
                                                                 ctx.connection.peer)
        behind = turn.previous
        outbox.staged(behind)
        try:
            await turn.wait()
        finally:
            outbox.turn_came(behind, turn.mine)
        store = ctx.broker.ledgers
        assert isinstance(store, Staging)  # add() staged with it
        for owner, keys in self.owners.items():  # in the order each owner first appeared in the request
            names = [(topic, index, staged[(topic, index)], size) for (topic, index), size in keys
                     if (topic, index) in staged]
            if not names:
                continue
            produce = Produce(ctx.version, request.transactional_id, request.timeout_ms, names)
            produce.answer.add_done_callback(_unstage_when_answered(store, [name for _, _, name, _ in names]))
            outbox.add(owner, produce)
            out.update(((topic, index), produce.answer) for topic, index, _, _ in names)
        return out

    def cancel(self) -> None:
        for task in self.staging.values():
            task.cancel()


def _unstage_when_answered(store: Staging, names: list[str]):
    def unstage(_answer: asyncio.Future) -> None:
        for name in names:
            store.unstage(name)
    return unstage


def _settle_reference(result: _Outcome, answer: asyncio.Future) -> None:
    """The owner's answer to a produce sent by reference, as this broker's answer to the client."""
    if not answer.done():
        result.fail(ErrorCode.REQUEST_TIMED_OUT)
        return
    if answer.cancelled() or answer.exception() is not None:
        result.fail(ErrorCode.NOT_LEADER_FOR_PARTITION)  # the link to the owner failed: the client retries
        return
    topic, index = result.key
    owner = next((p for t in answer.result().topics if t.name == topic for p in t.partitions if p.index == index),
                 None)
    if owner is None:  # the owner did not answer for it: not appended there
        result.fail(ErrorCode.NOT_LEADER_FOR_PARTITION)
        return
    result.error, result.base_offset = ErrorCode(owner.error_code), owner.base_offset
    result.log_append_time = owner.log_append_time_ms
    result.log_start, result.message = owner.log_start_offset, owner.error_message


def _check_transactional(ctx: Context, transactional_id: str | None, header: record_batch.BatchHeader,
                         topic_name: str, index: int, entry_format: EntryFormat) -> None:
    """A transactional batch: sent with its transactional id, to a partition its transaction
    has added, in a format that keeps the transactional bit."""
    if transactional_id is None:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, "transactional batch without a transactional id")
    if not entry_format.stores_batches:
        raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         f"the {entry_format.name} entry format does not support transactions")
    ctx.broker.transactions.check_produce(transactional_id, header.producer_id, header.producer_epoch,
                                          (topic_name, index))


async def _validated(view: memoryview, version: int, inflation: _Inflation,
                     compacted: bool = False) -> ProducedRecords:
    """The record set checked through to its last record, inflating within the request's limits;
    for a ``compacted`` topic, the records without a key are found too (a second, per-record
    read that other topics never pay; in a thread for large batches, as legacy sets are parsed).

    Inflating and walking a magic-2 batch runs in slices with the event loop free in
    between; a compressed legacy set (parsed whole, per message) is parsed in a thread.
    """
    if version < MIN_VERSION_FOR_BATCHES:
        _check_legacy(view, version)
        limit = inflation.limit()
        if len(view) > message_set.ATTRIBUTES_AT and view[message_set.ATTRIBUTES_AT] & message_set.CODEC_MASK:
                parsed = await asyncio.get_running_loop().run_in_executor(None, message_set.parse, view, False, limit)
        else:
            parsed = message_set.parse(view, inflate_limit=limit)
        inflation.request_left -= parsed.inflated
        return ProducedRecords.of_message_set(view, parsed)
    header = _validate_batch(view, version)
    walked = record_walk.Walked()
    for _slice in record_walk.walk(view, header, inflation.limit(), walked):
        await asyncio.sleep(0)
    inflation.request_left -= walked.inflated
    null_keys = None
    if compacted:  # the walk inflated it within the batch limit already
        if header.record_count <= record_walk.SLICE_RECORDS:
            null_keys = record_compaction.null_key_indexes(view, header, inflation.batch_bytes)
        else:
                null_keys = await asyncio.get_running_loop().run_in_executor(
                None, record_compaction.null_key_indexes, view, header, inflation.batch_bytes)
    return ProducedRecords.of_batch(view, header, null_keys)


class RejectedRecords(KafkaError):
    """Records of a batch Kafka's log validator refuses one by one: the whole batch is
    refused, and Produce v8+ names each record (its index in the batch) and why."""

    def __init__(self, code: ErrorCode, record_errors: list[tuple[int, str]]):
        shown = ", ".join(f"[{index}: {message}]" for index, message in record_errors[:3])
        super().__init__(code, f"One or more records have been rejected due to {len(record_errors)} record errors "
                               f"in total, and only showing the first three errors at most: {shown}")
        self.record_errors = tuple(record_errors)


def _check_keys(produced: ProducedRecords, partition: str) -> None:
    """A compacted topic keeps the latest record per key, so a record without one is refused."""
    null_keys = produced.null_keys()
    if null_keys:
        message = f"Compacted topic cannot accept message without key in topic partition {partition}."
        raise RejectedRecords(ErrorCode.INVALID_RECORD, [(index, message) for index in null_keys])


def _check_legacy(view: memoryview, version: int) -> None:
    if magic_of(view) == 2:
        raise record_batch.InvalidBatch(ErrorCode.INVALID_RECORD, f"magic 2 in Produce v{version}")


def _validate_batch(view: memoryview, version: int) -> record_batch.BatchHeader:
    """Kafka's produce rules for v3+: exactly one magic-2 batch, header and CRC valid."""
    magic = magic_of(view)
    if magic != 2:
        raise record_batch.InvalidBatch(ErrorCode.INVALID_RECORD, f"Produce v{version} must carry magic 2, not {magic}")
    header = record_batch.validate(view)
    if header.size != len(view):
        raise record_batch.InvalidBatch(ErrorCode.INVALID_RECORD,
                                        f"Produce v{version} must carry exactly one record batch")
    if header.compression == record_batch.ZSTD and version < MIN_VERSION_FOR_ZSTD:
        raise record_batch.InvalidBatch(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"zstd in Produce v{version}")
    if header.is_control:
        raise record_batch.InvalidBatch(ErrorCode.INVALID_RECORD, "clients may not produce control batches")
    return header


def _response(results) -> ProduceAnswer:
    """Written by protocol.produce_answer, not kafka-python's classes: every produce pays for it."""
    by_topic: dict[str, list[PartitionAnswer]] = {}
    for (topic, index), outcome in results.items():
        log_start = outcome.partition.ledger.log_start_offset if outcome.partition is not None else outcome.log_start
        by_topic.setdefault(topic, []).append(PartitionAnswer(
            index, outcome.error, outcome.base_offset, outcome.log_append_time, log_start,
            outcome.message if outcome.record_errors else None, outcome.record_errors))
    return ProduceAnswer([TopicAnswer(topic, parts) for topic, parts in by_topic.items()])
