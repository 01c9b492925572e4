"""A scenario's raw connection to one broker, recording every exchange.

Scenarios send requests at chosen versions (including ones no client would send) through
kafka-python's schema-generated classes, as kgate's own tests do; each exchange is kept as
plain data (the request and the decoded response as dicts) for normalizing and comparing.
A broker that closes the connection is an answer too ("closed"); the next call reconnects.
"""
import secrets
import socket
import struct
from dataclasses import dataclass, field

from kgate.protocol.messages import RESPONSES
from tests.support.wire import TIMEOUT, connect, encode_request, read_response, recv_exactly

CLOSED = "closed"


@dataclass
class Exchange:
    label: str
    api_key: int
    version: int
    request: dict
    response: dict | str


@dataclass
class Session:
    """``token`` makes this scenario's topic, group and transactional ids unique on a broker
    shared with other scenarios; normalization replaces it."""
    bootstrap: str
    token: str = field(default_factory=lambda: secrets.token_hex(4))
    exchanges: list[Exchange] = field(default_factory=list)
    sock: socket.socket | None = None
    correlation_id: int = 0

    def name(self, base: str) -> str:
        return f"conf-{base}-{self.token}"

    def _socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = connect(self.bootstrap)
        return self.sock

    def call(self, label: str, request, version: int, record: bool = True):
        """Send ``request`` at ``version``; the decoded response, or None if the broker closed
        the connection. ``record=False`` for setup steps whose answer is not compared."""
        self.correlation_id += 1
        frame = encode_request(request, version, self.correlation_id, "conformance")
        response: object = None
        try:
            sock = self._socket()
            sock.sendall(frame)
            if request.expect_response():
                response = read_response(sock, request.API_KEY, version, self.correlation_id)
        except (ConnectionError, TimeoutError, struct.error, OSError):
            self.close()
        if record:
            self.exchanges.append(Exchange(label, request.API_KEY, version, request.to_dict(),
                                           CLOSED if response is None and request.expect_response()
                                           else response.to_dict(json=False) if response is not None else {}))
        return response

    def call_raw(self, label: str, api_key: int, version: int, frame: bytes, answer_version: int | None = None):
        """Send bytes no request class would encode; the answer's payload (decoded as
        ``answer_version`` of the API's response when given), or None when the broker closed
        the connection (what Kafka does with a request it cannot parse)."""
        try:
            sock = self._socket()
            sock.sendall(frame)
            sock.settimeout(TIMEOUT)
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            payload = recv_exactly(sock, size)
        except (ConnectionError, TimeoutError, struct.error, OSError):
            self.close()
            payload = None
        answer: dict | str = CLOSED
        if payload is not None:
            answer = ({"raw": payload[4:].hex()} if answer_version is None
                      else RESPONSES[api_key].decode(payload[4:], version=answer_version).to_dict(json=False))
        self.exchanges.append(Exchange(label, api_key, version, {"raw": frame.hex()}, answer))
        return payload

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

