"""KgateLinkDeflate: a peer broker asks that its link be compressed from the answer on.

Only a peer broker's link (its client id says so) that holds ClusterAction, as for every
broker-to-broker request; the connection itself switches once the NONE answer is written
(gateway/connection.py, gateway/link_deflate.py).
"""
from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_LINK_DEFLATE
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import KgateLinkDeflateResponse

from ..link_deflate import CODEC
from . import Context, handles


@handles(KGATE_LINK_DEFLATE)
async def link_deflate(ctx: Context, request):
    peer = ctx.connection.peer_broker is not None
    if not peer or not ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif request.codec != CODEC:
        error = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    else:
        error = ErrorCode.NONE
    return KgateLinkDeflateResponse(throttle_time_ms=0, error_code=error)
