"""Where the object ledger store keeps what in the bucket, and the errors of an object not
where its index says.

``wal/<writer>/<seq>``: WAL objects, each the entries of many ledgers with an index at its
end (storage.stores.wal_object). ``ledgers/<id>/writer``: which writer wrote the ledger,
from which WAL object on (and through which local WAL, if any). ``ledgers/<id>/index-<seq>``
(``.sealed`` when closed or recovered): index pieces, its runs through WAL object ``seq``.
``ledgers/<id>/data-*`` and ``ledgers/<id>/compacted``: a compacted ledger's own objects and
the piece naming them all. Record sets staged for other brokers ride in WAL objects as
runs of ``STAGED_LEDGER``.
"""
from ..ledger import CorruptLedger

# The piece that lists every run of a compacted ledger, all in its own objects.
COMPACTED = "compacted"
# The ledger id of the runs of record sets staged for other brokers (storage.stores.object_staging):
# no ledger has it (ids are positive), so no index piece names them and no recovery takes them.
STAGED_LEDGER = -1


class ObjectStoreUnavailable(OSError):
    """A WAL PUT failed (after the client's retries): its entries are given up, never confirmed."""


class MissingObject(CorruptLedger):
    """An object an index names is not in the bucket (damage, or moved by compaction)."""


def wal_key(writer: str, seq: int) -> str:
    return f"wal/{writer}/{seq:020d}"


def wal_seq(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


def ledger_prefix(ledger_id: int) -> str:
    return f"ledgers/{ledger_id:019d}/"


def writer_key(ledger_id: int) -> str:
    return ledger_prefix(ledger_id) + "writer"


def piece_key(ledger_id: int, seq: int, sealed: bool) -> str:
    return f"{ledger_prefix(ledger_id)}index-{seq:020d}" + (".sealed" if sealed else "")


def piece_seq(key: str) -> int:
    return int(key.rsplit("index-", 1)[1].split(".")[0])
