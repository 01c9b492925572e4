"""The metadata event manager: one task draining one queue, fed by metadata watches.

KoP grew one after stale caches and stale group state (its #617, #1301): changes seen
by watches were applied from several threads, in no fixed order, and some paths were
missed. Here a watch only posts "look again at X"; the events are handled one at a
time, in order, each by re-reading X from the store. A burst of changes to X while
its event waits collapses into that one event, since the re-read sees them all.
"""
import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0


class Event(enum.Enum):
    BROKERS = "brokers_changed"  # a broker joined or left
    TOPICS = "topics_changed"  # a topic was created or deleted (by any path)
    TOPIC = "topic_changed"  # one topic's node changed (partitions added, configs)
    OWNERS = "owners_changed"  # a claim on one of a topic's partitions was taken or released
    SERVING = "serving_changed"  # a broker opened or dropped partitions (metadata.serving; keyed by its id)
    PLACEMENTS = "placements_changed"  # a reassignment or the balancer placed partitions
    ACLS = "acls_changed"  # any broker or tool changed the access control lists
    BROKER_CONFIGS = "broker_configs_changed"  # any broker or tool changed dynamic broker configs
    GROUP_CONFIGS = "group_configs_changed"  # any broker or tool changed a group's configs
    SESSION = "session_changed"  # this broker's metadata session was suspended, restored or lost


# Called with the key its event was posted about, whose type depends on the event (a topic
# name, a Session, None), which a Callable type cannot say per event.
Handler = Callable[[Any], Awaitable[None]]
# (event, seconds waiting in the queue, seconds handling it)
Observer = Callable[[Event, float, float], None]


class EventManager:
    def __init__(self, observe: Observer | None = None):
        self._queue: asyncio.Queue = asyncio.Queue()
        self._waiting: set[tuple[Event, object]] = set()
        self._handlers: dict[Event, Handler] = {}
        self._observe = observe
        self._task: asyncio.Task | None = None

    def on(self, event: Event, handler: Handler) -> None:
        self._handlers[event] = handler

    def post(self, event: Event, key: object = None) -> None:
        """Queue ``event`` about ``key`` unless the same one is already waiting."""
        if (event, key) in self._waiting:
            return
        self._waiting.add((event, key))
        self._queue.put_nowait((event, key, time.monotonic()))

    def waiting(self, event: Event, key: object = None) -> bool:
        """Whether ``event`` about ``key`` is queued: the handler of an older change may leave
        to it what it has not done yet, since it re-reads the store."""
        return (event, key) in self._waiting

    def poster(self, event: Event, key: object = None) -> Callable[..., None]:
        """A watch callback that posts ``event`` about ``key`` (whatever it is called with)."""
        return lambda *_args: self.post(event, key)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="metadata-events")

    async def _run(self) -> None:
        while True:
            event, key, posted = await self._queue.get()
            self._waiting.discard((event, key))
            started = time.monotonic()
            try:
                await self._handlers[event](key)
            except asyncio.CancelledError:
                raise
            except Exception:
                # One failed event must not stop the rest; it is tried again shortly, as
                # a store that was unreachable may be back.
                log.exception("handling %s %s failed; retrying in %.0f s", event.value,
                              key if key is not None else "", RETRY_SECONDS)
                asyncio.get_running_loop().call_later(RETRY_SECONDS, self.post, event, key)
            finally:
                self._queue.task_done()
            if self._observe is not None:
                self._observe(event, started - posted, time.monotonic() - started)

    async def drained(self) -> None:
        """Return once every event posted so far has been handled."""
        await self._queue.join()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
