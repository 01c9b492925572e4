"""WriteTxnMarkers to another broker: how a coordinator ends a transaction in partitions it does not serve.

One writer per partition (DESIGN rule 5): a marker for a partition another broker owns
must be appended by that broker, so the coordinator asks it with Kafka's own
broker-to-broker request over the pooled link to that broker (gateway/peer_links.py),
which logs in with the inter-broker credentials: with an authorizer on, the owner
accepts markers only from a principal holding ClusterAction.
"""
from kafka.protocol.producer import WriteTxnMarkersRequest

from kgate.protocol.error_codes import ErrorCode

VERSION = 1  # the oldest the schemas keep; flexible
# A marker's answer: bounded so a broker that does not answer does not hold a transaction.
TIMEOUT_S = 10.0

Marker = WriteTxnMarkersRequest.WritableTxnMarker


async def send_marker(peers, node_id: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                      topic: str, index: int) -> ErrorCode:
    """Ask broker ``node_id`` to append one marker; its error for the partition.

    Raises PeerUnavailable or TimeoutError when the broker cannot be asked."""
    request = WriteTxnMarkersRequest(markers=[Marker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[Marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[index])])])
    response = await peers.request(node_id, request, VERSION, TIMEOUT_S)
    for marker in response.markers:
        for result in marker.topics:
            for partition in result.partitions:
                if result.name == topic and partition.partition_index == index:
                    return ErrorCode(partition.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR
