"""The broker-wide budget of request bytes read but not yet answered.

Kafka's ``queued.max.request.bytes``: without it a flood of producers (each within its
own per-connection limit) could still make the broker hold unbounded request bytes.
Connections take from the budget as they decode a request and give back when its
answer is written; a connection that finds the budget spent pauses reading and waits
here, and is resumed when answers bring the total back under the limit.
"""


class RequestBytesBudget:
    def __init__(self, limit: int):
        self.limit = limit  # -1: no limit
        self.total = 0
        self._waiting: set = set()

    def spent(self) -> bool:
        return 0 < self.limit <= self.total

    def take(self, size: int) -> None:
        self.total += size

    def give(self, size: int) -> None:
        self.total -= size
        if self._waiting and not self.spent():
            waiting, self._waiting = self._waiting, set()
            for connection in waiting:
                connection.resume_if_under_limits()

    def wait(self, connection) -> None:
        """Resume ``connection`` (``resume_if_under_limits``) once the budget has room again."""
        self._waiting.add(connection)

    def forget(self, connection) -> None:
        self._waiting.discard(connection)
