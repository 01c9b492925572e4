"""The coordinators' port to their internal partitions over real managed ledgers: a store that
refuses an append is COORDINATOR_NOT_AVAILABLE to the coordinator, as its clients hear it."""
import os

import pytest

from kgate.gateway.chain_records import MetadataChainRecord
from kgate.gateway.coordinator.partition_writer import LedgerPartitionWriter
from kgate.gateway.partition import Partition
from kgate.metadata.cluster import ClusterState
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.managed_ledger import ManagedLedger
from kgate.storage.stores.file_store import FileLedgerStore

TOPIC = "__consumer_offsets"


async def opened(directory, metadata) -> ManagedLedger:
    """The partition's managed ledger as a broker that takes it opens it."""
    cluster = ClusterState(metadata)
    ledger = ManagedLedger(f"{TOPIC}-0", FileLedgerStore(os.path.join(directory, "ledgers")),
                           MetadataChainRecord(metadata, "/managed-ledgers/offsets/0"),
                           lambda: cluster.allocate("ledger-id"))
    await ledger.open()
    return ledger


async def test_an_append_to_a_ledger_its_next_owner_took_is_coordinator_not_available(tmp_path):
    metadata = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    writer = LedgerPartitionWriter(TOPIC, {(TOPIC, 0): Partition(TOPIC, 0, await opened(tmp_path, metadata))})
    await writer.prepare_append(0)
    await writer.append(0, [(b"group-a", b"generation 1")])
    await opened(tmp_path, metadata)  # the partition's next owner fences this broker's ledger

    with pytest.raises(KafkaError) as refused:
        await writer.prepare_append(0)
        await writer.append(0, [(b"group-a", b"generation 2")])
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await metadata.close()


async def test_an_append_to_a_closed_ledger_is_refused_at_once_as_coordinator_not_available(tmp_path):
    """A ledger that refuses the append itself (closed; a full disk refuses the same way) rather
    than its durability: the port's answer is the same, raised before anything is appended."""
    metadata = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    ledger = await opened(tmp_path, metadata)
    writer = LedgerPartitionWriter(TOPIC, {(TOPIC, 0): Partition(TOPIC, 0, ledger)})
    await writer.prepare_append(0)
    await ledger.close()

    with pytest.raises(KafkaError) as refused:
        writer.append(0, [(b"group-a", b"generation 1")])
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await metadata.close()
