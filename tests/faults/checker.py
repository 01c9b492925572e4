"""Jepsen's Kafka anomaly classes, found in a history of operations (see history.py).

Each finding names the operations that prove it; the report keeps every finding but
prints, per class, the smallest one (fewest operations), since that is the one a person
can read. What counts:

- inconsistent-offsets: one partition offset seen with two different values.
- duplicate: one value stored at more than one offset.
- lost-write: an acknowledged (ok) send never read, although a consumer read that
  partition past its offset.
- unseen: an acknowledged send never read, with no read past it either (at the end of
  a run, after the final drain, this is a loss the drain could not reach).
- nonmonotonic-send: one producer's acknowledged sends to a partition, in the order it
  made them, with offsets that do not increase.
- nonmonotonic-poll: one consumer, between two changes of its assignment, reading an
  offset of a partition at or below one it had already read.
- poll-skip: one consumer jumping, between two consecutive reads of a partition, over an
  offset known to hold a committed value.
- aborted-read: a read_committed consumer reading a value of an aborted transaction.
- G0 / G1c: cycles among committed transactions of write-write edges only (G0), or of
  write-write and write-read edges with at least one write-read (G1c).
"""
from collections import defaultdict
from dataclasses import dataclass, field

from .history import FAIL, OK, READ_COMMITTED, Operation, Send, numbered

# Kafka's transactions are atomic and read_committed hides what they have not committed, but
# they take no locks: two transactions writing the same partitions may interleave in a
# different order in each, a write cycle the protocol allows (Jepsen's Redpanda analysis,
# "write isolation in Kafka's transaction model"). Reported, not held against the broker.
PROTOCOL_ALLOWS = frozenset({"G0"})
CLASSES = ("inconsistent-offsets", "duplicate", "lost-write", "unseen", "nonmonotonic-send", "nonmonotonic-poll",
           "poll-skip", "aborted-read", "G0", "G1c")


@dataclass(frozen=True)
class Finding:
    anomaly: str
    what: str
    operations: tuple[Operation, ...]
    focus: frozenset = frozenset()  # the values and (partition, offset) pairs the finding is about

    def render(self) -> str:
        return "\n".join([f"{self.anomaly}: {self.what}",
                          *(f"    {op.describe(self.focus)}" for op in self.operations)])


@dataclass
class Report:
    findings: dict[str, list[Finding]] = field(default_factory=lambda: defaultdict(list))
    operations: int = 0
    acknowledged: int = 0
    read: int = 0

    def add(self, anomaly: str, what: str, *operations: Operation, focus=()) -> None:
        unique = {op.index: op for op in operations}
        self.findings[anomaly].append(Finding(anomaly, what, tuple(unique[i] for i in sorted(unique)),
                                              frozenset(focus)))

    @property
    def valid(self) -> bool:
        """No anomaly beyond what Kafka's protocol allows (PROTOCOL_ALLOWS)."""
        return not any(found for anomaly, found in self.findings.items() if anomaly not in PROTOCOL_ALLOWS)

    def counts(self) -> dict[str, int]:
        return {anomaly: len(self.findings[anomaly]) for anomaly in CLASSES if self.findings[anomaly]}

    def smallest(self, anomaly: str) -> Finding:
        return min(self.findings[anomaly], key=lambda f: (len(f.operations), [op.index for op in f.operations]))

    def render(self) -> str:
        found = [f"{n} {a}" + (" (allowed by Kafka's protocol)" if a in PROTOCOL_ALLOWS else "")
                 for a, n in self.counts().items()]
        lines = [f"{self.operations} operations, {self.acknowledged} acknowledged sends, {self.read} values read: "
                 + (", ".join(found) or "no anomaly")]
        lines += [self.smallest(anomaly).render() for anomaly in self.counts()]
        return "\n".join(lines)


class _Index:
    """What the history says about every value and offset, gathered once."""

    def __init__(self, operations: list[Operation]):
        self.operations = operations
        self.writer: dict[str, Operation] = {}  # value -> the operation that sent it
        self.sent: dict[str, Send] = {}
        self.values_at: dict[tuple[str, int], dict[str, Operation]] = defaultdict(dict)  # (p, o) -> value -> witness
        self.offsets_of: dict[str, dict[tuple[str, int], Operation]] = defaultdict(dict)  # value -> (p, o) -> witness
        self.readers: dict[str, list[Operation]] = defaultdict(list)  # value -> operations that read it
        self.furthest: dict[str, tuple[int, Operation]] = {}  # partition -> highest offset read, by whom
        for op in operations:
            for send in op.sends:
                self.writer[send.value], self.sent[send.value] = op, send
                if op.outcome == OK and send.offset is not None:
                    self._saw(send.partition, send.offset, send.value, op)
            for poll in op.polls if op.outcome != FAIL else ():
                self._saw(poll.partition, poll.offset, poll.value, op)
                self.readers[poll.value].append(op)
                if poll.offset > self.furthest.get(poll.partition, (-1, op))[0]:
                    self.furthest[poll.partition] = (poll.offset, op)

    def _saw(self, partition: str, offset: int, value: str, op: Operation) -> None:
        self.values_at[(partition, offset)].setdefault(value, op)
        self.offsets_of[value].setdefault((partition, offset), op)

    def committed(self, value: str) -> bool:
        """Visible to every consumer: a transaction's value only once the commit is known."""
        writer = self.writer.get(value)
        return writer is None or writer.outcome == OK or (writer.kind != "txn" and writer.outcome != FAIL)


def check(operations: list[Operation]) -> Report:
    operations = numbered(operations)
    index = _Index(operations)
    report = Report(operations=len(operations), acknowledged=sum(
        len(op.sends) for op in operations if op.outcome == OK), read=len(index.readers))
    for find in (_inconsistent_offsets, _duplicates, _lost_and_unseen, _nonmonotonic_sends, _polls_in_order,
                 _aborted_reads, _cycles):
        find(index, report)
    return report


def _inconsistent_offsets(index: _Index, report: Report) -> None:
    for (partition, offset), values in index.values_at.items():
        if len(values) > 1:
            report.add("inconsistent-offsets", f"{partition}@{offset} holds {sorted(values)}", *values.values(),
                       focus=[(partition, offset)])


def _duplicates(index: _Index, report: Report) -> None:
    for value, places in index.offsets_of.items():
        if len(places) > 1:
            where = ", ".join(f"{p}@{o}" for p, o in sorted(places))
            report.add("duplicate", f"{value} stored at {where}", *places.values(), focus=[value])


def _lost_and_unseen(index: _Index, report: Report) -> None:
    for value, send in index.sent.items():
        writer = index.writer[value]
        if writer.outcome != OK or index.readers.get(value):
            continue
        furthest, reader = index.furthest.get(send.partition, (-1, writer))
        if send.offset is not None and furthest > send.offset:
            report.add("lost-write", f"{value} acknowledged at {send.partition}@{send.offset}, never read; "
                       f"read up to offset {furthest}", writer, reader, focus=[value, (send.partition, furthest)])
        else:
            report.add("unseen", f"{value} acknowledged at {send.partition}@{send.offset}, never read", writer,
                       focus=[value])


def _nonmonotonic_sends(index: _Index, report: Report) -> None:
    last: dict[tuple[str, str], tuple[int, Operation]] = {}
    for op in index.operations:
        for send in op.sends if op.outcome == OK else ():
            if send.offset is None:
                continue
            key = (op.process, send.partition)
            if key in last and send.offset <= last[key][0]:
                report.add("nonmonotonic-send", f"{op.process} sent to {send.partition} at offset {send.offset} "
                           f"after offset {last[key][0]}", last[key][1], op,
                           focus=[(send.partition, send.offset), (send.partition, last[key][0])])
            last[key] = (send.offset, op)


def _polls_in_order(index: _Index, report: Report) -> None:
    """Per consumer and partition, each read must come after the previous one (until the
    assignment changes) and must not jump over an offset known to hold a committed value."""
    known = defaultdict(set)
    for (partition, offset), values in index.values_at.items():
        if any(index.committed(v) for v in values):
            known[partition].add(offset)
    last: dict[tuple[str, str], tuple[int, Operation]] = {}
    for op in index.operations:
        if op.kind == "assign":
            for key in [k for k in last if k[0] == op.process]:
                del last[key]
        for poll in op.polls if op.outcome != FAIL else ():
            key = (op.process, poll.partition)
            if key in last:
                _judge_step(report, known[poll.partition], op, poll.partition, last[key], poll.offset)
            last[key] = (poll.offset, op)


def _judge_step(report: Report, known: set[int], op: Operation, partition: str, before: tuple[int, Operation],
                offset: int) -> None:
    previous, earlier = before
    focus = [(partition, offset), (partition, previous)]
    if offset <= previous:
        report.add("nonmonotonic-poll", f"{op.process} read {partition}@{offset} after {partition}@{previous}",
                   earlier, op, focus=focus)
        return
    skipped = sorted(o for o in known if previous < o < offset) if offset - previous > 1 else []
    if skipped:
        report.add("poll-skip", f"{op.process} read {partition}@{offset} right after {partition}@{previous}, "
                   f"skipping {skipped[:5]}{'...' if len(skipped) > 5 else ''}", earlier, op, focus=focus)


def _aborted_reads(index: _Index, report: Report) -> None:
    for value, readers in index.readers.items():
        writer = index.writer.get(value)
        if writer is None or writer.outcome != FAIL or writer.kind != "txn":
            continue
        for reader in readers:
            if reader.isolation == READ_COMMITTED:
                report.add("aborted-read", f"{reader.process} ({READ_COMMITTED}) read {value} of an aborted "
                           "transaction", writer, reader, focus=[value])


def _cycles(index: _Index, report: Report) -> None:
    """Dependency graph of committed transactions: ww from the writer of one offset to the
    writer of the next value in that partition (offset order is Kafka's version order), wr
    from a writer to each reader of its value. A cycle is G0 if every edge is ww, else G1c."""
    edges: dict[int, dict[int, str]] = defaultdict(dict)
    committed = {op.index: op for op in index.operations if op.kind == "txn" and op.outcome == OK}
    by_partition: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for value, places in index.offsets_of.items():
        writer = index.writer.get(value)
        if writer is not None and writer.index in committed:
            for partition, offset in places:
                by_partition[partition].append((offset, writer.index))
            for reader in index.readers.get(value, ()):
                if reader.index in committed and reader.index != writer.index:
                    edges[writer.index][reader.index] = "wr"
    for writes in by_partition.values():
        writes.sort()
        for (_, a), (_, b) in zip(writes, writes[1:]):
            if a != b:
                edges[a].setdefault(b, "ww")
    for cycle in _shortest_cycles(edges):
        kinds = [edges[a][b] for a, b in zip(cycle, cycle[1:] + cycle[:1])]
        anomaly = "G0" if set(kinds) == {"ww"} else "G1c"
        path = " -> ".join(f"#{a} ({k})" for a, k in zip(cycle, kinds)) + f" -> #{cycle[0]}"
        report.add(anomaly, f"cycle {path}", *(committed[i] for i in cycle))


def _shortest_cycles(edges: dict[int, dict[int, str]]) -> list[list[int]]:
    """One shortest cycle through each strongly connected component that has one."""
    cycles = []
    for component in _components(edges):
        best: list[int] | None = None
        for start in sorted(component):
            found = _shortest_path_back(edges, start, component)
            if found and (best is None or len(found) < len(best)):
                best = found
        if best:
            cycles.append(best)
    return cycles


def _shortest_path_back(edges: dict[int, dict[int, str]], start: int, within: set[int]) -> list[int] | None:
    parents = {start: start}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in edges.get(node, {}):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return path[::-1]
                if target in within and target not in parents:
                    parents[target] = node
                    following.append(target)
        frontier = following
    return None


def _components(edges: dict[int, dict[int, str]]) -> list[set[int]]:
    """Strongly connected components with more than one node (Tarjan's, iterative)."""
    counter, low, number, stack, on_stack, found = [0], {}, {}, [], set(), []
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    for root in sorted(nodes):
        if root in number:
            continue
        work = [(root, iter(edges.get(root, {})))]
        number[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in number:
                    number[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(edges.get(target, {}))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], number[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == number[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found
