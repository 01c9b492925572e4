"""A future woken by whichever comes first: the events it was registered with, or a deadline.

Delayed fetches and produces waiting for durability do this on every request, and
``asyncio.wait``/``wait_for`` cost several times more for it (argument checks, result
sets, an inner task or future per call: bench/PROFILE.md, small requests).
"""
import asyncio


def wake(waiter: asyncio.Future) -> None:
    """Resolve ``waiter`` unless something already did."""
    if not waiter.done():
        waiter.set_result(None)


async def wait_woken(waiter: asyncio.Future, timeout: float | None) -> None:
    """Return once ``waiter`` is woken, or after ``timeout`` seconds if one is given
    (then it is woken, not cancelled)."""
    timer = asyncio.get_running_loop().call_later(timeout, wake, waiter) if timeout is not None else None
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()


async def appended(ledgers, timeout: float) -> None:
    """Return when any of ``ledgers`` confirms new entries, or after ``timeout`` seconds.

    Registered with no await since the caller's read, so an append in between cannot be missed.
    """
    waiter = asyncio.get_running_loop().create_future()
    for ledger in ledgers:
        ledger.wake_on_append(waiter)
    try:
        await wait_woken(waiter, timeout)
    finally:
        for ledger in ledgers:
            ledger.forget_waiter(waiter)
