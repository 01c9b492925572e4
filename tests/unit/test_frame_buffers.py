"""The frame splitter's receive buffers: what is read into the buffers it lends comes out
as exactly the frames sent, a large frame is handed out in the buffer it was read into,
and no frame handed out changes when more bytes arrive."""
import random
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgate.protocol.frames import (
    OWN_BUFFER_MIN_BYTES,
    OWN_BUFFER_STREAMING_BYTES,
    RECEIVE_BUFFER_BYTES,
    RECEIVE_BUFFER_MIN_BYTES,
    FrameSplitter,
    FrameTooLarge,
    InvalidFrameSize,
)
from tests.unit.request_frames import frame

MAX = 1 << 20
MIB = 1024 * 1024


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def read(splitter: FrameSplitter, data: bytes) -> None:
    """One socket read of ``data`` into the lent buffer (``data`` must fit)."""
    buffer = splitter.get_buffer()
    assert 0 < len(data) <= len(buffer)
    buffer[:len(data)] = data
    splitter.buffer_updated(len(data))


def take(splitter: FrameSplitter) -> list:
    frames = []
    while (taken := splitter.next_frame()) is not None:
        frames.append(taken)
    return frames


def receive(splitter: FrameSplitter, stream: bytes, read_sizes: list[int], lend: bool, take_each_read: bool) -> list:
    """Deliver ``stream`` in reads of at most ``read_sizes`` (cycled) and of what the lent buffer holds."""
    frames, pos, reads = [], 0, 0
    while pos < len(stream):
        size = min(read_sizes[reads % len(read_sizes)], len(stream) - pos)
        reads += 1
        if lend:
            size = min(size, len(splitter.get_buffer()))
            read(splitter, stream[pos:pos + size])
        else:
            splitter.feed(stream[pos:pos + size])
        pos += size
        if take_each_read:
            taken = take(splitter)
            frames += taken
            assert splitter.buffered == pos - sum(4 + len(f) for f in frames)
    return frames + take(splitter)


# Sizes on both sides of the own-buffer threshold, and larger than the shared buffer.
AROUND_THE_THRESHOLD = [0, 1, 7, OWN_BUFFER_MIN_BYTES - 1, OWN_BUFFER_MIN_BYTES, OWN_BUFFER_MIN_BYTES + 1,
                        RECEIVE_BUFFER_BYTES + 3, 2]


@pytest.mark.parametrize("lend", [True, False], ids=["lent buffers", "feed"])
def test_a_byte_at_a_time_gives_every_frame_back(lend):
    payloads = [payload(size, seed) for seed, size in enumerate(AROUND_THE_THRESHOLD)]
    stream = b"".join(frame(p) for p in payloads)
    assert receive(FrameSplitter(MAX), stream, [1], lend, take_each_read=True) == payloads


@pytest.mark.parametrize("lend", [True, False], ids=["lent buffers", "feed"])
def test_every_split_into_two_reads_gives_every_frame_back(lend):
    payloads = [payload(size, size) for size in (0, 3, 1, 40, 0, 12)]
    stream = b"".join(frame(p) for p in payloads)
    for cut in range(1, len(stream)):
        for take_each_read in (True, False):
            assert receive(FrameSplitter(MAX), stream, [cut, len(stream)], lend, take_each_read) == payloads


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(0, 50) | st.integers(OWN_BUFFER_MIN_BYTES - 6, OWN_BUFFER_MIN_BYTES + 6)
                      | st.integers(OWN_BUFFER_MIN_BYTES + 7, RECEIVE_BUFFER_BYTES + 70_000), max_size=6),
       read_sizes=st.lists(st.integers(1, 5) | st.integers(6, 70_000) | st.integers(70_001, 400_000), max_size=8),
       lend=st.booleans(), take_each_read=st.booleans())
def test_any_reads_of_any_frames_give_exactly_those_frames(sizes, read_sizes, lend, take_each_read):
    """Not taking frames after each read is a SASL connection waiting for an outcome."""
    payloads = [payload(size, seed) for seed, size in enumerate(sizes)]
    stream = b"".join(frame(p) for p in payloads)
    splitter = FrameSplitter(MAX)
    # One larger read per cycle keeps the number of reads of a long stream bounded.
    assert receive(splitter, stream, [*read_sizes, 50_000], lend, take_each_read) == payloads
    assert splitter.buffered == 0


@pytest.mark.parametrize("prefix_cut", [1, 2, 3, 4])
def test_a_large_frame_is_handed_out_in_the_buffer_it_was_read_into(prefix_cut):
    """No copy when it is handed out: the last buffer it grew into is the frame."""
    data = payload(3 * RECEIVE_BUFFER_BYTES, 1)
    stream = frame(data)
    splitter = FrameSplitter(MAX)
    read(splitter, stream[:prefix_cut])
    read(splitter, stream[prefix_cut:100])
    at = 100
    while at < len(stream):
        lent = splitter.get_buffer()
        read(splitter, stream[at:at + len(lent)])
        at += len(lent)
    taken = splitter.next_frame()
    assert taken == data and lent.obj is taken
    assert splitter.buffered == 0 and len(splitter.get_buffer()) == RECEIVE_BUFFER_MIN_BYTES


def test_frames_handed_out_stay_intact_while_more_arrives():
    """A decoded request may keep views into its frame (produce's records) across later reads."""
    first = [payload(size, seed) for seed, size in enumerate([10, OWN_BUFFER_MIN_BYTES - 1, 200_000])]
    later = [payload(size, seed) for seed, size in enumerate([OWN_BUFFER_MIN_BYTES - 1] * 20 + [200_000], 100)]
    splitter = FrameSplitter(MAX)
    taken = receive(splitter, b"".join(frame(p) for p in first), [70_000], True, True)
    views = [memoryview(f) for f in taken]
    assert receive(splitter, b"".join(frame(p) for p in later), [70_000], True, True) == later
    assert [bytes(v) for v in views] == taken == first


@pytest.mark.parametrize("lend", [True, False], ids=["lent buffers", "feed"])
@pytest.mark.parametrize("size,error", [(MAX + 1, FrameTooLarge), (2**31 - 1, FrameTooLarge),
                                        (-1, InvalidFrameSize), (-(2**31), InvalidFrameSize)])
def test_a_refused_size_allocates_nothing_and_raises_as_before(lend, size, error):
    splitter = FrameSplitter(MAX)
    prefix = struct.pack(">i", size)
    tracemalloc.start()
    try:
        for data in (prefix[:2], prefix[2:] + b"x" * 100):
            if lend:
                read(splitter, data)
            else:
                splitter.feed(data)
        splitter.get_buffer()  # where the next read would go
        allocated = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert allocated < 64 * 1024
    message = f"exceeds socket.request.max.bytes={MAX}" if error is FrameTooLarge else f"negative frame size {size}"
    with pytest.raises(error, match=message):
        splitter.next_frame()


def test_a_large_frame_of_exactly_the_limit_is_accepted_and_one_more_byte_refused():
    limit = OWN_BUFFER_MIN_BYTES + 10
    data = payload(limit, 3)
    assert receive(FrameSplitter(limit), frame(data), [5, 1000], True, True) == [data]
    with pytest.raises(FrameTooLarge):
        receive(FrameSplitter(limit), frame(data + b"x"), [5, 1000], True, True)


@pytest.mark.parametrize("size", [OWN_BUFFER_MIN_BYTES, MIB - 1, MIB, MIB + 1, 3 * MIB + 5])
def test_a_large_frame_grows_into_place(size):
    data = payload(size, 11)
    tail = payload(100, 12)
    frames = receive(FrameSplitter(8 * MIB), frame(data) + frame(tail), [70_001, 300_000, 9], True, True)
    assert frames == [data, tail]


@pytest.mark.parametrize("sent", [0, 1000, 16_000])
def test_a_frame_still_arriving_holds_memory_in_proportion_to_what_was_sent(sent):
    """A 100 MB prefix and then a trickle (slowloris) used to hold a 1 MiB buffer; now twice what arrived."""
    splitter = FrameSplitter(100 * MIB)
    tracemalloc.start()
    try:
        read(splitter, struct.pack(">i", 50 * MIB) + b"x" * sent)  # and then the peer sends nothing
        splitter.get_buffer()
        allocated = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    own = max(RECEIVE_BUFFER_MIN_BYTES, 2 * sent)
    assert splitter.frame_buffer_bytes == own
    assert allocated < own + RECEIVE_BUFFER_BYTES + 64 * 1024  # and the shared buffer the bytes came in
    assert splitter.next_frame() is None and splitter.buffered == 4 + sent


def test_the_buffer_a_large_frame_needs_is_told_before_it_is_lent():
    """The I/O layer counts it against its budgets first (and may read no more instead)."""
    size = 3 * MIB
    splitter = FrameSplitter(8 * MIB)
    assert splitter.frame_buffer_bytes == 0 and not splitter.large_frame_arriving
    read(splitter, struct.pack(">i", size) + b"x" * 10_000)
    start = 2 * 10_000
    assert splitter.frame_buffer_bytes == start and splitter.large_frame_arriving
    lent = splitter.get_buffer()
    assert len(lent.obj) == start
    read(splitter, b"y" * len(lent))  # the first buffer is full: the peer is streaming, so 1 MiB next
    assert splitter.frame_buffer_bytes == OWN_BUFFER_STREAMING_BYTES == MIB
    assert len(splitter.get_buffer().obj) == MIB
    read(splitter, b"z" * 1000)
    assert splitter.frame_buffer_bytes == MIB and splitter.large_frame_arriving
    while splitter.frame_buffer_bytes < size:  # then doubling, up to the frame
        read(splitter, b"z" * len(splitter.get_buffer()))
    assert splitter.frame_buffer_bytes == size
    read(splitter, b"z" * len(splitter.get_buffer()))
    assert not splitter.large_frame_arriving
    assert len(splitter.next_frame()) == size and splitter.frame_buffer_bytes == 0


def test_the_shared_buffer_grows_while_reads_fill_it_and_shrinks_once_they_do_not():
    """An idle connection holds the smallest buffer; a busy one reads up to 256 KiB at a time."""
    splitter = FrameSplitter(MAX)
    small = frame(payload(100, 1))
    assert len(splitter.get_buffer()) == RECEIVE_BUFFER_MIN_BYTES
    stream = b"".join(frame(payload(1000, seed)) for seed in range(1000))  # about 1 MB of small frames
    sizes, pos, frames = [], 0, []
    while pos < len(stream):
        lent = splitter.get_buffer()
        sizes.append(len(lent.obj))
        count = min(len(lent), len(stream) - pos)  # the peer keeps the socket full: each read fills the buffer
        read(splitter, stream[pos:pos + count])
        pos += count
        frames += take(splitter)
    assert len(frames) == 1000
    assert sizes[:5] == [RECEIVE_BUFFER_MIN_BYTES * 2**i for i in range(5)] and max(sizes) == RECEIVE_BUFFER_BYTES
    read(splitter, small)  # traffic falls to a small request now and then
    assert take(splitter) == [payload(100, 1)]
    assert len(splitter.get_buffer()) == RECEIVE_BUFFER_MIN_BYTES


def test_idle_connections_hold_the_smallest_buffer():
    tracemalloc.start()
    try:
        splitters = [FrameSplitter(MAX) for _ in range(200)]
        for splitter in splitters:
            read(splitter, frame(payload(60, 2)))
            take(splitter)
            splitter.get_buffer()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 200 * (RECEIVE_BUFFER_MIN_BYTES + 2048)
