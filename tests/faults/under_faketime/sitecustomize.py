"""Imported at start-up (as ``sitecustomize``) by the broker the harness runs under libfaketime.

libfaketime 0.9.10 with ``DONT_FAKE_MONOTONIC=1`` fails every ``clock_nanosleep`` on the
monotonic clock with EINVAL, and that is how Python 3.11's ``time.sleep`` sleeps; ``select``
with a timeout is unaffected. Without this, every blocking retry sleep in that broker (kazoo's,
botocore's) raises: a fault of the harness's clock, not of the wall-clock jump it means to
inject.
"""
import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
