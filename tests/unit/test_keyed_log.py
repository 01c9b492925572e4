"""Waiting for coordinator records to be durable."""
import asyncio

from kgate.gateway import keyed_log


async def test_a_cancelled_writer_leaves_the_shared_confirm_round_to_the_others():
    """A commit cancelled with its connection used to cancel the round every other commit of it
    waited on (gather cancels its children): those were never answered."""
    round_done = asyncio.get_running_loop().create_future()  # one confirm round, two writers
    cancelled = asyncio.create_task(keyed_log.durable([round_done]))
    other = asyncio.create_task(keyed_log.durable([round_done]))
    await asyncio.sleep(0)  # both wait on the round
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert not round_done.cancelled()
    round_done.set_result(None)
    await asyncio.wait_for(other, 5)


async def test_a_failed_round_is_raised_to_its_writers():
    failed = asyncio.get_running_loop().create_future()
    failed.set_exception(OSError("no space left on device"))
    try:
        await keyed_log.durable([failed])
    except OSError as exc:
        assert "no space" in str(exc)
    else:
        raise AssertionError("the failure was not raised")
