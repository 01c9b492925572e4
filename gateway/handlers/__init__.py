"""Request handlers: plain async functions grouped by API family.

A handler takes the request context and the decoded request and returns the
response object (or None when the client expects no answer, as for acks=0). No
handler touches a socket.
"""
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgate.metadata.acls import Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.headers import RequestHeader

from .broker_view import BrokerView

if TYPE_CHECKING:
    from ..connection import ConnectionInfo

_HANDLERS: dict[int, Callable[..., Awaitable]] = {}

# The error a refusal carries, by the type of the resource refused (Kafka's).
_REFUSED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@dataclass(slots=True)
class Context:
    broker: BrokerView
    connection: "ConnectionInfo"
    header: RequestHeader
    # Fetched bytes this request took from the connection's response budget; the
    # connection gives them back once the answer is on the socket.
    held_bytes: int = 0

    @property
    def version(self) -> int:
        return self.header.api_version

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str, quietly: bool = False) -> bool:
        """Whether this connection's principal may do ``operation`` to the resource (the authorizer
        decides). ``quietly`` is for checks that only filter a listing: a refusal there is not
        logged or counted as a denial (Kafka's logIfDenied=false)."""
        return self.broker.authorizer.allowed(self.connection, operation, resource_type, name, quietly)

    def require(self, operation: Operation, resource_type: ResourceType, name: str) -> None:
        """:meth:`allowed`, or KafkaError with the resource type's authorization error."""
        if not self.allowed(operation, resource_type, name):
            raise KafkaError(_REFUSED[resource_type])

    def allowed_somewhere(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` to some resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer may write if it may write any topic)."""
        return self.broker.authorizer.allowed_somewhere(self.connection, operation, resource_type)


def handles(api_key: int):
    def register(fn):
        _HANDLERS[api_key] = fn
        return fn
    return register


async def dispatch(ctx: Context, request):
    if ctx.header.api_key in forward.FORWARDED:  # a zone's group requests may go to their coordinator
        answer = await forward.forwarded(ctx, request)
        if answer is not None:
            return answer
    return await _HANDLERS[ctx.header.api_key](ctx, request)


def implemented() -> set[int]:
    return set(_HANDLERS)


from . import (  # noqa: E402,F401
    acls,
    api_versions,
    cluster,
    configs,
    fetch,
    forward,
    groups,
    leader_epochs,
    link_deflate,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    partitions,
    produce,
    produce_reference,
    producer_ids,
    producers,
    read_end,
    reassignments,
    records,
    sasl,
    share_fetch,
    share_gone,
    share_offsets,
    share_state,
    streams_groups,
    topics,
    transactions,
)
