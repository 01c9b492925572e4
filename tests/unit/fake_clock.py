"""A clock the test moves by hand: coordinator timers and retry backoffs fire when it says."""
import asyncio
import heapq
import itertools
from collections.abc import Callable


class FakeTimer:
    def __init__(self):
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000):
        self.now = now_ms
        self._due: list[tuple[int, int, Callable[[], None], FakeTimer]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._due, (self.now + max(delay_ms, 0), next(self._order), callback, timer))
        return timer

    async def sleep(self, delay_ms: int) -> None:
        woken = asyncio.get_running_loop().create_future()
        self.call_later(delay_ms, lambda: woken.done() or woken.set_result(None))
        await woken

    @property
    def armed(self) -> int:
        """Timers still to fire."""
        return sum(1 for *_, timer in self._due if not timer.cancelled)

    async def advance(self, ms: int) -> None:
        """Move time on by ``ms``, firing what falls due in deadline order, and let the tasks
        they wake run before the next one."""
        target = self.now + ms
        await settle()
        while self._due and self._due[0][0] <= target:
            deadline, _, callback, timer = heapq.heappop(self._due)
            self.now = max(self.now, deadline)
            if not timer.cancelled:
                callback()
                await settle()
        self.now = target
        await settle()


async def settle(rounds: int = 50) -> None:
    """Let ready tasks run until the loop has nothing left to do now (no time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
