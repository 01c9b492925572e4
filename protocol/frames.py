"""Length-prefixed framing: a 4-byte big-endian size, then that many bytes.

Every Kafka request and response, and every raw SASL token after a v0 handshake,
travels in this framing, so the splitter is shared by both connection modes.

The splitter owns its receive buffers and lends them out (:meth:`FrameSplitter.get_buffer`,
:meth:`FrameSplitter.buffer_updated`), so the I/O layer can read the socket straight
into them (``recv_into``) instead of creating a new ``bytes`` per read and copying it
again to gather and cut frames. Small frames are gathered many to one read in a
reusable buffer and copied out once; a large frame gets a buffer of its own, lent
until the frame is whole and then handed out as it is, with no copy at all.
"""
import struct

_SIZE = struct.Struct(">i")

# A frame at least this large (payload bytes) is read into a buffer of its own. Below
# it, copying the frame once out of the shared buffer costs less than what reading it
# alone costs: a read per frame instead of many frames per read, and an allocation.
# At 64 KiB a copy takes a few microseconds, about one pass of the event loop.
OWN_BUFFER_MIN_BYTES = 64 * 1024

# The reusable buffer, at its largest: as large as asyncio's own socket reads, so small
# frames still come many to a read, and at least four times a small frame, so moving the
# unread part of one to the front (when less than a quarter is left free) is rare and short.
RECEIVE_BUFFER_BYTES = 256 * 1024
# ... and at its smallest. It starts there and doubles while reads fill it, and goes back
# there once it is empty after a read that used less than a quarter of it: a busy
# connection reads 256 KiB at a time, an idle one (most of them, in an estate of old
# clients) holds 16 KiB, not 256 (2,000 idle connections held 560 MiB).
RECEIVE_BUFFER_MIN_BYTES = 16 * 1024

# A large frame's own buffer starts at twice what has arrived of it (at least the
# smallest receive buffer), so a peer that sends a 100 MB prefix and trickles bytes
# (slowloris) holds 16 KiB of memory and of the request budget, where a buffer allocated
# on the prefix (as Kafka allocates the whole frame) let a few dozen such peers take the
# budget every real large produce needs. Once that first buffer fills, the peer is
# streaming: the frame grows to this size at once (what real clients' requests stay under:
# librdkafka's message.max.bytes and Java's max.request.size are 1 MB), then doubles. Not
# doubling from the start, because fresh memory costs a page fault per 4 KiB, and a buffer
# doubling from 32 KiB to 1 MiB cost milliseconds a frame here.
OWN_BUFFER_STREAMING_BYTES = 1024 * 1024


class FrameTooLarge(Exception):
    """A size prefix above the configured limit (``socket.request.max.bytes``)."""


class InvalidFrameSize(Exception):
    """A negative size prefix: the peer is not speaking Kafka framing."""


class FrameSplitter:
    """Gathers received bytes and hands out whole frames without their size prefix.

    Frames handed out never share memory with anything the splitter writes to later:
    a decoded request may keep views into its frame (the record bytes of a produce)
    while later bytes arrive.
    """

    __slots__ = ("_buffer", "_view", "_start", "_end", "_frame", "_frame_size", "_filled", "max_frame_bytes",
                 "limit_name", "_lent", "_last_read")

    def __init__(self, max_frame_bytes: int, limit_name: str = "socket.request.max.bytes"):
        # Received and not yet handed out: self._buffer[self._start:self._end].
        self._buffer = bytearray(RECEIVE_BUFFER_MIN_BYTES)
        self._view = memoryview(self._buffer)
        self._start = self._end = 0
        # How much of the shared buffer the last read was lent, and how much it filled (-1: fitted since).
        self._lent = 0
        self._last_read = -1
        # A large frame read into a buffer of its own (until taken), and how much of it has arrived.
        self._frame: bytearray | None = None
        self._frame_size = 0
        self._filled = 0
        # Lowered while a SASL connection is unauthenticated (sasl.server.max.receive.size).
        self.max_frame_bytes = max_frame_bytes
        self.limit_name = limit_name

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty); report them with :meth:`buffer_updated`.

        Calling it again without reporting anything is harmless (a read that failed).
        """
        if self._frame is None:
            self._start_own_buffer()
        frame = self._frame
        if frame is not None and self._filled < self._frame_size:  # _reading_own_buffer(), with frame narrowed
            if self._filled == len(frame):
                frame = self._grow_own_buffer(frame)
            return memoryview(frame)[self._filled:]
        if self._start == self._end:
            self._start = self._end = 0
        self._fit_to_reads()
        if len(self._buffer) - self._end < len(self._buffer) // 4:
            self._make_room()
        view = self._view[self._end:]
        self._lent = len(view)
        return view

    def _fit_to_reads(self) -> None:
        """Size the shared buffer to the last read: double it if that filled what it was lent, back
        to the smallest once empty if it used less than a quarter. Replaced, never resized (a view
        lent for the last read may still be held); unread bytes move to the front of the new one."""
        last_read, self._last_read = self._last_read, -1
        size = len(self._buffer)
        if last_read < 0:  # no read since the last fitting (get_buffer called again)
            return
        if last_read >= self._lent and size < RECEIVE_BUFFER_BYTES:
            size = min(2 * size, RECEIVE_BUFFER_BYTES)
        elif last_read < size // 4 and size > RECEIVE_BUFFER_MIN_BYTES and self._start == self._end:
            size = RECEIVE_BUFFER_MIN_BYTES
        else:
            return
        pending = self._end - self._start
        view, self._buffer = self._view, bytearray(size)
        self._view = memoryview(self._buffer)
        self._view[:pending] = view[self._start:self._end]
        self._start, self._end = 0, pending

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the buffer :meth:`get_buffer` returned last."""
        if self._reading_own_buffer():
            self._filled += nbytes
        else:
            self._end += nbytes
            self._last_read = nbytes

    def _reading_own_buffer(self) -> bool:
        """A large frame is still arriving in its own buffer.

        Once it is whole, bytes that follow go to the shared buffer until it is taken.
        """
        return self._frame is not None and self._filled < self._frame_size

    def feed(self, data: bytes) -> None:
        """Receive ``data`` as if read into the lent buffers (for callers that already hold bytes)."""
        rest = memoryview(data)
        while rest:
            buffer = self.get_buffer()
            count = min(len(buffer), len(rest))
            buffer[:count] = rest[:count]
            self.buffer_updated(count)
            rest = rest[count:]

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out in a frame, size prefixes included."""
        own = 4 + self._filled if self._frame is not None else 0
        return self._end - self._start + own

    def next_frame(self) -> bytes | bytearray | None:
        """The next whole frame's payload, or None; raises on a size prefix that is refused.

        A small frame is copied out of the shared buffer, which is reused; a large one is
        handed out in its own buffer, which the splitter then forgets.
        """
        if self._frame is not None:
            if self._filled < self._frame_size:
                return None
            frame, self._frame = self._frame, None
            return frame
        if self._end - self._start < 4:
            return None
        size = self._checked_size()
        start = self._start + 4
        if self._end - start < size:
            return None
        self._start = start + size
        return bytes(self._view[start:self._start])

    def _checked_size(self) -> int:
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        if size < 0:
            raise InvalidFrameSize(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame of {size} bytes exceeds {self.limit_name}={self.max_frame_bytes}")
        return size

    @property
    def frame_buffer_bytes(self) -> int:
        """The size of the buffer of its own a large frame holds, or gets at the next :meth:`get_buffer`.

        What a frame still arriving costs beyond the shared buffer, so the I/O layer can
        count it against its request budgets before lending the memory, and stop reading
        instead when they have no room.
        """
        frame = self._frame
        if frame is None:
            size = self._own_buffer_frame_size()
            return 0 if size is None else self._upfront_bytes(size)
        if self._filled == len(frame) < self._frame_size:
            return self._grown_bytes(frame)
        return len(frame)

    @property
    def large_frame_arriving(self) -> bool:
        """A frame read into a buffer of its own has started and is not yet whole."""
        return self._reading_own_buffer() or (self._frame is None and self._own_buffer_frame_size() is not None)

    def _own_buffer_frame_size(self) -> int | None:
        """The size of the first unread frame if it is to go to a buffer of its own, else None.

        Only when that frame is the first unread one: frames before it are still to be
        handed out from the shared buffer. A prefix :meth:`next_frame` will refuse gets none.
        """
        pending = self._end - self._start
        if pending < 4:
            return None
        try:
            size = self._checked_size()
        except (InvalidFrameSize, FrameTooLarge):
            return None
        if size < OWN_BUFFER_MIN_BYTES or pending - 4 >= size:
            return None
        return size

    def _upfront_bytes(self, size: int) -> int:
        """Twice what has arrived of the frame, at least the smallest receive buffer, at most the frame.

        Proportional to what the peer has sent (see the note on own buffers at the top).
        """
        return min(size, max(RECEIVE_BUFFER_MIN_BYTES, 2 * (self._end - self._start - 4)))

    def _start_own_buffer(self) -> None:
        """Move a large frame whose prefix has arrived, and only part of its payload, to a buffer of its own."""
        size = self._own_buffer_frame_size()
        if size is None:
            return
        self._filled = self._end - self._start - 4
        self._frame_size = size
        self._frame = bytearray(self._upfront_bytes(size))
        self._frame[:self._filled] = self._view[self._start + 4:self._end]
        self._start = self._end = 0

    def _grow_own_buffer(self, frame: bytearray) -> bytearray:
        """Grow a large frame's buffer (up to its size) once what arrived fills it.

        Replaced, never resized: the view lent for the last read may still be held.
        Growing copies the first buffer once, and beyond 1 MiB each byte about once more.
        """
        grown = bytearray(self._grown_bytes(frame))
        grown[:self._filled] = frame
        self._frame = grown
        return grown

    def _grown_bytes(self, frame: bytearray) -> int:
        return min(self._frame_size, max(2 * len(frame), OWN_BUFFER_STREAMING_BYTES))

    def _make_room(self) -> None:
        """Move the unread bytes to the front, or into a larger buffer if they fill most of this one.

        A larger buffer is needed only while frames are received and not taken (a SASL
        connection waiting for an outcome) or for a frame about to be refused. The old
        buffer is replaced, never resized: a caller may still hold the view it was lent.
        """
        pending = self._end - self._start
        if pending > len(self._buffer) * 3 // 4:
            self._buffer = bytearray(2 * len(self._buffer))
            view, self._view = self._view, memoryview(self._buffer)
            self._view[:pending] = view[self._start:self._end]
        else:
            self._view[:pending] = self._view[self._start:self._end]
        self._start, self._end = 0, pending


def frame_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
