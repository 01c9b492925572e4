"""KgateProduceReference: append a record set another broker staged in shared storage.

A broker in a producer's zone takes produces for partitions owned in other zones
(gateway/handlers/produce.py, ``_by_reference``): it stages the record set in shared
storage and sends the owner this small request naming it, so the record bytes never
cross zones (AutoMQ's approach). The owner reads the bytes and appends them through
the very path of a direct Produce of the client's version: the same validation,
idempotent sequence checks, producer fencing and transaction checks, and an answer
only once the entry is durable.

Authorization: only a peer broker may send this (ClusterAction on the cluster: with an
authorizer on, peers log in as a super user, gateway/peer_links.py), and the produce is
then authorized as the client the peer names, from the address it names (Kafka's
forwarding, KIP-590, trusts its Envelope's principal on the same condition): Write on
each topic and on the transactional id, exactly as for the client's own Produce.

Order: the asking broker sends a producer's references in the order the producer sent
its batches, over its one link to this broker; this handler takes its place among the
link's produces before it pauses to read the staged bytes, as a produce that pauses
to inflate does, so they are appended in that order too. Version 1 carries several of a
client connection's produces (those whose staging ended together, gateway/reference_outbox.py),
each taking its place in the order listed and answered on its own.
"""
import asyncio
from dataclasses import replace

from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_PRODUCE_REFERENCE
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.headers import RequestHeader
from kgate.protocol.messages import KgateProduceReferenceResponse
from kgate.storage.ledger import STAGED_NAME
from kgate.storage.store_capabilities import Staging

from . import Context, handles
from .produce import Turn, produce_in_turn

R = KgateProduceReferenceResponse
P = R.ReferenceTopic.ReferencePartition
A = R.ProduceAnswer.AnswerTopic
Data = ProduceRequest.TopicProduceData


@handles(KGATE_PRODUCE_REFERENCE)
async def produce_reference(ctx: Context, request):
    if ctx.version == 0:
        return R(throttle_time_ms=0, topics=await _produce(ctx, request, request, Turn(ctx.connection),
                                                              R.ReferenceTopic, P))
    turns = [Turn(ctx.connection) for _ in request.produces]  # their places, in the order listed
    answered = await asyncio.gather(*(_produce(ctx, request, produce, turn, A, A.AnswerPartition)
                                      for produce, turn in zip(request.produces, turns, strict=True)))
    return R(throttle_time_ms=0, produces=[R.ProduceAnswer(topics=topics) for topics in answered])


async def _produce(ctx: Context, request, produce, turn: Turn, topic_class, partition_class) -> list:
    """One of the client's produces (``request`` names the client): each partition's answer, by topic."""
    try:
        refused: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        topics = []
        permitted = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        for topic in produce.topics:
            partitions = []
            for part in topic.partitions:
                if not permitted:
                    refused[(topic.name, part.index)] = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                    continue
                if not STAGED_NAME.fullmatch(part.staged):
                    refused[(topic.name, part.index)] = (ErrorCode.INVALID_REQUEST, "not a staged record set's name")
                    continue
                store = ctx.broker.ledgers
                if not isinstance(store, Staging):
                    refused[(topic.name, part.index)] = (ErrorCode.KAFKA_STORAGE_ERROR, "this broker's store "
                                                         "cannot read staged record sets")
                    continue
                try:
                    records = await store.read_staged(part.staged)
                except OSError as exc:
                    refused[(topic.name, part.index)] = (ErrorCode.KAFKA_STORAGE_ERROR, f"staged records: {exc}")
                    continue
                if len(records) != part.size:
                    refused[(topic.name, part.index)] = (ErrorCode.CORRUPT_MESSAGE,
                                                         f"staged {len(records)} bytes, expected {part.size}")
                    continue
                partitions.append(Data.PartitionProduceData(index=part.index, records=records))
            if partitions:
                topics.append(Data(name=topic.name, partition_data=partitions))
        answers = []
        if topics:
            # acks=-1 whatever the client asked: the asking broker answers it (or not, for acks=0).
            client_produce = ProduceRequest(transactional_id=produce.transactional_id, acks=-1,
                                            timeout_ms=produce.timeout_ms, topic_data=topics)
            header = RequestHeader(ApiKey.Produce, produce.produce_version, ctx.header.correlation_id,
                                   ctx.header.client_id)
            client = replace(ctx.connection, principal=request.principal, peer=request.client_address)
            answered = await produce_in_turn(Context(ctx.broker, client, header), client_produce, turn)
            answers = [(t.name, p) for t in answered.responses for p in t.partition_responses]
    finally:
        turn.release()
    by_topic: dict[str, list] = {}
    for (name, index), (code, message) in refused.items():
        by_topic.setdefault(name, []).append(partition_class(index=index, error_code=code, base_offset=-1,
                                                             log_start_offset=-1, error_message=message))
    for name, answer in answers:
        by_topic.setdefault(name, []).append(partition_class(
            index=answer.index, error_code=answer.error_code, base_offset=answer.base_offset,
            log_start_offset=answer.log_start_offset, error_message=answer.error_message,
            log_append_time_ms=answer.log_append_time_ms))
    return [topic_class(name=name, partitions=partitions) for name, partitions in by_topic.items()]
