"""KgateShareGone: a share group's coordinator tells a broker that members left or the group was deleted.

What those members hold on this broker goes back to the group, and a deleted group's
share-partitions are forgotten (gateway/shares/departures.py). Broker to broker only, like
WriteTxnMarkers: it needs CLUSTER_ACTION on the cluster.
"""
from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.api_versions import KGATE_SHARE_GONE
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import KgateShareGoneResponse

from . import Context, handles


@handles(KGATE_SHARE_GONE)
async def share_gone(ctx: Context, request):
    if not ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return KgateShareGoneResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    await ctx.broker.share_departures.apply(request.group_id, request.group_deleted, list(request.member_ids))
    return KgateShareGoneResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)
