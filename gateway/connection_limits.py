"""Kafka's ``max.connections`` and ``max.connections.per.ip``: connections past them are closed at accept.

Every connection costs the broker memory and a file descriptor whether it sends
anything or not, so a client (or a crowd behind one address) opening sockets in a loop
could otherwise exhaust both. ``max.connections.per.ip.overrides`` (``host:count,...``)
sets other limits for given addresses, as in Kafka. Refusals are logged at most once a
``LOG_INTERVAL`` with how many there were, so a flood of them cannot flood the log.
"""
import logging
import time
from collections import Counter

log = logging.getLogger(__name__)

LOG_INTERVAL = 10.0  # seconds


def parse_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's syntax); raises ValueError naming the bad entry."""
    overrides = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"entry {entry!r} is not HOST:COUNT")
        overrides[host] = int(count)
    return overrides


class ConnectionLimits:
    def __init__(self, total: int, per_ip: int, overrides: dict[str, int], clock=time.monotonic):
        self.set_limits(total, per_ip, overrides)
        self._open: Counter[str] = Counter()
        self._count = 0
        self._clock = clock
        self._refused_since_log = 0
        self._logged_at = float("-inf")

    def set_limits(self, total: int, per_ip: int, overrides: dict[str, int]) -> None:
        """New limits (dynamic broker configs) for the next accept; connections open stay open."""
        self._total = total
        self._per_ip = per_ip
        self._overrides = overrides

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``, or refuse it (False; it is not counted)."""
        if self._count >= self._total:
            self._refused(f"max.connections={self._total} reached")
            return False
        limit = self._overrides.get(address, self._per_ip)
        if self._open[address] >= limit:
            self._refused(f"max.connections.per.ip={limit} reached for {address}")
            return False
        self._open[address] += 1
        self._count += 1
        return True

    def release(self, address: str) -> None:
        self._count -= 1
        self._open[address] -= 1
        if not self._open[address]:
            del self._open[address]

    def _refused(self, why: str) -> None:
        self._refused_since_log += 1
        now = self._clock()
        if now - self._logged_at >= LOG_INTERVAL:
            log.warning("refusing connections: %s (%d refused in the last %.0f s at most)", why,
                        self._refused_since_log, LOG_INTERVAL)
            self._refused_since_log = 0
            self._logged_at = now
