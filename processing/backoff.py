"""How long a failed record waits before its next attempt.

Exponential (the floor doubled per failed attempt, up to the ceiling) with "equal
jitter": half of the step is fixed, half random, so retries of many records that failed
together (a dependency went down) spread out instead of returning in one wave, and a
retry never comes back sooner than half its step.
"""
import random


def retry_delay_s(attempt: int, floor_ms: float, ceiling_ms: float, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first failure)."""
    step = min(ceiling_ms, floor_ms * 2 ** min(attempt - 1, 62))
    return (step / 2 + (rng or random).uniform(0, step / 2)) / 1000
