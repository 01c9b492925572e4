"""One GET for many readers: a read of what a GET already on its way will bring waits for
that GET instead of making its own (a tail read by many consumers, read-ahead racing a read)."""
import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


async def shared(on_the_way: dict[K, asyncio.Future], key: K, fetch: Callable[[], Awaitable[T]]) -> T:
    """``fetch()``'s result, or that of the fetch of ``key`` already in ``on_the_way``."""
    fetching = on_the_way.get(key)
    if fetching is not None:
        return await asyncio.shield(fetching)
    future = on_the_way[key] = asyncio.get_running_loop().create_future()
    try:
        result = await fetch()
        future.set_result(result)
        return result
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()  # marked retrieved: the waiters, if any, have their own copy
        raise
    finally:
        del on_the_way[key]
