"""A zone broker's standing KgateReadEnd poll, spaced by ``kgate.zone.read.end.interval.ms``
(gateway/followers.py): every answer of the owner crosses zones, so with an interval the
poll goes out again no sooner than that after its last request, however soon it is answered.

The owner here is a stand-in for the peer link (the layer below the poll), answering each
request at once with nothing moved: the fastest an owner can make the poll turn."""
import asyncio
import time
from types import SimpleNamespace

import pytest

from kgate.gateway import followers as followers_module
from kgate.gateway.followers import Followers
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import KgateReadEndResponse

JITTER_S = 0.2


class Owner:
    """The peer link to broker 1: records when each KgateReadEnd went out and what it named."""

    def __init__(self):
        self.sent: list[tuple[float, int, int]] = []  # (time, poll epoch, partitions named)
        self.epoch = 0

    def version(self, node_id, api_key, highest):
        return highest

    async def request(self, node_id, request, version, timeout):
        self.sent.append((time.monotonic(), request.poll_epoch,
                          sum(len(topic.partitions) for topic in request.topics)))
        self.epoch += 1
        await asyncio.sleep(0)  # an answer comes back through the event loop, as over a link
        R = KgateReadEndResponse
        # An opened poll is answered for every partition it names; a continued one, for none (nothing moved).
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, poll_epoch=self.epoch, store_position=None,
                 topics=[R.ReadEndTopic(name=topic.name, partitions=[R.ReadEndTopic.ReadEndPartition(
                     partition_index=p.partition_index, error_code=ErrorCode.NONE, high_watermark=0,
                     log_start_offset=0) for p in topic.partitions]) for topic in request.topics])


@pytest.fixture(autouse=True)
def views_caught_up_at_once(monkeypatch):
    """The views' catch-up from shared storage (the layer below), done: nothing to read."""
    async def caught_up(partition, answer):
        return (partition.topic, partition.index), None
    monkeypatch.setattr(followers_module, "_catch_up", caught_up)


def followers(interval: float) -> tuple[Followers, Owner]:
    owner = Owner()
    broker = SimpleNamespace(node_id=0, ledgers=None, metadata=None, topics={}, peers=owner,
                             leader=lambda topic, index: SimpleNamespace(node_id=1))
    return Followers(broker, interval), owner


def partition(index: int):
    return SimpleNamespace(topic="t", index=index, ledger=SimpleNamespace(high_watermark=0))


async def run_poll(interval: float, requests: int) -> list[tuple[float, int, int]]:
    found, owner = followers(interval)
    poll = found._poll_for(1)
    poll.add([partition(0), partition(1)], time.monotonic())
    try:
        async with asyncio.timeout(30):
            while len(owner.sent) < requests:
                await asyncio.sleep(0.01)
    finally:
        poll.stop()
    return owner.sent[:requests]


@pytest.mark.parametrize("interval", [0.5, 1.0])
async def test_a_continued_poll_goes_out_no_sooner_than_the_interval_after_the_last(interval):
    sent = await run_poll(interval, 4)
    assert [(epoch, named) for _, epoch, named in sent] == [(0, 2), (1, 0), (2, 0), (3, 0)]
    gaps = [b[0] - a[0] for a, b in zip(sent, sent[1:])]
    # Timed where the owner takes each request, a moment after the poll sent it: the gaps may
    # come short of the poll's own by that moment's jitter (under a millisecond alone, tens of
    # ms on a loaded machine); unspaced, an owner that answers at once sees gaps of about 0.
    assert min(gaps) >= interval - JITTER_S, gaps


async def test_without_an_interval_the_poll_goes_out_again_as_soon_as_it_is_answered():
    sent = await run_poll(0.0, 50)  # an owner answering at once: 50 turns take a moment, not 50 intervals
    assert [epoch for _, epoch, _ in sent] == list(range(50))


async def test_a_partition_added_during_the_interval_opens_the_poll_again_at_once():
    found, owner = followers(30.0)
    poll = found._poll_for(1)
    poll.add([partition(0)], time.monotonic())
    try:
        async with asyncio.timeout(10):  # a third of the interval
            while not owner.sent:
                await asyncio.sleep(0.01)
            poll.add([partition(1)], time.monotonic())  # a fetch for a partition the poll does not hold
            while len(owner.sent) < 2:
                await asyncio.sleep(0.01)
    finally:
        poll.stop()
    assert [(epoch, named) for _, epoch, named in owner.sent] == [(0, 1), (0, 2)]
