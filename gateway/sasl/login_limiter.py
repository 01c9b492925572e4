"""Failed logins limited per client address and user, so passwords cannot be guessed at line rate.

After ``per_user`` failed logins for one user from one address within ``window``
seconds, further logins for that user from that address fail at once, whatever the
password, until the oldest failure leaves the window. Other users behind the same
address (a NAT, a shared host) are unaffected: keyed by address alone, a handful of
wrong passwords for one user would lock every user of that host out.

A second, larger bound counts every failure from one address whatever the user
(``per_address``). Without it one address could try a few passwords against each of
any number of user names (password spraying), and each try costs a credential check
(PBKDF2 for PLAIN against a SCRAM credential); it also bounds how many user keys one
address can make the limiter remember.
"""
import time
from collections import deque


class _Failures:
    """Failure times per key within a sliding window; keys with none left are forgotten."""

    def __init__(self, limit: int, window: float, clock):
        self.limit = limit
        self._window = window
        self._clock = clock
        self._times: dict = {}

    def _recent(self, key) -> deque:
        times = self._times.get(key)
        if times is None:
            return deque()
        cutoff = self._clock() - self._window
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._times[key]
        return times

    def full(self, key) -> bool:
        return len(self._recent(key)) >= self.limit

    def add(self, key) -> None:
        self._recent(key)
        self._times.setdefault(key, deque()).append(self._clock())


class LoginLimiter:
    def __init__(self, per_user: int, per_address: int, window: float = 60.0, clock=time.monotonic):
        self.window = window
        self._by_user = _Failures(per_user, window, clock)
        self._by_address = _Failures(per_address, window, clock)

    def refusal(self, address: str, user: str | None) -> str | None:
        """Why a login for ``user`` (None: the token names none) from ``address`` is refused now, if it is."""
        if self._by_address.full(address):
            return f"Too many failed logins from {address}; retry later"
        if self._by_user.full((address, user)):
            return f"Too many failed logins for this user from {address}; retry later"
        return None

    def failed(self, address: str, user: str | None) -> None:
        self._by_address.add(address)
        self._by_user.add((address, user))
