"""A raw Kafka connection for tests: send any request object at any version, read the answer.

Real clients never send most of what tests need to send (stale generations, oversized
group ids, requests at versions a client would not choose), so tests speak the wire
directly through kafka-python's schema-generated classes.
"""
import socket
import struct

from kafka.protocol.api_key import ApiKey

from kgate.protocol.messages import RESPONSES

TIMEOUT = 20  # seconds; a bound on waiting for the broker, never an assertion about speed


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_response(sock: socket.socket, api_key: int, version: int, correlation_id: int):
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    payload = recv_exactly(sock, size)
    assert struct.unpack_from(">i", payload)[0] == correlation_id
    cls = RESPONSES[api_key]
    # Flexible versions answer with response header v1 (a tag section), ApiVersions never.
    header_size = 5 if cls.flexible_version_q(version) and api_key != ApiKey.ApiVersions else 4
    return cls.decode(payload[header_size:], version=version)


def closed_by_broker(sock: socket.socket) -> bool:
    """Whether the broker closed ``sock`` (an orderly close or a reset), waiting for it up to
    the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=TIMEOUT)


def encode_request(request, version: int, correlation_id: int = 1, client_id: str | None = "kgate-tests") -> bytes:
    """``request`` framed with its request header, by kafka-python."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(version=version, header=True, framed=True))


class Wire:
    """A long-lived raw connection: one request, one response (or several sent before their answers are read)."""

    def __init__(self, bootstrap: str, client_id: str = "kgate-tests"):
        self.sock = connect(bootstrap)
        self.client_id = client_id
        self.correlation_id = 0

    def call(self, request, version: int):
        return self.read(request, version, self.send(request, version))

    def send(self, request, version: int) -> int:
        """Send ``request`` without reading its answer; its correlation id, for :meth:`read`."""
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, version, self.correlation_id, self.client_id))
        return self.correlation_id

    def read(self, request, version: int, correlation_id: int):
        """The answer to ``request`` sent as ``correlation_id`` (answers come in the order sent)."""
        return read_response(self.sock, request.API_KEY, version, correlation_id)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
