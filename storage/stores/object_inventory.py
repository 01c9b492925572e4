"""What the object store's bucket holds, against the ledgers the metadata store still lists.

A WAL object packs runs of many ledgers, so deleting a ledger cannot delete objects: an
object becomes garbage only once *none* of the ledgers in its index is live. Live means
listed in some managed ledger's chain record (deleted topics' chains count until they are
swept). Ledger ids are never reused and a ledger that leaves every chain never returns,
so a ledger found dead stays dead, and any broker may collect.

Order matters: the bucket is listed *before* the live ledgers are read. A ledger takes
entries only after its chain lists it, so every ledger in an object already listed was
live before the read began; if the read does not find it, it was deleted. (The other
way round, a ledger created between the two reads would look dead.)

A ledger's own records (``ledgers/<id>/``: writer record, index pieces) are written as
it is created, a moment before its chain lists it, so records of an unlisted ledger
count as garbage only once older than ``RECORD_GRACE_SECONDS``. The store deletes them
with the ledger; this only catches what a crash in between left behind.

Compaction moves a sealed ledger's entries into objects of its own and writes a piece
that lists them all (``ledgers/<id>/compacted``): from then on the ledger needs none of
its WAL objects. Brokers that opened it before read its index again when an object they
were told of is gone; ``COMPACTED_GRACE_SECONDS`` keeps its WAL objects a while anyway,
so a reader in the middle of a read rarely has to.

Referenced but missing: every object a live ledger's current pieces name (its compacted
piece once there is one, else its index pieces) must be in the bucket. (Runs a writer
confirmed since its last piece are known only from the WAL objects themselves and that
writer's memory; a missing one of those shows when the ledger is recovered.)
"""
import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..ledger import CorruptLedger
from . import wal_object
from .object_client import ObjectClient

log = logging.getLogger(__name__)

LiveLedgers = Callable[[], Awaitable[set[int]]]

# Far longer than a ledger's creation takes from its writer record to its chain record.
RECORD_GRACE_SECONDS = 600.0
# How long a compacted ledger still holds on to its WAL objects.
COMPACTED_GRACE_SECONDS = 60.0
# WAL object indexes read per survey (each one ranged GET): a first pass over a large bucket
# spreads over several surveys instead of one burst.
MAX_INDEX_READS = 1000
INDEX_READS_IN_FLIGHT = 8

_RECORD_KEY = re.compile(r"ledgers/(\d+)/")


@dataclass
class Survey:
    unreferenced: list[str] = field(default_factory=list)  # keys no live ledger needs
    missing: list[tuple[str, int]] = field(default_factory=list)  # (key, a live ledger naming it)
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (WAL object key, why its index fails)


def _ledger_records(ages: dict[str, float], live: set[int], survey: Survey) -> dict[int, list[str]]:
    """Each ledger's record objects (index pieces, compacted data); those of a ledger no chain
    lists, past their grace period, are unreferenced."""
    records: dict[int, list[str]] = {}
    for key, age in sorted(ages.items()):
        match = _RECORD_KEY.match(key)
        if match is None:
            continue
        ledger_id = int(match.group(1))
        records.setdefault(ledger_id, []).append(key)
        if ledger_id not in live and age > RECORD_GRACE_SECONDS:
            survey.unreferenced.append(key)
    return records


class ObjectInventory:
    def __init__(self, client: ObjectClient):
        self._client = client
        # Ledgers in each WAL object's index: objects never change, so each is read once.
        self._ledgers_in: dict[str, frozenset[int]] = {}

    async def survey(self, live_ledgers: LiveLedgers, check_references: bool = False) -> Survey:
        ages = await self._client.ages("")
        live = await live_ledgers()
        survey = Survey()
        wal = [key for key in ages if key.startswith("wal/")]
        for key in set(self._ledgers_in) - set(wal):
            del self._ledgers_in[key]
        await self._read_indexes([key for key in wal if key not in self._ledgers_in][:MAX_INDEX_READS], survey)
        compacted = {int(match.group(1)): age for key, age in ages.items()
                     if key.endswith("/compacted") and (match := _RECORD_KEY.match(key)) is not None}
        needing = live - {ledger_id for ledger_id, age in compacted.items() if age > COMPACTED_GRACE_SECONDS}
        for key in sorted(wal):
            ledgers = self._ledgers_in.get(key)
            if ledgers is not None and not ledgers & needing:
                survey.unreferenced.append(key)
        records = _ledger_records(ages, live, survey)
        if check_references:
            for ledger_id in sorted(live & set(records)):
                current = "/compacted" if ledger_id in compacted else "/index-"
                for piece in (key for key in records[ledger_id] if current in key):
                    await self._check_piece(piece, ledger_id, ages, survey)
            survey.missing = sorted(set(survey.missing))
        return survey

    async def _read_indexes(self, keys: list[str], survey: Survey) -> None:
        slots = asyncio.Semaphore(INDEX_READS_IN_FLIGHT)

        async def read(key: str) -> None:
            async with slots:
                try:
                    runs = await wal_object.fetch_object_index(self._client, key)
                except FileNotFoundError:
                    return  # deleted since listed
                except CorruptLedger as exc:
                    survey.damaged.append((key, str(exc)))  # kept: whoever needs it reports it
                    return
            self._ledgers_in[key] = frozenset(run.ledger_id for run in runs)

        await asyncio.gather(*(read(key) for key in keys))

    async def _check_piece(self, piece: str, ledger_id: int, ages: dict[str, float], survey: Survey) -> None:
        data = await self._client.get(piece)
        if data is None:
            return  # the ledger was deleted since the listing
        try:
            runs = wal_object.read_index_piece(data, piece)
        except CorruptLedger as exc:
            survey.damaged.append((piece, str(exc)))
            return
        for key in sorted({key for key, _run in runs}):
            if key not in ages:
                survey.missing.append((key, ledger_id))

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self._ledgers_in.pop(key, None)
