"""A share group member over the raw wire (KIP-932), to give a broker a share group in a known
state for the tools that administer share groups (compat-matrix/kafka_tools.py).

It joins with ShareGroupHeartbeat, reads with ShareFetch until it holds every record it
was asked for (Kafka initializes a share-partition's state a little after the member is
assigned it, so the first fetches may bring nothing), acknowledges them with
ShareAcknowledge, closing its share session, and may leave. Works the same against Kafka
and kgate; every step is bounded in time.
"""
import time
import uuid
from dataclasses import dataclass, field

from kgate.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest

from .session import Session

VERSION = 1  # the stable versions of the share APIs
FINAL_EPOCH = -1
ACCEPT, RELEASE = 1, 2  # acknowledge types
NOT_READY = (14, 15, 16)  # the coordinator loading, not available, or not this broker yet: ask again
TIMEOUT = 30.0  # seconds for the member to be assigned and to hold the records; a bound, not an expectation


@dataclass
class ShareMember:
    session: Session
    group: str
    topic: str
    topic_id: uuid.UUID
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex[:22])
    epoch: int = 0
    session_epoch: int = 0

    def join(self, partitions: int) -> None:
        """Heartbeat until the member is assigned all ``partitions`` of the topic."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self.session.call("setup", ShareGroupHeartbeatRequest(
                group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, rack_id=None,
                subscribed_topic_names=[self.topic]), VERSION, record=False)
            assert answer.error_code in (0, *NOT_READY), answer
            self.epoch = answer.member_epoch if answer.error_code == 0 else self.epoch
            assigned = answer.assignment and [p for t in answer.assignment.topic_partitions for p in t.partitions]
            if assigned and len(assigned) == partitions:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"share member of {self.group} not assigned {partitions} partitions")
            time.sleep(0.2)

    def acquire(self, wanted: dict[int, int]) -> None:
        """ShareFetch until the member holds offsets 0..n-1 of each partition ``p`` of ``wanted`` {p: n}."""
        held: dict[int, set[int]] = {partition: set() for partition in wanted}
        deadline = time.monotonic() + TIMEOUT
        F = ShareFetchRequest.FetchTopic
        while any(len(held[p]) < n for p, n in wanted.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"share member of {self.group} holds only {held}")
            answer = self.session.call("setup", ShareFetchRequest(
                group_id=self.group, member_id=self.member_id, share_session_epoch=self.session_epoch,
                max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, max_records=1000, batch_size=1000,
                topics=[F(topic_id=self.topic_id, partitions=[F.FetchPartition(partition_index=p,
                                                                             acknowledgement_batches=[])
                                                            for p in wanted])] if self.session_epoch == 0 else [],
                forgotten_topics_data=[]), VERSION, record=False)
            assert answer.error_code == 0, answer
            self.session_epoch += 1
            for topic in answer.responses:
                for part in topic.partitions:
                    for run in part.acquired_records:
                        held[part.partition_index].update(range(run.first_offset, run.last_offset + 1))

    def acknowledge_and_close(self, types: dict[int, list[int]]) -> None:
        """Acknowledge offsets 0.. of each partition with the types given, in the request that
        closes the share session (what the member still holds goes back)."""
        A = ShareAcknowledgeRequest.AcknowledgeTopic
        answer = self.session.call("setup", ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=FINAL_EPOCH, topics=[A(
                topic_id=self.topic_id, partitions=[A.AcknowledgePartition(
                    partition_index=p, acknowledgement_batches=[A.AcknowledgePartition.AcknowledgementBatch(
                        first_offset=0, last_offset=len(kinds) - 1, acknowledge_types=kinds)])
                    for p, kinds in types.items()])]), VERSION, record=False)
        assert answer.error_code == 0 and all(
            p.error_code == 0 for t in answer.responses for p in t.partitions), answer

    def leave(self) -> None:
        answer = self.session.call("setup", ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=-1, rack_id=None,
            subscribed_topic_names=None), VERSION, record=False)
        assert answer.error_code == 0, answer
