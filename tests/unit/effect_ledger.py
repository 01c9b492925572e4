"""What the group machines' unit-test drivers keep of the effects a step returns: armed
timers (by key, their deadlines) and stored records; a driver adds what else it follows."""
from kgate.gateway.groups.effects import ArmTimer, CancelTimer, StoreConsumer, TimerKey


class EffectLedger:
    def __init__(self):
        self.now = 0
        self.timers: dict[TimerKey, int] = {}
        self.stored: list[tuple[bytes, bytes | None]] = []

    def carry_out(self, effects) -> None:
        for effect in effects:
            if isinstance(effect, ArmTimer):
                self.timers[effect.key] = effect.deadline_ms
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
            elif isinstance(effect, StoreConsumer):
                self.stored += effect.records
            else:
                self.other(effect)

    def other(self, effect) -> None:
        """An effect of another kind: ignored unless the driver follows it."""

    def advance(self, ms: int) -> None:
        """Move the clock on, firing each timer due by then, earliest first (a timer a fired
        one cancelled does not fire)."""
        self.now += ms
        for key, deadline in sorted(self.timers.items(), key=lambda item: item[1]):
            if deadline <= self.now and key in self.timers:
                del self.timers[key]
                self.fire(key)

    def fire(self, key: TimerKey) -> None:
        raise NotImplementedError("the driver says how its machine fires a timer")
