"""Length-prefixed framing: a 4-byte big-endian size, then that many bytes.

Every Kafka request and response, and every raw SASL token after a v0 handshake,
travels in this framing, so the splitter is shared by both connection modes.
"""
import struct

_SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    """A size prefix above the configured limit (``socket.request.max.bytes``)."""


class InvalidFrameSize(Exception):
    """A negative size prefix: the peer is not speaking Kafka framing."""


class FrameSplitter:
    """Accumulates bytes and yields whole frames without their size prefix."""

    __slots__ = ("_buffer", "max_frame_bytes", "limit_name")

    def __init__(self, max_frame_bytes: int, limit_name: str = "socket.request.max.bytes"):
        self._buffer = bytearray()
        # Lowered while a SASL connection is unauthenticated (sasl.server.max.receive.size).
        self.max_frame_bytes = max_frame_bytes
        self.limit_name = limit_name

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def next_frame(self) -> bytes | None:
        buf = self._buffer
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0:
            raise InvalidFrameSize(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame of {size} bytes exceeds {self.limit_name}={self.max_frame_bytes}")
        end = 4 + size
        if len(buf) < end:
            return None
        frame = bytes(buf[4:end])
        del buf[:end]
        return frame


def frame_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
