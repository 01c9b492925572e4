"""The audit (Chaperone's idea): records per topic per minute at the source and at the target.

Source counts are kept by the workers in the mirror's state (``audit/<route>/<topic>/<minute>``):
each record the target acknowledged, by the minute of its own timestamp, flushed before
the position that covers it. Target counts are not taken from the workers at all: the
audit reads the target topic itself, so records deleted there, or a batch a worker
believed sent but the target never got, show up as missing. Both sides count only
records first written to the route's source (the origin header), so copies relayed
from elsewhere, and the target's own records on an identity topic, are left out of both.
"""
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from .state import MirrorState

MINUTE_MS = 60_000
_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT_MS = {"s": 1000, "m": MINUTE_MS, "h": 3_600_000, "d": 86_400_000}


def minute_of(timestamp_ms: int) -> int:
    return max(timestamp_ms, 0) // MINUTE_MS


def parse_since(text: str, now_ms: int | None = None) -> int:
    """``90s``, ``30m``, ``1h``, ``2d`` ago, or an ISO-8601 time, as epoch milliseconds."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    match = _DURATION.fullmatch(text.strip())
    if match:
        return now_ms - int(match.group(1)) * _UNIT_MS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since takes a duration (90s, 30m, 1h, 2d) or an ISO-8601 time, got {text!r}") from None
    if moment.tzinfo is None:
        raise ValueError(f"--since {text!r}: give a time zone (Z or +HH:MM)")
    return int(moment.timestamp() * 1000)


def window_start(since_ms: int) -> int:
    """``since_ms`` back to the start of its minute: source counts are kept per whole minute,
    so the target must be counted from the same instant or the first minute looks short."""
    return minute_of(since_ms) * MINUTE_MS


def add_source_counts(state: MirrorState, route: str, topic: str, per_minute: dict[int, int]) -> None:
    for minute, count in per_minute.items():
        state.update(lambda old, count=count: {"source": (old or {}).get("source", 0) + count},
                     "audit", route, topic, str(minute))


def source_counts(state: MirrorState, route: str, since_minute: int) -> dict[str, dict[int, int]]:
    found: dict[str, dict[int, int]] = {}
    for topic in state.children("audit", route):
        for minute in state.children("audit", route, topic):
            if int(minute) >= since_minute:
                body = state.read("audit", route, topic, minute, default={})
                found.setdefault(topic, {})[int(minute)] = body.get("source", 0)
    return found


def prune(state: MirrorState, before_minute: int) -> int:
    """Remove the counts of minutes before ``before_minute`` (``audit.retention.ms``), so the
    audit's nodes do not grow forever; returns how many minutes went."""
    removed = 0
    for route in state.children("audit"):
        for topic in state.children("audit", route):
            minutes = state.children("audit", route, topic)
            for minute in minutes:
                if int(minute) < before_minute and state.delete("audit", route, topic, minute):
                    removed += 1
            if minutes and all(int(m) < before_minute for m in minutes):
                state.delete_if_empty("audit", route, topic)
    return removed


@dataclass(frozen=True)
class Row:
    topic: str
    minute: int
    source: int
    target: int

    @property
    def missing(self) -> int:
        return max(0, self.source - self.target)

    @property
    def duplicated(self) -> int:
        return max(0, self.target - self.source)

    def to_json(self) -> dict:
        return {"topic": self.topic, "minute": minute_text(self.minute),
                "source": self.source, "target": self.target, "missing": self.missing, "duplicated": self.duplicated}


def minute_text(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%MZ")


def compare(source: dict[str, dict[int, int]], target: dict[str, dict[int, int]]) -> list[Row]:
    rows = []
    for topic in sorted(set(source) | set(target)):
        here, there = source.get(topic, {}), target.get(topic, {})
        for minute in sorted(set(here) | set(there)):
            rows.append(Row(topic, minute, here.get(minute, 0), there.get(minute, 0)))
    return rows
