"""Failed logins limited per client address, so passwords cannot be guessed at line rate.

After ``max_failures`` failed logins from one address within ``window`` seconds,
further logins from it fail at once, whatever the password, until the oldest
failure leaves the window. Other addresses are unaffected.
"""
import time
from collections import deque


class LoginLimiter:
    def __init__(self, max_failures: int, window: float = 60.0, clock=time.monotonic):
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._failures: dict[str, deque] = {}

    def _recent(self, address: str) -> deque:
        failures = self._failures.get(address)
        if failures is None:
            return deque()
        cutoff = self._clock() - self.window
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            del self._failures[address]
        return failures

    def blocked(self, address: str) -> bool:
        return len(self._recent(address)) >= self.max_failures

    def failed(self, address: str) -> None:
        self._recent(address)
        self._failures.setdefault(address, deque()).append(self._clock())
