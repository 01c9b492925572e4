"""The broker-wide budget of request bytes read but not yet answered.

Kafka's ``queued.max.request.bytes``: without it a flood of producers (each within its
own per-connection limit) could still make the broker hold unbounded request bytes.
Connections take from the budget as they decode a request and give back when its
answer is written; a connection that finds the budget spent pauses reading and waits
here, and is resumed when answers bring the total back under the limit.

Frames still arriving count too, by the buffers they are read into (a peer that
announces a 100 MB frame and trickles its bytes holds memory as surely as a whole
request), but they may take at most half of the budget: whole requests keep the
other half, so peers that start frames and never finish them cannot stop every other
client, only other frames large enough to need buffers of their own.

A frame's buffer grows as its bytes arrive, so frames that have all started can each
need more while together they hold that half: none could grow, and none would finish.
The frame that holds the most may therefore always grow (past the half by at most its
own size), and when a frame is handed out or dropped the next largest is woken, so
frames in flight always finish one by one.
"""


class RequestBytesBudget:
    def __init__(self, limit: int):
        self.limit = limit  # -1: no limit
        self.total = 0
        self.arriving = 0  # the part of total held by buffers of frames still arriving
        self._held: dict = {}  # connection -> the buffer of its frame still arriving
        self._waiting: set = set()

    def spent(self) -> bool:
        return 0 < self.limit <= self.total

    def room_for_arriving(self, connection, own: int) -> bool:
        """Whether ``connection``'s frame still arriving, whose buffer holds ``own`` bytes already,
        may have a larger one.

        Its own buffer is left out, so a frame larger than the budget can still arrive
        alone: the total may run past the limit by one frame's buffer. The largest frame
        in flight may always grow (see above).
        """
        if self.limit <= 0 or (self.arriving - own < self.limit // 2 and self.total - own < self.limit):
            return True
        return own > 0 and max(self._held, key=self._held.__getitem__) is connection

    def arrive(self, connection, change: int) -> None:
        """``connection``'s frame still arriving got a buffer ``change`` bytes larger (negative: it
        was handed out whole, or dropped)."""
        self.arriving += change
        held = self._held.get(connection, 0) + change
        if held > 0:
            self._held[connection] = held
        else:
            self._held.pop(connection, None)
        if change >= 0:
            self.take(change)
            return
        self.give(-change)
        if held <= 0 and self._held:  # the largest frame left may now grow: wake it if it waits
            largest = max(self._held, key=self._held.__getitem__)
            if largest in self._waiting:
                self._waiting.discard(largest)
                largest.resume_if_under_limits()

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
