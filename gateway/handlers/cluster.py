"""DescribeCluster: this broker, the cluster id, and this broker as the controller.

kgate brokers answer for the whole cluster as Metadata does: the brokers list is this
broker at the address the client should use, and the controller id is this broker
(a KRaft broker answers with a live broker id too). Endpoint types follow Kafka's
AuthHelper.computeDescribeClusterResponse: v1 may ask for brokers (1); asking a
broker for controllers (2) is MISMATCHED_ENDPOINT_TYPE and an unknown type
UNSUPPORTED_ENDPOINT_TYPE. Describing the cluster needs no permission (Kafka's
KafkaApis answers anyone); the authorized operations, when asked for, are those of a
principal that may DESCRIBE the cluster and none otherwise.
"""
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode

from . import Context, handles

R = DescribeClusterResponse

BROKERS = 1
CONTROLLERS = 2


@handles(ApiKey.DescribeCluster)
async def describe_cluster(ctx: Context, request):
    broker = ctx.broker
    endpoint_type = request.endpoint_type if ctx.version >= 1 else BROKERS
    if endpoint_type not in (BROKERS, CONTROLLERS):
        return _refused(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type == CONTROLLERS:
        return _refused(ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                        "CONTROLLER")
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=BROKERS,
             cluster_id=broker.cluster_id, controller_id=broker.controller_id,
             brokers=[R.DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=rack)
                      for node_id, (host, port, rack) in broker.live_brokers(ctx.connection).items()],
             authorized_operations=_authorized_operations(ctx) if request.include_cluster_authorized_operations
             else None)


def _authorized_operations(ctx: Context) -> set[int]:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return set()
    return ctx.broker.authorizer.authorized_operations(ctx.connection, ResourceType.CLUSTER, CLUSTER_NAME)


def _refused(error, message):
    """Kafka's answer to a refused request: the error and the schema's defaults."""
    return R(throttle_time_ms=0, error_code=error, error_message=message, endpoint_type=BROKERS,
             cluster_id="", controller_id=-1, brokers=[], authorized_operations=None)
