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

Record sets staged for other brokers (storage.stores.object_staging) ride in WAL objects as
runs of no ledger: an object holding one is kept ``STAGED_GRACE_SECONDS`` whatever else it
holds, so an owner still reading the set finds it.

Referenced but missing: every object a live ledger's current pieces name (its compacted
piece once there is one, else its index pieces) must be in the bucket. (Runs a writer
confirmed since its last piece are known only from the WAL objects themselves and that
writer's memory; a missing one of those shows when the ledger is recovered.) The same
reading of the pieces finds orphans (storage.stores.orphan_objects): objects live ledgers
are in but none of them needs.
"""
import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..ledger import CorruptLedger
from . import wal_object
from .object_client import ObjectClient
from .object_layout import STAGED_LEDGER, piece_seq, writer_key
from .orphan_objects import ORPHAN_MIN_AGE, Holding, orphans

log = logging.getLogger(__name__)

LiveLedgers = Callable[[], Awaitable[set[int]]]

# Far longer than a ledger's creation takes from its writer record to its chain record.
RECORD_GRACE_SECONDS = 600.0
# How long a compacted ledger still holds on to its WAL objects.
COMPACTED_GRACE_SECONDS = 60.0
# How long a WAL object holding staged record sets is kept whatever else it holds: far longer
# than a reference waits for its owner's answer (a produce's timeout, 30 s by default).
STAGED_GRACE_SECONDS = 300.0
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
    orphaned: list[str] = field(default_factory=list)  # keys live ledgers are in but none needs


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

    async def survey(self, live_ledgers: LiveLedgers, check_references: bool = False,
                     orphan_age: float = ORPHAN_MIN_AGE) -> Survey:
        """What the bucket holds against ``live_ledgers``; with ``check_references``, also
        what live ledgers' pieces name but is missing, and orphans older than ``orphan_age``."""
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
            if ledgers is not None and not ledgers & needing \
                    and (STAGED_LEDGER not in ledgers or ages[key] > STAGED_GRACE_SECONDS):
                survey.unreferenced.append(key)
        records = _ledger_records(ages, live, survey)
        if check_references:
            holdings = {}
            for ledger_id in sorted(live & set(records)):
                holding = await self._holding(ledger_id, records[ledger_id], ledger_id in compacted, ages, survey)
                if holding is not None and compacted.get(ledger_id, COMPACTED_GRACE_SECONDS) >= COMPACTED_GRACE_SECONDS:
                    holdings[ledger_id] = holding
            survey.missing = sorted(set(survey.missing))
            survey.orphaned = orphans(ages, self._ledgers_in, needing, holdings, orphan_age)
        return survey

    async def _holding(self, ledger_id: int, keys: list[str], compacted: bool, ages: dict[str, float],
                       survey: Survey) -> Holding | None:
        """What the ledger's current pieces name and where its writer may have gone on;
        None when a piece could not be read (then it counts as needing everything)."""
        holding = Holding(sealed=compacted)
        pieces = [key for key in keys if ("/compacted" if compacted else "/index-") in key]
        for piece in pieces:
            named = await self._check_piece(piece, ledger_id, ages, survey)
            if named is None:
                return None
            holding.named |= named
            holding.sealed |= piece.endswith(".sealed")
        if not holding.sealed:
            record = await self._client.get(writer_key(ledger_id))
            if record is not None:
                writer = json.loads(record)
                holding.writer = writer["writer"]
                holding.covered = max((piece_seq(key) for key in pieces), default=writer["first_seq"] - 1)
        return holding

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

    async def _check_piece(self, piece: str, ledger_id: int, ages: dict[str, float],
                           survey: Survey) -> set[str] | None:
        """The objects the piece names (those not in the bucket are missing); None if it is
        damaged or gone since the listing (the ledger was compacted or deleted meanwhile)."""
        data = await self._client.get(piece)
        if data is None:
            return None
        try:
            runs = wal_object.read_index_piece(data, piece)
        except CorruptLedger as exc:
            survey.damaged.append((piece, str(exc)))
            return None
        named = {key for key, _run in runs}
        survey.missing.extend((key, ledger_id) for key in sorted(named) if key not in ages)
        return named

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self._ledgers_in.pop(key, None)
