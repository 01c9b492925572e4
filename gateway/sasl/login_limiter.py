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

A third bound counts one user's failures from every address (``per_name``): without it,
40 addresses made 360 guesses at one password in half a second, none refused. Past it,
that user's logins are refused from every address except those it logged in from within
``trusted_for`` seconds, so a guesser spread over many addresses cannot lock the user's
own clients out (it still delays new ones, as any per-user lockout does).
"""
import time
from collections import OrderedDict, deque


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
    MAX_TRUSTED = 10_000  # (address, user) pairs remembered; only real logins add to them

    def __init__(self, per_user: int, per_address: int, per_name: int, window: float = 60.0,
                 trusted_for: float = 3600.0, clock=time.monotonic):
        self.window = window
        self._clock = clock
        self._trusted_for = trusted_for
        self._by_user = _Failures(per_user, window, clock)
        self._by_address = _Failures(per_address, window, clock)
        self._by_name = _Failures(per_name, window, clock)
        self._trusted: OrderedDict[tuple[str, str | None], float] = OrderedDict()

    def refusal(self, address: str, user: str | None) -> str | None:
        """Why a login for ``user`` (None: the token names none) from ``address`` is refused now, if it is."""
        if self._by_address.full(address):
            return f"Too many failed logins from {address}; retry later"
        if self._by_user.full((address, user)):
            return f"Too many failed logins for this user from {address}; retry later"
        if self._by_name.full(user) and not self._is_trusted(address, user):
            return "Too many failed logins for this user; retry later"
        return None

    def failed(self, address: str, user: str | None) -> None:
        self._by_address.add(address)
        self._by_user.add((address, user))
        self._by_name.add(user)

    def succeeded(self, address: str, user: str | None) -> None:
        key = (address, user)
        self._trusted.pop(key, None)
        self._trusted[key] = self._clock()
        while len(self._trusted) > self.MAX_TRUSTED or not self._is_trusted(*next(iter(self._trusted))):
            self._trusted.popitem(last=False)

    def _is_trusted(self, address: str, user: str | None) -> bool:
        since = self._trusted.get((address, user))
        return since is not None and self._clock() - since < self._trusted_for
