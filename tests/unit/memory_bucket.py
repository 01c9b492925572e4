"""An in-memory stand-in for ``ObjectClient`` (same methods, same errors) whose faults a test
arms: a slow PUT, a failed PUT, a conditional PUT whose precondition fails, a listing that
leaves keys out, a ranged GET cut short. For unit tests of the object store's parts, the
layer above the client; the client itself is tested against SeaweedFS."""
import asyncio
from collections import Counter

from prometheus_client import Histogram

from kgate.storage.stores.object_client import ObjectExists


class MemoryBucket:
    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.put_latency = Histogram("kgate_object_put_seconds", "PUT time", registry=None)
        self.puts: list[str] = []  # keys of every PUT asked for, in order
        self.held: dict[int, asyncio.Event] = {}  # PUT number -> gate it waits on (a slow PUT)
        self.failing_puts = 0  # the next this many PUTs fail, as after the client's retries
        self.taken: set[str] = set()  # conditional PUTs of these keys find them taken
        self.unlisted: set[str] = set()  # listings leave these keys out
        self.cut: dict[str, int] = {}  # ranged GETs of this key return this many bytes fewer

    def hold_put(self, number: int) -> asyncio.Event:
        """PUT ``number`` (from 0) waits until the returned event is set."""
        gate = self.held[number] = asyncio.Event()
        return gate

    async def put(self, key: str, data) -> None:
        number = len(self.puts)
        self.puts.append(key)
        if number in self.held:
            await self.held[number].wait()
        if self.failing_puts:
            self.failing_puts -= 1
            raise OSError(f"PUT {key}: injected failure")
        self.objects[key] = bytes(data)
        self.calls["put"] += 1
        self.bytes["put"] += len(data)

    async def create(self, key: str, data) -> None:
        if key in self.objects or key in self.taken:
            raise ObjectExists(key)
        await self.put(key, data)

    async def get(self, key: str) -> bytes | None:
        self.calls["get"] += 1
        return self.objects.get(key)

    async def get_range(self, key: str, start: int, end: int) -> memoryview:
        self.calls["get"] += 1
        if key not in self.objects:
            raise FileNotFoundError(key)
        return memoryview(self.objects[key][start:end - self.cut.get(key, 0)])

    async def get_tail(self, key: str, size: int) -> memoryview:
        self.calls["get"] += 1
        if key not in self.objects:
            raise FileNotFoundError(key)
        return memoryview(self.objects[key][-size:])

    async def keys(self, prefix: str, after: str | None = None) -> list[str]:
        self.calls["list"] += 1
        return sorted(key for key in self.objects
                      if key.startswith(prefix) and (after is None or key > after) and key not in self.unlisted)

    async def ages(self, prefix: str) -> dict[str, float]:
        """Every object is old enough for any grace period."""
        return {key: 3600.0 for key in await self.keys(prefix)}

    async def delete(self, keys: list[str]) -> None:
        self.calls["delete"] += 1
        for key in keys:
            self.objects.pop(key, None)


def payload(ledger_id: int, entry_id: int) -> bytes:
    return f"ledger {ledger_id} entry {entry_id} ".encode() * 4


async def settle() -> None:
    """Let every task that is ready run (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)
