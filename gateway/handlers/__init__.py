"""Request handlers: plain async functions grouped by API family.

A handler takes the request context and the decoded request and returns the
response object (or None when the client expects no answer, as for acks=0). No
handler touches a socket.
"""
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgate.protocol.headers import RequestHeader

from .broker_view import BrokerView

if TYPE_CHECKING:
    from ..connection import ConnectionInfo

_HANDLERS: dict[int, Callable[..., Awaitable]] = {}


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


def handles(api_key: int):
    def register(fn):
        _HANDLERS[api_key] = fn
        return fn
    return register


async def dispatch(ctx: Context, request):
    return await _HANDLERS[ctx.header.api_key](ctx, request)


def implemented() -> set[int]:
    return set(_HANDLERS)


from . import (  # noqa: E402,F401
    api_versions,
    cluster,
    configs,
    fetch,
    groups,
    leader_epochs,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    partitions,
    produce,
    producer_ids,
    producers,
    records,
    sasl,
    topics,
)
