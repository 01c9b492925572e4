"""A link between brokers in different zones, compressed: each direction one deflate stream.

Across zones every byte is billed, and what a link carries there is small requests and
answers (references, standing read-end polls, forwarded coordinator requests) made mostly
of names and numbers the frames before it carried too: topic names, the client's address,
WAL object names, offsets a little above the last ones. Compressed one by one such frames
barely shrink; compressed as one raw deflate stream per direction (RFC 1951), each frame
flushed so that the other side can decode it at once, the stream's window
remembers the frames before and a repeated name costs a few bytes. This is WebSocket's
permessage-deflate with context takeover (RFC 7692), for the same reason. Each write ends
with zlib's partial flush rather than its sync flush: the other side can decode everything
written so far either way, and the partial flush's empty block is 10 bits where the sync
flush's is 4 bytes and more, a sixth of a small compressed frame. Frames like the zone
path's fell from 102 to 25 bytes (a reference), 65 to 13 (its answer) and 85 to 16 (a
read-end answer).

A link asks for it with KgateLinkDeflate (gateway/handlers/link_deflate.py) right after
ApiVersions, and sends nothing more until it is answered: everything after a NONE answer,
both ways, is compressed, and both ends switch at that answer. The bytes counted for the
link (``kgate_interbroker_bytes``) are then the compressed ones, as they cross the wire.
"""
import asyncio
import zlib
from collections.abc import Callable, Iterable, Iterator

CODEC = "deflate"  # what KgateLinkDeflate asks for
# zlib's default level: on frames of a few dozen to a few hundred bytes level 1 left up to
# a third more, and the CPU either takes is small beside encoding the frame.
LEVEL = 6
_RAW_DEFLATE = -15  # wbits: no zlib header or checksum (TCP has its own)
# At most this much is inflated at once, so a small compressed frame cannot make a broker
# hold a large inflated buffer before the frame limits see it.
INFLATE_STEP = 256 * 1024
READ_BYTES = 64 * 1024


class Deflater:
    """This end's outgoing stream."""

    def __init__(self) -> None:
        self._stream = zlib.compressobj(LEVEL, zlib.DEFLATED, _RAW_DEFLATE)

    def deflate(self, buffers: Iterable) -> bytes:
        """``buffers`` compressed and flushed: the other end can decode all of them now."""
        stream = self._stream
        return b"".join([*(stream.compress(buffer) for buffer in buffers), stream.flush(zlib.Z_PARTIAL_FLUSH)])


class Inflater:
    """The other end's stream, as it arrives (zlib.error: it is not a deflate stream)."""

    def __init__(self) -> None:
        self._stream = zlib.decompressobj(_RAW_DEFLATE)

    def inflate(self, data) -> Iterator[bytes]:
        """What ``data`` inflates to, in pieces of at most INFLATE_STEP bytes."""
        stream = self._stream
        yield stream.decompress(data, INFLATE_STEP)
        while stream.unconsumed_tail:
            yield stream.decompress(stream.unconsumed_tail, INFLATE_STEP)


class DeflatingTransport:
    """A serving connection's transport once its link is compressed: what the connection
    writes goes out compressed (one flush per write), and the compressed bytes are counted."""

    def __init__(self, transport: asyncio.Transport, count: Callable[[str, int], None]) -> None:
        self._transport = transport
        self._count = count
        self._deflater = Deflater()

    def write(self, data) -> None:
        self.writelines((data,))

    def writelines(self, buffers: Iterable) -> None:
        data = self._deflater.deflate(buffers)
        self._count("out", len(data))
        self._transport.write(data)

    def __getattr__(self, name: str):
        return getattr(self._transport, name)  # is_closing, close, pause_reading, ...: the transport's own


class InflatingBuffer:
    """A serving connection's reads once its link is compressed: asyncio reads into ``buffer``,
    and ``inflated(nbytes)`` counts those compressed bytes and gives what they inflate to."""

    def __init__(self, count: Callable[[str, int], None]) -> None:
        self.buffer = memoryview(bytearray(READ_BYTES))
        self._count = count
        self._inflater = Inflater()

    def inflated(self, nbytes: int) -> Iterator[bytes]:
        self._count("in", nbytes)
        return self._inflater.inflate(self.buffer[:nbytes])


class InflatingReader:
    """``readexactly`` over a link's stream reader whose bytes are compressed; the compressed
    bytes are counted as they arrive."""

    def __init__(self, reader: asyncio.StreamReader, count: Callable[[str, int], None]) -> None:
        self._reader = reader
        self._count = count
        self._inflater = Inflater()
        self._inflated = bytearray()

    async def readexactly(self, size: int) -> bytes:
        while len(self._inflated) < size:
            data = await self._reader.read(READ_BYTES)
            if not data:
                raise asyncio.IncompleteReadError(bytes(self._inflated), size)
            self._count("in", len(data))
            for piece in self._inflater.inflate(data):
                self._inflated += piece
        taken = bytes(self._inflated[:size])
        del self._inflated[:size]
        return taken
