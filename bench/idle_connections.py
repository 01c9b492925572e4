"""Many idle client connections held open against a broker, for what they cost it.

A broker in a fleet carries far more connections than it has busy clients (producers
that write once a minute, consumers of quiet topics, pooled admin clients); what each
one costs in memory, and whether the busy clients slow down beside them, is a question
of the connection's state, not of traffic. Each connection here does what a client
does first, an ApiVersions v0 request answered by the broker, and then stays silent.
"""
import contextlib
import socket
import struct
import time

API_VERSIONS = 18


def api_versions_request(correlation_id: int, client_id: bytes = b"idle") -> bytes:
    """ApiVersions v0 with request header v1: a frame every broker generation answers."""
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed an idle connection during its handshake")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def idle_connections(bootstrap: str, count: int, timeout: float = 60.0):
    """``count`` connections to ``bootstrap`` (``HOST:PORT[,HOST:PORT...]``, taken in turn, as
    clients of a cluster spread over its brokers), each answered once, open for the body of the block.

    All requests go out before any answer is read, so opening 1,000 costs about one round
    trip per connection of the broker's time, not of ours; the whole opening is bounded by
    ``timeout``.
    """
    addresses = [(host, int(port)) for host, _, port in (item.rpartition(":") for item in bootstrap.split(","))]
    deadline = time.monotonic() + timeout
    sockets: list[socket.socket] = []
    try:
        for index in range(count):
            sock = socket.create_connection(addresses[index % len(addresses)],
                                            timeout=max(0.1, deadline - time.monotonic()))
            sockets.append(sock)
            sock.sendall(api_versions_request(index))
        for index, sock in enumerate(sockets):
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            answer = _read_frame(sock)
            if struct.unpack_from(">i", answer)[0] != index:
                raise ConnectionError(f"idle connection {index}: answer to another request")
        yield len(sockets)
    finally:
        for sock in sockets:
            sock.close()
