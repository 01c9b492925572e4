"""Coordinator requests of a zone's clients, forwarded to the coordinator by a broker of their zone.

A group's coordinator is the owner of its ``__consumer_offsets`` partition, a transactional
id's the owner of its ``__transaction_state`` partition; either may sit in another zone, and
a client there would send every heartbeat, join, commit and transaction step across zones.
So FindCoordinator names a broker of the client's own zone (gateway/handlers/groups.py),
and that broker forwards the coordinator requests in a ``KgateForward`` envelope over its
link to the coordinator, answering the client with the coordinator's answer. As with
Kafka's forwarding (KIP-590's Envelope), the envelope carries the client's principal,
address and client id; the coordinator accepts it only from a peer holding ClusterAction
(brokers log in to each other, gateway/peer_links.py) and serves the inner request as
that client, through the very handler a direct request meets.

A JoinGroup waits at the coordinator for the rebalance, but the link answers each request
when ready (gateway/connection.py), so a parked join holds no heartbeat or commit. When the
coordinator cannot be asked, the request is served here, which answers NOT_COORDINATOR,
and the client looks its coordinator up again.
"""
import logging
from dataclasses import replace

from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_FORWARD, is_supported
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.headers import RequestHeader
from kgate.protocol.messages import REQUESTS, KgateForwardRequest, KgateForwardResponse

from ..peer_links import PeerUnavailable
from . import Context, dispatch, handles

log = logging.getLogger(__name__)

GROUP_REQUESTS = frozenset((ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup,
                            ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.ConsumerGroupHeartbeat,
                            ApiKey.TxnOffsetCommit))  # a transaction's offsets go to the group's coordinator
TRANSACTION_REQUESTS = frozenset((ApiKey.InitProducerId, ApiKey.AddPartitionsToTxn, ApiKey.AddOffsetsToTxn,
                                  ApiKey.EndTxn))
FORWARDED = GROUP_REQUESTS | TRANSACTION_REQUESTS
# Beyond a JoinGroup's rebalance timeout: how long the coordinator may take to answer.
ANSWER_TIMEOUT_S = 30.0


def coordinator_key(api_key: int, version: int, request) -> str | None:
    """The one group or transactional id a coordinator request is about (None: several, or
    none, as an idempotent producer's InitProducerId: served where it arrives)."""
    if api_key == ApiKey.AddPartitionsToTxn:  # v0-v3: Kafka's schema names the fields for those versions
        return request.v3_and_below_transactional_id
    if api_key in TRANSACTION_REQUESTS:
        return request.transactional_id
    if api_key == ApiKey.OffsetFetch and version >= 8:
        return request.groups[0].group_id if len(request.groups) == 1 else None
    return request.group_id


def coordinator_elsewhere(ctx: Context, key: str) -> int | None:
    """The coordinator to forward to: for a client of this broker's zone whose group's or
    transaction's coordinator is in another zone, that broker's id; else None (served here)."""
    connection, broker = ctx.connection, ctx.broker
    if connection.zone is None or connection.peer_broker is not None or connection.zone != broker.zone:
        return None
    coordinators = broker.transactions if ctx.header.api_key in TRANSACTION_REQUESTS else broker.groups
    owner = coordinators.coordinator_of(key)
    if owner is None or owner.node_id == broker.node_id or owner.rack == broker.zone:
        return None
    return owner.node_id


async def forwarded(ctx: Context, request):
    """The coordinator's answer to a zoned client's coordinator request, or None when it is served here."""
    key = coordinator_key(ctx.header.api_key, ctx.version, request)
    coordinator = coordinator_elsewhere(ctx, key) if key is not None else None
    if coordinator is None:
        return None
    version = ctx.version
    # Decoded objects have no header, which kafka-python's encode needs (only the body is sent).
    request.with_header(correlation_id=ctx.header.correlation_id, client_id=ctx.header.client_id)
    envelope = KgateForwardRequest(
        principal=ctx.connection.principal, client_address=ctx.connection.peer, client_id=ctx.header.client_id,
        request_api_key=ctx.header.api_key, request_api_version=version, request_data=request.encode(version=version))
    wait = max(getattr(request, "rebalance_timeout_ms", 0), 0) / 1000 + ANSWER_TIMEOUT_S
    try:
        answer = await ctx.broker.peers.request(coordinator, envelope, 0, wait)
    except (PeerUnavailable, TimeoutError) as exc:
        log.info("forwarding api key %d of %r to broker %d failed: %s", ctx.header.api_key, key, coordinator, exc)
        return None
    if answer.error_code != ErrorCode.NONE:
        log.warning("broker %d refused a forwarded request about %r: %s", coordinator, key,
                    ErrorCode(answer.error_code).name)
        return None
    return EncodedAnswer(answer.response_data)


class EncodedAnswer:
    """The coordinator's answer, encoded at the client's version already: written to the client
    as it came (the connection frames it like any response object), never decoded here."""

    __slots__ = ("body",)

    def __init__(self, body: bytes):
        self.body = body

    def encode(self, version: int) -> bytes:
        return self.body


@handles(KGATE_FORWARD)
async def serve_forwarded(ctx: Context, request):
    refused = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED
               if not ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
               else ErrorCode.INVALID_REQUEST if request.request_api_key not in FORWARDED
               or not is_supported(request.request_api_key, request.request_api_version) else None)
    if refused is not None:
        return KgateForwardResponse(error_code=refused, response_data=b"")
    api_key, version = request.request_api_key, request.request_api_version
    try:
        inner = REQUESTS[api_key].decode(request.request_data, version=version)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the asker's malformed request
        log.warning("a forwarded request of api key %d v%d from %s does not decode: %r", api_key, version,
                    ctx.connection.peer, exc)
        return KgateForwardResponse(error_code=ErrorCode.INVALID_REQUEST, response_data=b"")
    client = replace(ctx.connection, principal=request.principal, peer=request.client_address)
    header = RequestHeader(api_key, version, ctx.header.correlation_id, request.client_id)
    response = await dispatch(Context(ctx.broker, client, header), inner)
    return KgateForwardResponse(error_code=ErrorCode.NONE, response_data=response.encode(version=version))
