"""WriteTxnMarkers to another broker: how a coordinator ends a transaction in partitions it does not serve.

One writer per partition (DESIGN rule 5): a marker for a partition another broker owns
must be appended by that broker, so the coordinator asks it with Kafka's own
broker-to-broker request, over the owner's PLAINTEXT listener, one short-lived
connection per request (markers are one per transaction and partition, not a hot path).
"""
import asyncio
import itertools
import struct

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from kgate.protocol.error_codes import ErrorCode

VERSION = 1  # the oldest the schemas keep; flexible
_CORRELATION = itertools.count(1)
_SIZE = struct.Struct(">i")
# A marker's answer: bounded so a broker that does not answer does not hold a transaction.
TIMEOUT_S = 10.0
MAX_RESPONSE_BYTES = 1 << 20

Marker = WriteTxnMarkersRequest.WritableTxnMarker


async def send_marker(address: tuple[str, int], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                      topic: str, index: int) -> ErrorCode:
    """Ask the broker at ``address`` to append one marker; its error for the partition."""
    request = WriteTxnMarkersRequest(markers=[Marker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[Marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[index])])])
    request.API_VERSION = VERSION
    request.with_header(correlation_id=next(_CORRELATION), client_id="kgate-transaction-coordinator")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), TIMEOUT_S)
    try:
        writer.write(request.encode(header=True, framed=True))
        size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(_SIZE.size), TIMEOUT_S))[0]
        if not 0 < size <= MAX_RESPONSE_BYTES:
            raise ConnectionError(f"WriteTxnMarkers response of {size} bytes")
        payload = await asyncio.wait_for(reader.readexactly(size), TIMEOUT_S)
    finally:
        writer.close()
    response = WriteTxnMarkersResponse.decode(payload, version=VERSION, header=True)
    for marker in response.markers:
        for result in marker.topics:
            for partition in result.partitions:
                if result.name == topic and partition.partition_index == index:
                    return ErrorCode(partition.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR
