"""The server side of one Kafka connection as a sans-IO state machine.

Bytes go in through :meth:`ServerConnection.receive_data`; :meth:`next_event` hands
out decoded requests or the reason the connection must close; :meth:`encode_response`
turns a response object back into a frame. The I/O layer around it owns sockets,
ordering and back-pressure.
"""
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from .api_versions import is_supported
from .frames import FrameSplitter, FrameTooLarge, InvalidFrameSize, frame_prefix
from .headers import MalformedHeader, RequestHeader, decode_request_header, encode_response_header, peek_header
from .messages import REQUESTS, RESPONSES


@dataclass(slots=True)
class RequestReceived:
    header: RequestHeader
    # None only for an ApiVersions request at a version we do not know: it is still
    # answered (error 35 with our ranges) so the client can step down.
    request: object | None


@dataclass(slots=True)
class ProtocolViolation:
    """The peer broke the protocol; the connection must be closed after logging ``reason``."""

    reason: str


class ServerConnection:
    __slots__ = ("_frames", "_closed")

    def __init__(self, max_frame_bytes: int):
        self._frames = FrameSplitter(max_frame_bytes)
        self._closed = False

    def receive_data(self, data: bytes) -> None:
        self._frames.feed(data)

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered

    def next_event(self) -> RequestReceived | ProtocolViolation | None:
        if self._closed:
            return None
        try:
            payload = self._frames.next_frame()
            if payload is None:
                return None
            return self._decode(payload)
        except (FrameTooLarge, InvalidFrameSize, MalformedHeader) as exc:
            return self._violation(str(exc))

    def _decode(self, payload: bytes) -> RequestReceived | ProtocolViolation:
        api_key, version, correlation_id = peek_header(payload)
        cls = REQUESTS.get(api_key)
        if not is_supported(api_key, version):
            if api_key == ApiKey.ApiVersions:
                return RequestReceived(RequestHeader(api_key, version, correlation_id, None), None)
            name = cls.__name__ if cls else f"api key {api_key}"
            return self._violation(f"unsupported request {name} v{version} (correlation id {correlation_id})")
        header, body_start = decode_request_header(payload, cls.flexible_version_q(version))
        try:
            request = cls.decode(memoryview(payload)[body_start:], version=version)
        except Exception as exc:  # kafka-python raises whatever its codecs hit on garbage
            return self._violation(f"undecodable {cls.__name__} v{version} body: {exc!r}")
        return RequestReceived(header, request)

    def _violation(self, reason: str) -> ProtocolViolation:
        self._closed = True
        return ProtocolViolation(reason)

    @staticmethod
    def encode_response(header: RequestHeader, response) -> list:
        """Frame ``response`` for ``header``'s request as buffers for ``writelines``.

        ApiVersions always answers with response header v0, and an ApiVersions request
        at an unknown version is answered in v0 format.
        """
        api_key = header.api_key
        version = header.api_version
        if api_key == ApiKey.ApiVersions:
            if not is_supported(api_key, version):
                version = 0
            flexible_header = False
        else:
            flexible_header = RESPONSES[api_key].flexible_version_q(version)
        body = response.encode(version=version)
        response_header = encode_response_header(header.correlation_id, flexible_header)
        return [frame_prefix(len(response_header) + len(body)) + response_header, body]
