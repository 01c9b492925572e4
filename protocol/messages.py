"""Request and response classes by API key, from kafka-python's schema-generated module.

Kafka 4.0's schemas dropped the oldest versions of some APIs (Produce v0-2, Fetch
v0-3, ListOffsets v0, ...) from ``validVersions`` but kept their fields annotated, and
kafka-python's classes accept every version from 0 up, so one class per API serves
every generation we advertise. The APIs kafka-python has no schema for are generated
the same way from Kafka's JSON schemas kept in ``protocol/schemas``.
"""
from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.api_message import ApiMessage

from . import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    @classmethod
    def json_patch(cls, json):
        # AuthorizedOperations as a set of operation numbers, kafka-python's way for this field.
        described = next(f for f in json["fields"] if f["name"] == "Groups")
        next(f for f in described["fields"] if f["name"] == "AuthorizedOperations")["type"] = "bitfield"
        return json


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    @classmethod
    def json_patch(cls, json):
        # AuthorizedOperations as a set of operation numbers, kafka-python's way for this field.
        next(f for f in json["fields"][1]["fields"] if f["name"] == "AuthorizedOperations")["type"] = "bitfield"
        return json


class StreamsGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    @classmethod
    def json_patch(cls, json):
        # AuthorizedOperations as a set of operation numbers, kafka-python's way for this field.
        next(f for f in json["fields"][1]["fields"] if f["name"] == "AuthorizedOperations")["type"] = "bitfield"
        return json


class ShareFetchRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


# The share-state APIs (KIP-932): a share-partition's leader reads and writes its state at the share
# coordinator (gateway/handlers/share_state.py).
class InitializeShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


# kgate's own broker-to-broker APIs, in a private key range no Kafka API uses
# (gateway/peer_links.py): advertised by ApiVersions to peer brokers only, accepted from any peer.
class KgateReadEndRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateReadEndResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateProduceReferenceRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateProduceReferenceResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateLinkDeflateRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateLinkDeflateResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateForwardRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateForwardResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateShareGoneRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class KgateShareGoneResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


_MODULES = (admin, consumer, metadata, producer, sasl)
_OWN = (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
        ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareFetchRequest, ShareFetchResponse,
        ShareAcknowledgeRequest, ShareAcknowledgeResponse, DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsResponse, AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
        InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, ReadShareGroupStateRequest,
        ReadShareGroupStateResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
        DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, ReadShareGroupStateSummaryRequest,
        ReadShareGroupStateSummaryResponse, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse,
        StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, KgateReadEndRequest, KgateReadEndResponse,
        KgateProduceReferenceRequest, KgateProduceReferenceResponse, KgateForwardRequest, KgateForwardResponse,
        KgateShareGoneRequest, KgateShareGoneResponse, KgateLinkDeflateRequest, KgateLinkDeflateResponse)


def _classes(suffix: str) -> dict:
    found = {}
    for module in _MODULES:
        for name in module.__all__:
            cls = getattr(module, name)
            if name.endswith(suffix) and hasattr(cls, "API_KEY"):
                found[cls.API_KEY] = cls
    for cls in _OWN:
        if cls.__name__.endswith(suffix):
            found[cls.API_KEY] = cls
    return found


REQUESTS = _classes("Request")
RESPONSES = _classes("Response")
