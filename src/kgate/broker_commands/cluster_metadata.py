"""The metadata store of an existing cluster, for the commands that write or read it beside
the brokers (``kgate users``, ``kgate storage check``).

A mistyped ``--data-dir`` or chroot would otherwise be taken as a new, empty cluster:
users no broker ever reads, or a bucket compared with no ledgers at all. So a store that
holds no kgate cluster is refused (:class:`NoCluster`) unless the command creates one.
"""
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kgate.gateway.broker import EMBEDDED_STORE_FILE, open_metadata
from kgate.metadata.cluster import ClusterState
from kgate.metadata.store import MetadataStore

ZOOKEEPER_SESSION_MS = 10_000


class NoCluster(Exception):
    """The data directory or chroot holds no kgate cluster."""


@asynccontextmanager
async def cluster_metadata(metadata_at: str, data_dir: str, create: bool = False) -> AsyncIterator[MetadataStore]:
    """The store ``--metadata`` and ``--data-dir`` name, closed after; NoCluster if it holds no
    cluster (and ``create`` is false), StoreUnavailable if it cannot be reached."""
    if metadata_at == "embedded" and not create and not os.path.isfile(os.path.join(data_dir, EMBEDDED_STORE_FILE)):
        raise NoCluster
    metadata = await open_metadata(metadata_at, data_dir, ZOOKEEPER_SESSION_MS, retry=False, serving=False)
    try:
        if await ClusterState(metadata).cluster_id(create=create) is None:
            raise NoCluster
        yield metadata
    finally:
        await metadata.close()
