"""Orphans: objects that hold entries of live ledgers yet that no ledger needs any more, so
garbage collection, which keeps every object a live ledger is in, never deletes them.

Two kinds. A WAL object no index piece names and no recovery would read: a writer fenced
after its PUT (its runs lie past the sealed end), or an upload that failed after the bucket
stored it. And a compaction's data object that the ledger's ``compacted`` piece does not
list: the compaction crashed, or lost the race to another broker, before listing it.

Needed is what a recovery reads (storage.stores.ledger_records.stored_runs): a compacted
ledger's data objects named by its compacted piece; every object its index pieces name;
and, while it is not sealed, every WAL object of its own writer past the last piece. A
ledger whose records could not be read, and a compacted ledger within its grace period,
count as needing all they are in.

An orphan is only one older than a safety age: a WAL object is stored before its writer
confirms it, and a compaction writes its data objects before the piece that lists them.
"""
from dataclasses import dataclass, field

from .object_layout import wal_seq

DATA_OBJECT = "/data-"
# Far longer than an upload or a compaction takes.
ORPHAN_MIN_AGE = 3600.0


@dataclass
class Holding:
    """What a live ledger's current pieces say it needs."""

    named: set[str] = field(default_factory=set)
    writer: str | None = None  # its writer, None when it has no writer record
    covered: int = -1  # the last of its writer's WAL objects the pieces cover
    sealed: bool = False

    def needs(self, key: str) -> bool:
        if key in self.named:
            return True
        return not self.sealed and self.writer is not None and wal_writer(key) == self.writer \
            and wal_seq(key) > self.covered


def wal_writer(key: str) -> str:
    return key[len("wal/"):key.rindex("/")]


def orphans(ages: dict[str, float], ledgers_in: dict[str, frozenset[int]], live: set[int],
            holdings: dict[int, Holding], min_age: float) -> list[str]:
    """The keys older than ``min_age`` that hold ``live`` ledgers (those that may still need
    WAL objects; an object holding none is garbage, not an orphan) and are needed by none
    of them (``holdings`` says what each needs; one missing from it needs everything)."""
    found = []
    for key, age in sorted(ages.items()):
        if age < min_age:
            continue
        if key.startswith("wal/"):
            held = ledgers_in.get(key, frozenset()) & live  # none: garbage, or its index unread
            if held and all(ledger in holdings and not holdings[ledger].needs(key) for ledger in held):
                found.append(key)
        elif DATA_OBJECT in key:
            ledger = int(key.split("/")[1])
            if ledger in holdings and key not in holdings[ledger].named:
                found.append(key)
    return found
