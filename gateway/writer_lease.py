"""The object store's writer lease, backed by this broker's metadata session.

The S3 WAL confirms a PUT only while the lease holds (storage/stores/ledger_records.py says
why). The metadata session is the lease: it holds every ownership claim, and a new
owner recovers a ledger only after the previous owner's claim is gone. So the lease
is lost when the session expires, and a confirmation asks the store for a round trip
after the PUT: an answer on the same session means the claims still stood when the
PUT was already done, so any later recovery lists that object. Session reports and
answers both reach the loop in the order the client saw them, so an expiry that
happened first is counted before the answer is looked at.

A connection lost is not the session lost: ZooKeeper keeps the session (and the claims)
for its timeout, and the client reconnects within it, or the session expires and the
generation moves. So a round trip that fails is asked again rather than taken for a lost
lease: answering the PUT's entries NOT_LEADER_FOR_PARTITION when they were in fact kept
told clients they were not written, and a client that renumbers its unanswered records
(librdkafka does after a local timeout) then stores them twice (fault run seed 21).
"""
from kgate.metadata.cluster import BROKERS
from kgate.metadata.store import MetadataStore, Session, StoreUnavailable

# Round trips tried before the lease is given up while the session has not expired: each is
# bounded by the store's own timeout, which is the session's, so three span a reconnection.
CONFIRM_ATTEMPTS = 3


class MetadataWriterLease:
    def __init__(self, metadata: MetadataStore):
        self._metadata = metadata
        self.generation = 0
        metadata.on_session(self._session)

    def _session(self, session: Session) -> None:
        if session is Session.EXPIRED:
            self.generation += 1

    async def confirm(self, generation: int) -> bool:
        for _ in range(CONFIRM_ATTEMPTS):
            if generation != self.generation:
                return False
            try:
                await self._metadata.get(BROKERS)
            except StoreUnavailable:
                continue
            except Exception:  # whatever else failed, nothing confirms the lease
                return False
            return generation == self.generation
        return False
