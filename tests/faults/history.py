"""Histories of client operations against a Kafka cluster, as Jepsen records them.

An operation is what one client process did between invoking a call and learning its
outcome: sends (a value to a partition, acknowledged at an offset or not) and polls (the
offsets and values a consumer received), alone or together inside one transaction. The
checker judges a cluster only from these, so workloads record every call, including the
ones whose outcome is unknown (``info``): a timed-out send may still have been written.
"""
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO

OK, FAIL, INFO = "ok", "fail", "info"  # done / definitely not done / unknown
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


@dataclass(frozen=True)
class Send:
    partition: str  # "topic/partition"
    value: str  # unique across the history: the checker follows a value, not a key
    offset: int | None = None  # as acknowledged; None while unknown


@dataclass(frozen=True)
class Poll:
    partition: str
    offset: int
    value: str


@dataclass(frozen=True)
class Operation:
    """``kind``: ``send`` (one or more sends, not transactional), ``poll``, ``txn`` (sends and
    polls committed or aborted together) or ``assign`` (the consumer's partitions changed, so
    where it reads next may legitimately move backwards)."""

    process: str
    kind: str
    invoke: float
    complete: float
    outcome: str
    sends: tuple[Send, ...] = ()
    polls: tuple[Poll, ...] = ()
    isolation: str = READ_UNCOMMITTED
    index: int = field(default=-1, compare=False)

    def describe(self, focus: frozenset = frozenset(), limit: int = 8) -> str:
        """One line; with ``focus`` (values and (partition, offset) pairs) only the sends and
        polls it names, so a poll of a thousand records shows the two that matter."""
        shown = [(f"send {s.partition}@{s.offset} {s.value}", s.value, (s.partition, s.offset)) for s in self.sends]
        shown += [(f"poll {p.partition}@{p.offset} {p.value}", p.value, (p.partition, p.offset)) for p in self.polls]
        kept = [text for text, value, place in shown if not focus or value in focus or place in focus][:limit]
        parts = [f"#{self.index} {self.process} {self.kind} {self.outcome} [{self.invoke:.3f}-{self.complete:.3f}]",
                 *kept]
        if len(kept) < len(shown):
            parts.append(f"(+{len(shown) - len(kept)} more)")
        return "  ".join(parts)

    def to_json(self) -> str:
        return json.dumps({"process": self.process, "kind": self.kind, "invoke": self.invoke,
                           "complete": self.complete, "outcome": self.outcome, "isolation": self.isolation,
                           "sends": [[s.partition, s.value, s.offset] for s in self.sends],
                           "polls": [[p.partition, p.offset, p.value] for p in self.polls]})

    @classmethod
    def from_json(cls, line: str) -> "Operation":
        raw = json.loads(line)
        return cls(raw["process"], raw["kind"], raw["invoke"], raw["complete"], raw["outcome"],
                   tuple(Send(*s) for s in raw["sends"]), tuple(Poll(*p) for p in raw["polls"]), raw["isolation"])


def numbered(operations: Iterable[Operation]) -> list[Operation]:
    """The operations in invocation order, each knowing its place (how reports name it)."""
    ordered = sorted(operations, key=lambda op: (op.invoke, op.complete))
    return [Operation(op.process, op.kind, op.invoke, op.complete, op.outcome, op.sends, op.polls, op.isolation, i)
            for i, op in enumerate(ordered)]


def write(operations: Iterable[Operation], out: IO[str]) -> None:
    for op in operations:
        out.write(op.to_json() + "\n")


def read(lines: Iterable[str]) -> Iterator[Operation]:
    """Operations from JSON lines; a last line cut short by kill -9 is ignored."""
    for line in lines:
        if line.endswith("\n"):
            yield Operation.from_json(line)
