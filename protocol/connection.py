"""The server side of one Kafka connection as a sans-IO state machine.

Bytes go in through :meth:`ServerConnection.receive_data`, or are read straight into
the buffers it lends (:meth:`ServerConnection.get_buffer`); :meth:`next_event` hands
out decoded requests, raw SASL tokens, or the reason the connection must close;
:meth:`encode_response` turns a response object back into a frame. The I/O layer
around it owns sockets, ordering, back-pressure and the SASL mechanisms.

On a SASL listener the connection starts unauthenticated, where Kafka allows only
ApiVersions and SaslHandshake. SaslHandshake v1 leads to SaslAuthenticate requests;
v0 (0.10-era clients) switches the connection to raw token frames, a 4-byte length
and the token with no Kafka header, until authentication completes. After each
handshake or token the machine pauses (decodes nothing more) until the I/O layer
reports the outcome with :meth:`resume` or :meth:`authenticated`, or closes, since a
client must not send its next token before it has the answer to the last. As in h11,
:meth:`next_event` says *why* it has nothing (:data:`NEED_DATA`, :data:`PAUSED`,
:data:`CLOSED`), and a call the state does not allow raises
:class:`LocalProtocolError` rather than an ``assert`` that ``python -O`` would drop.
"""
from dataclasses import dataclass
from enum import Enum

from kafka.protocol.api_key import ApiKey

from .api_versions import is_supported
from .frames import FrameSplitter, FrameTooLarge, InvalidFrameSize, frame_prefix
from .headers import MalformedHeader, RequestHeader, decode_request_header, encode_response_header, peek_header
from .messages import REQUESTS, RESPONSES
from .null_fields import null_field


class LocalProtocolError(Exception):
    """The I/O layer drove the machine out of order (a bug on our side, not the peer's):
    the connection cannot go on and is closed."""


class Waiting(Enum):
    """Why :meth:`ServerConnection.next_event` has no event."""

    NEED_DATA = "need data"  # no whole frame buffered: read more
    PAUSED = "paused"        # a SASL outcome is awaited: decode nothing more until it is known
    CLOSED = "closed"        # a violation ended the connection


NEED_DATA, PAUSED, CLOSED = Waiting.NEED_DATA, Waiting.PAUSED, Waiting.CLOSED


@dataclass(slots=True)
class RequestReceived:
    header: RequestHeader
    # None only for an ApiVersions request at a version we do not know: it is still
    # answered (error 35 with our ranges) so the client can step down.
    request: object | None


@dataclass(slots=True)
class SaslTokenReceived:
    """A raw SASL token frame (after SaslHandshake v0)."""

    token: bytes | bytearray


class AuthState(Enum):
    AUTHENTICATED = "authenticated"   # every supported request is served
    HANDSHAKE = "handshake"           # only ApiVersions and SaslHandshake
    AUTHENTICATE = "authenticate"     # after SaslHandshake v1: only SaslAuthenticate
    RAW_TOKENS = "raw tokens"         # after SaslHandshake v0: frames are tokens
    PAUSED = "paused"                 # waiting for the outcome of a handshake or token


_BEFORE_AUTHENTICATION = {AuthState.HANDSHAKE: (ApiKey.ApiVersions, ApiKey.SaslHandshake),
                          AuthState.AUTHENTICATE: (ApiKey.SaslAuthenticate,)}


@dataclass(slots=True)
class ProtocolViolation:
    """The peer broke the protocol; the connection must be closed after logging ``reason``."""

    reason: str


class ServerConnection:
    __slots__ = ("_frames", "_closed", "_state", "_next_state", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int, sasl_max_bytes: int | None = None):
        """``sasl_max_bytes`` set: a SASL listener, whose unauthenticated frames are capped at it."""
        self._max_frame_bytes = max_frame_bytes
        self._closed = False
        if sasl_max_bytes is None:
            self._state = AuthState.AUTHENTICATED
            self._frames = FrameSplitter(max_frame_bytes)
        else:
            self._state = AuthState.HANDSHAKE
            self._frames = FrameSplitter(min(sasl_max_bytes, max_frame_bytes), "sasl.server.max.receive.size")
        # Where resume() leads; every pause sets it first.
        self._next_state = self._state

    @property
    def auth_state(self) -> AuthState:
        return self._state

    def resume(self) -> None:
        """The handshake or token was accepted and the exchange goes on."""
        self._expect_paused("resume")
        self._state = self._next_state

    def authenticated(self) -> None:
        """The client is authenticated: from now on it may send any request."""
        self._expect_paused("authenticated")
        self._state = AuthState.AUTHENTICATED
        self._frames.max_frame_bytes, self._frames.limit_name = self._max_frame_bytes, "socket.request.max.bytes"

    def _expect_paused(self, call: str) -> None:
        if self._state is not AuthState.PAUSED:
            raise LocalProtocolError(f"{call}() with no SASL step awaiting its outcome (state {self._state.value})")

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the peer should be read into (see :class:`FrameSplitter`)."""
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the buffer :meth:`get_buffer` returned last."""
        self._frames.buffer_updated(nbytes)

    def receive_data(self, data: bytes) -> None:
        self._frames.feed(data)

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered

    @property
    def frame_buffer_bytes(self) -> int:
        """See :attr:`FrameSplitter.frame_buffer_bytes`."""
        return self._frames.frame_buffer_bytes

    @property
    def large_frame_arriving(self) -> bool:
        return self._frames.large_frame_arriving

    def next_event(self) -> RequestReceived | SaslTokenReceived | ProtocolViolation | Waiting:
        if self._closed:
            return CLOSED
        if self._state is AuthState.PAUSED:
            return PAUSED
        try:
            payload = self._frames.next_frame()
            if payload is None:
                return NEED_DATA
            if self._state is AuthState.RAW_TOKENS:
                self._pause(AuthState.RAW_TOKENS)
                return SaslTokenReceived(payload)
            return self._decode(payload)
        except (FrameTooLarge, InvalidFrameSize, MalformedHeader) as exc:
            return self._violation(str(exc))

    def _pause(self, then: AuthState) -> None:
        self._state, self._next_state = AuthState.PAUSED, then

    def _decode(self, payload: bytes | bytearray) -> RequestReceived | ProtocolViolation:
        api_key, version, correlation_id = peek_header(payload)
        allowed = _BEFORE_AUTHENTICATION.get(self._state)
        if allowed is not None and api_key not in allowed:
            return self._violation(f"api key {api_key} v{version} (correlation id {correlation_id}) "
                                   f"is not allowed before authentication ({self._state.value})")
        if not is_supported(api_key, version):
            if api_key == ApiKey.ApiVersions:
                return RequestReceived(RequestHeader(api_key, version, correlation_id, None), None)
            known = REQUESTS.get(api_key)
            name = known.__name__ if known else f"api key {api_key}"
            return self._violation(f"unsupported request {name} v{version} (correlation id {correlation_id})")
        cls = REQUESTS[api_key]  # every supported API has its class
        header, body_start = decode_request_header(payload, cls.flexible_version_q(version))
        try:
            request = cls.decode(memoryview(payload)[body_start:], version=version)
        except Exception as exc:  # kafka-python raises whatever its codecs hit on garbage
            return self._violation(f"undecodable {cls.__name__} v{version} body: {exc!r}")
        null = null_field(cls, request, version)
        if null is not None:  # Kafka's reader refuses it and the broker closes the connection
            return self._violation(f"{cls.__name__} v{version} (correlation id {correlation_id}): "
                                   f"non-nullable field {null} is null")
        if allowed is not None and api_key == ApiKey.SaslHandshake:
            self._pause(AuthState.RAW_TOKENS if version == 0 else AuthState.AUTHENTICATE)
        elif allowed is not None and api_key == ApiKey.SaslAuthenticate:
            self._pause(AuthState.AUTHENTICATE)
        return RequestReceived(header, request)

    def _violation(self, reason: str) -> ProtocolViolation:
        self._closed = True
        return ProtocolViolation(reason)

    @staticmethod
    def encode_response(header: RequestHeader, response) -> list:
        """Frame ``response`` for ``header``'s request as a list of buffers.

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
        # Fetch's answer (protocol.fetch_answer) is buffers, its record bytes passed through uncopied.
        body = response.encode(version) if api_key == ApiKey.Fetch else [response.encode(version=version)]
        response_header = encode_response_header(header.correlation_id, flexible_header)
        head = frame_prefix(len(response_header) + sum(map(len, body))) + response_header
        if len(body) == 1:
            return [head, body[0]]
        return [head + body[0], *body[1:]]  # a spliced body starts with a small piece

    @staticmethod
    def encode_token(token: bytes) -> list:
        """A raw SASL token frame (the answer to a token after SaslHandshake v0)."""
        return [frame_prefix(len(token)), token]
