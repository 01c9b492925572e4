"""Which topics' ledger lists the sweep may destroy (ClusterState.orphans): only those of
topics deleted, never those of a topic made while the sweep reads, on any broker."""
from kgate.metadata.cluster import TOPICS, ClusterState, ledger_list_path
from kgate.metadata.stores.embedded import EmbeddedMetadataStore


class TopicMadeMidRead(EmbeddedMetadataStore):
    """The store as one broker sees it while another makes a topic and takes its partition: the
    topic and its first ledger list appear just after this broker has listed the topics."""

    def __init__(self, db_path: str):
        super().__init__(db_path)
        self.made = None

    async def children(self, path: str) -> list[str]:
        listed = await super().children(path)
        if path == TOPICS and self.made is None:
            self.made = await ClusterState(self).create_topic("made-meanwhile", 1, {})
            await self.create(ledger_list_path(self.made, 0), b"chain")
        return listed


async def test_a_topic_made_while_the_topics_are_read_is_not_an_orphan(tmp_path):
    store = TopicMadeMidRead(str(tmp_path / "metadata.sqlite"))
    cluster = ClusterState(store)
    deleted = await cluster.create_topic("deleted", 2, {})
    for partition in range(2):
        await store.create(ledger_list_path(deleted, partition), b"chain")
    await cluster.delete_topic("deleted")
    live = await cluster.create_topic("live", 1, {})
    await store.create(ledger_list_path(live, 0), b"chain")

    orphans = await cluster.orphans()

    assert store.made is not None
    assert orphans == {deleted.topic_id.hex: [ledger_list_path(deleted, 0), ledger_list_path(deleted, 1)]}
