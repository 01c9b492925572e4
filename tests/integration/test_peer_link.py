"""What a broker owes a peer broker on the one link the peer keeps to it: answers as soon as
they are ready (a long poll must not hold the requests sent after it).

The peer here is the test, speaking the kgate-internal requests on a raw connection with
a broker's client id, to a real broker process.
"""
import os
import struct

from kgate.gateway.zones import broker_client_id
from kgate.protocol.messages import RESPONSES, KgateProduceReferenceRequest, KgateReadEndRequest
from tests.support import wire
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.unit.record_batches import build_batch

REF = KgateProduceReferenceRequest
END = KgateReadEndRequest


class PeerWire:
    """A raw link as a peer broker opens it: requests pipelined, answers matched by correlation id."""

    def __init__(self, bootstrap: str, node_id: int = 99):
        self.sock = wire.connect(bootstrap)
        self.client_id = broker_client_id(node_id, None)
        self.correlation_id = 0
        self.sent: dict[int, int] = {}  # correlation id -> api key

    def send(self, request) -> int:
        self.correlation_id += 1
        self.sent[self.correlation_id] = request.API_KEY
        self.sock.sendall(wire.encode_request(request, 0, self.correlation_id, self.client_id))
        return self.correlation_id

    def receive(self):
        """The next answer on the link: (its correlation id, the decoded response)."""
        (size,) = struct.unpack(">i", wire.recv_exactly(self.sock, 4))
        payload = wire.recv_exactly(self.sock, size)
        correlation_id = struct.unpack_from(">i", payload)[0]
        return correlation_id, RESPONSES[self.sent.pop(correlation_id)].decode(payload, version=0, header=True)

    def close(self):
        self.sock.close()


def stage(broker: BrokerProcess, name: str, records: bytes) -> None:
    """Put a record set where the broker's file store looks for staged ones (its ledger directory)."""
    staged = os.path.join(broker.data_dir, "ledgers", "staged")
    os.makedirs(staged, exist_ok=True)
    with open(os.path.join(staged, name), "wb") as out:
        out.write(records)


def reference(topic: str, index: int, name: str, size: int):
    return REF(produce_version=9, transactional_id=None, timeout_ms=30_000, topics=[REF.ReferenceTopic(
        name=topic, partitions=[REF.ReferenceTopic.ReferencePartition(index=index, staged=name, size=size)])])


def test_a_produce_by_reference_is_answered_while_a_read_end_long_poll_waits_on_the_same_link(tmp_path):
    """A ReadEnd long poll for partition 1 (no data coming for a minute) is parked on the link when a
    produce by reference for partition 0 follows it: the produce's answer comes first, and the poll
    is answered as soon as a second reference appends to partition 1."""
    broker = BrokerProcess(str(tmp_path / "broker")).start()
    link = None
    try:
        create_topic(broker.bootstrap, "linked", 2)
        records = build_batch([b"first", b"second"])
        stage(broker, "ref-0", records)
        stage(broker, "ref-1", records)
        link = PeerWire(broker.bootstrap)
        poll = link.send(END(max_wait_ms=60_000, topics=[END.ReadEndTopic(name="linked", partitions=[
            END.ReadEndTopic.ReadEndPartition(partition_index=1, known_high_watermark=0)])]))
        produce = link.send(reference("linked", 0, "ref-0", len(records)))
        correlation_id, answer = link.receive()
        assert correlation_id == produce, "the produce waited behind the long poll"
        appended = answer.topics[0].partitions[0]
        assert (appended.error_code, appended.base_offset) == (0, 0)
        second = link.send(reference("linked", 1, "ref-1", len(records)))
        answers = dict([link.receive(), link.receive()])
        assert answers[second].topics[0].partitions[0].error_code == 0
        woken = answers[poll].topics[0].partitions[0]
        assert (woken.error_code, woken.high_watermark) == (0, 2)
    finally:
        if link is not None:
            link.close()
        broker.stop()
