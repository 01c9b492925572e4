"""The metadata event manager: one task, events in order, bursts collapsed, failures retried."""
import asyncio

from kgate.metadata.events import Event, EventManager


async def test_events_are_handled_one_at_a_time_in_order_and_observed():
    observed, handled, running = [], [], []

    async def handler(key):
        running.append(key)
        assert len(running) == 1, "two events handled at once"
        await asyncio.sleep(0.01)
        handled.append(key)
        running.remove(key)

    manager = EventManager(observe=lambda event, queued, took: observed.append((event, queued >= 0, took > 0)))
    manager.on(Event.TOPIC, handler)
    manager.start()
    for name in ("a", "b", "c"):
        manager.post(Event.TOPIC, name)
    await manager.drained()
    await manager.close()
    assert handled == ["a", "b", "c"]
    assert observed == [(Event.TOPIC, True, True)] * 3


async def test_a_burst_of_the_same_event_collapses_into_one_while_it_waits():
    handled = []

    async def handler(key):
        handled.append(key)

    manager = EventManager()
    manager.on(Event.BROKERS, handler)
    manager.on(Event.TOPIC, handler)
    for _ in range(5):
        manager.post(Event.BROKERS)
    manager.post(Event.TOPIC, "t")
    manager.post(Event.TOPIC, "t")
    manager.start()
    await manager.drained()
    manager.post(Event.BROKERS)  # handled already, so this is a new look
    await manager.drained()
    await manager.close()
    assert handled == [None, "t", None]


async def test_a_failed_event_does_not_stop_the_others_and_is_tried_again(monkeypatch):
    monkeypatch.setattr("kgate.metadata.events.RETRY_SECONDS", 0.01)
    attempts, handled = [], []

    async def flaky(key):
        attempts.append(key)
        if len(attempts) == 1:
            raise ConnectionError("store unreachable")
        handled.append(key)

    async def steady(key):
        handled.append(key)

    manager = EventManager()
    manager.on(Event.TOPICS, flaky)
    manager.on(Event.OWNERS, steady)
    manager.start()
    manager.post(Event.TOPICS)
    manager.post(Event.OWNERS, "t")
    deadline = asyncio.get_running_loop().time() + 5
    while len(handled) < 2 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    await manager.close()
    assert handled == ["t", None] and len(attempts) == 2
