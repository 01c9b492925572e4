"""The object store's writer lease, backed by this broker's metadata session.

The S3 WAL confirms a PUT only while the lease holds (storage/stores/ledger_records.py says
why). The metadata session is the lease: it holds every ownership claim, and a new
owner recovers a ledger only after the previous owner's claim is gone. So the lease
is lost when the session expires, and a confirmation asks the store for a round trip
after the PUT: an answer on the same session means the claims still stood when the
PUT was already done, so any later recovery lists that object. Session reports and
answers both reach the loop in the order the client saw them, so an expiry that
happened first is counted before the answer is looked at.
"""
from kgate.metadata.cluster import BROKERS
from kgate.metadata.store import MetadataStore, Session


class MetadataWriterLease:
    def __init__(self, metadata: MetadataStore):
        self._metadata = metadata
        self.generation = 0
        metadata.on_session(self._session)

    def _session(self, session: Session) -> None:
        if session is Session.EXPIRED:
            self.generation += 1

    async def confirm(self, generation: int) -> bool:
        if generation != self.generation:
            return False
        try:
            await self._metadata.get(BROKERS)
        except Exception:
            return False
        return generation == self.generation
