"""Garbage collection: a WAL object, shared by many ledgers, is deleted only when none of
the ledgers in its index is listed by any chain any more (storage.stores.object_inventory
says why that is safe with many brokers); a bounded number of deletes at a time."""
import logging

from .object_inventory import LiveLedgers, ObjectInventory

log = logging.getLogger(__name__)

# Objects deleted per garbage collection (one DeleteObjects request holds up to 1000 keys).
MAX_DELETES_PER_COLLECTION = 1000


class GarbageCollector:
    def __init__(self, client):
        self.client = client
        self.inventory = ObjectInventory(client)
        self.objects_collected = 0

    async def collect(self, live_ledgers: LiveLedgers) -> int:
        survey = await self.inventory.survey(live_ledgers)
        doomed = survey.unreferenced[:MAX_DELETES_PER_COLLECTION]
        await self.client.delete(doomed)
        self.inventory.forget(doomed)
        self.objects_collected += len(doomed)
        if doomed:
            log.info("deleted %d objects no live ledger needs (%d more left for the next pass)",
                     len(doomed), len(survey.unreferenced) - len(doomed))
        return len(doomed)
