"""The time a coordinator sees: injected, so its timers and retries run on a fake clock in tests.

Shards' rules take ``now`` as an argument; the runtime reads it here, arms their
timers here, and marker delivery waits out its backoff here. The broker gives the
wall clock; a unit test gives a clock it advances by hand, so a session timeout or a
retry schedule is checked without waiting for it.
"""
import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch, as stored in Kafka's records."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once ``delay_ms`` have passed (at once when it is not positive)."""

    async def sleep(self, delay_ms: int) -> None:
        """Return once ``delay_ms`` have passed."""


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)

    async def sleep(self, delay_ms: int) -> None:
        await asyncio.sleep(max(delay_ms, 0) / 1000)
