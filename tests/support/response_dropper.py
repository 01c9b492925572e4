"""A TCP proxy in front of a broker that loses chosen responses with their connection.

The request has reached the broker and been acted on, but the client never hears the
answer: the connection dies with the response in flight, exactly the case an
idempotent producer's retry must survive without storing a record twice. The proxy
reads Kafka's size-prefixed frames in both directions, so it knows which API each
response answers and can count what it dropped.
"""
import socket
import struct
import threading
from collections import deque

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")


def _read_frame(sock: socket.socket) -> bytes | None:
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    body = _read_exactly(sock, _SIZE.unpack(prefix)[0])
    return None if body is None else prefix + body


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        try:
            chunk = sock.recv(min(size, 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class ResponseDropper:
    """Drop every ``every``-th response to ``api_key``, ``limit`` times in all.

    The listening port exists from construction, so a broker can advertise it before
    the proxy learns where that broker listens (``forward_to``).
    """

    def __init__(self, api_key: int, every: int, limit: int):
        self.upstream: tuple[str, int] | None = None
        self.api_key = api_key
        self.every = every
        self.limit = limit
        self.dropped = 0
        self._seen = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def forward_to(self, upstream: tuple[str, int]) -> "ResponseDropper":
        self.upstream = upstream
        self._acceptor.start()
        return self

    def __enter__(self) -> "ResponseDropper":
        return self

    def __exit__(self, *exc) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _close(sock)
        self._acceptor.join(5)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            with self._lock:
                self._sockets += [client, server]
            in_flight: deque[int] = deque()
            threading.Thread(target=self._requests, args=(client, server, in_flight), daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, in_flight), daemon=True).start()

    def _requests(self, client, server, in_flight: deque) -> None:
        while (frame := _read_frame(client)) is not None:
            in_flight.append(_API_KEY.unpack_from(frame, 4)[0])
            try:
                server.sendall(frame)
            except OSError:
                break
        _close(client, server)

    def _responses(self, server, client, in_flight: deque) -> None:
        while (frame := _read_frame(server)) is not None:
            # acks=0 produces get no response, so only use this with requests that all get one.
            if in_flight.popleft() == self.api_key and self._should_drop():
                break
            try:
                client.sendall(frame)
            except OSError:
                break
        _close(client, server)

    def _should_drop(self) -> bool:
        with self._lock:
            self._seen += 1
            if self.dropped < self.limit and self._seen % self.every == 0:
                self.dropped += 1
                return True
            return False


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
