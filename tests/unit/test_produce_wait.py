"""The produce handler's wait for durability: all futures, or the request's timeout."""
import asyncio

import pytest

from kgate.gateway.handlers.produce import _all_done


async def _let_callbacks_run():
    for _ in range(5):
        await asyncio.sleep(0)


async def test_returns_once_every_future_is_done():
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    waiting = asyncio.ensure_future(_all_done([first, second, first], 60))
    await _let_callbacks_run()  # the wait has begun with both futures pending
    first.set_result(None)
    await _let_callbacks_run()
    assert not waiting.done()
    second.set_exception(OSError("disk"))
    await waiting  # a failed future counts as done; the caller reads its exception
    assert isinstance(second.exception(), OSError)


async def test_a_timeout_returns_and_leaves_the_future_pending():
    future = asyncio.get_running_loop().create_future()
    await _all_done([future], 0.01)
    assert not future.done()


def test_done_futures_return_without_waiting():
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future()
        future.set_result(None)
        with pytest.raises(StopIteration):
            _all_done([future], 60).send(None)
    finally:
        loop.close()
