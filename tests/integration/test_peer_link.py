"""What a broker owes a peer broker on the one link the peer keeps to it, and what it asks of it.

The peer here is the test, holding a real link (gateway/peer_links.py: a broker's client
id, requests pipelined, answers matched by correlation id, an inter-broker SASL login) to a
real broker process, and speaking kgate's internal requests on it.
"""
import asyncio
import os

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Resource
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from kgate.gateway.peer_links import Link
from kgate.gateway.sasl.login import Login
from kgate.gateway.zones import broker_client_id
from kgate.protocol.api_versions import INTERNAL, KGATE_PRODUCE_REFERENCE, KGATE_READ_END
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import KgateLinkDeflateRequest, KgateProduceReferenceRequest, KgateReadEndRequest
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.support.clients import create_topic, kgate_users
from tests.support.wire import Wire, closed_by_broker
from tests.unit.record_batches import build_batch

REF = KgateProduceReferenceRequest
END = KgateReadEndRequest
WAIT = 20  # seconds: a bound on waiting for the broker, never an assertion about speed
PASSWORDS = {"kgate-broker": "peer-secret", "admin": "admin-secret", "alice": "alice-secret",
             "bob": "bob-secret"}


def address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def peer_link(bootstrap: str, login=None, deflate: bool = False, count=lambda _direction, _size: None) -> Link:
    return Link(address(bootstrap), broker_client_id(99, None), count, login, deflate=deflate)


async def stage(broker, name: str, records: bytes) -> str:
    """Put a record set where the broker reads staged ones and return the name to send: a file
    ``name`` in its ledger directory, or on object storage a set in a WAL object of its bucket
    (written by a store of another writer, as a zone's broker would)."""
    storage = broker.settings.get("kgate.storage")
    if storage is not None and storage.startswith("s3://"):
        store = S3LedgerStore(ObjectClient(BucketLocation.parse(storage)), "99-1", commit_interval_ms=0)
        try:
            return await store.stage("99-", records)
        finally:
            store.close()
    staged = os.path.join(broker.data_dir, "ledgers", "staged")
    os.makedirs(staged, exist_ok=True)
    with open(os.path.join(staged, name), "wb") as out:
        out.write(records)
    return name


def reference(topic: str, index: int, name: str, size: int, principal: str | None = None):
    return REF(produce_version=9, principal=principal, client_address="127.0.0.1:1", transactional_id=None,
               timeout_ms=30_000, topics=[REF.ReferenceTopic(name=topic, partitions=[
                   REF.ReferenceTopic.ReferencePartition(index=index, staged=name, size=size)])])


def outcome(answer):
    appended = answer.topics[0].partitions[0]
    return ErrorCode(appended.error_code), appended.base_offset


async def test_a_produce_by_reference_is_answered_while_a_read_end_long_poll_waits_on_the_same_link(broker):
    """A ReadEnd long poll for partition 1 (no data coming for a minute) is parked on the link when a
    produce by reference for partition 0 follows it: the produce is answered while the poll still
    waits, and the poll is answered as soon as a second reference appends to partition 1."""
    create_topic(broker.bootstrap, "linked", 2)
    records = build_batch([b"first", b"second"])
    await stage(broker, "ref-0", records)
    await stage(broker, "ref-1", records)
    link = peer_link(broker.bootstrap)
    try:
        poll = await link.send(END(max_wait_ms=60_000, topics=[END.ReadEndTopic(name="linked", partitions=[
            END.ReadEndTopic.ReadEndPartition(partition_index=1, known_high_watermark=0)])]), 0)
        produce = await link.send(reference("linked", 0, "ref-0", len(records)), 0)
        await asyncio.wait([poll, produce], timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        assert produce.done() and not poll.done(), "the produce waited behind the long poll"
        assert outcome(produce.result()) == (ErrorCode.NONE, 0)
        second = await link.send(reference("linked", 1, "ref-1", len(records)), 0)
        assert outcome(await asyncio.wait_for(second, WAIT)) == (ErrorCode.NONE, 0)
        woken = (await asyncio.wait_for(poll, WAIT)).topics[0].partitions[0]
        assert (woken.error_code, woken.high_watermark) == (0, 2)
    finally:
        link.close()


async def test_a_link_knows_the_peers_versions_of_kgates_own_apis_once_open_which_clients_are_not_told(broker):
    """A link asks ApiVersions as it opens: a broker tells a peer (a broker's client id) its
    internal APIs' ranges beside Kafka's, and a client only Kafka's."""
    link = peer_link(broker.bootstrap)
    try:
        await asyncio.wait_for(link.opened(), WAIT)
        assert link.versions is not None
        assert {key: link.versions[key] for key in INTERNAL} == INTERNAL
        assert (link.versions[KGATE_READ_END], link.versions[KGATE_PRODUCE_REFERENCE]) == ((0, 1), (0, 1))
        assert link.versions[ApiKey.Fetch][1] >= 12
    finally:
        link.close()
    with Wire(broker.bootstrap, client_id="a-client") as wire:
        told = wire.call(ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3)
    assert {key.api_key for key in told.api_keys} & set(INTERNAL) == set()
    assert ApiKey.Fetch in {key.api_key for key in told.api_keys}


async def test_a_compressed_link_carries_the_same_requests_in_a_fraction_of_the_bytes(broker):
    """KgateLinkDeflate: from its answer on, each way of the link is one deflate stream. The same
    run of references (each appending a set) and read-end questions, over a plain link and over
    a compressed one, is answered alike; what crossed the wire is counted, and the compressed
    link's requests and answers took under half the plain one's bytes."""
    records = build_batch([b"deflated"])
    counted: dict[bool, dict[str, int]] = {}
    for deflate in (False, True):
        topic = f"deflated-{deflate}"
        create_topic(broker.bootstrap, topic, 2)
        names = [await stage(broker, f"{topic}-{n}", records) for n in range(12)]
        totals = counted[deflate] = {"in": 0, "out": 0}
        link = peer_link(broker.bootstrap, deflate=deflate,
                         count=lambda direction, size, totals=totals: totals.__setitem__(
                             direction, totals[direction] + size))
        try:
            await asyncio.wait_for(link.opened(), WAIT)
            totals.update({"in": 0, "out": 0})  # from here on both links carry the same requests
            appended, ends = [], []
            for n, name in enumerate(names):
                answer = await link.send(reference(topic, n % 2, name, len(records)), 0)
                appended.append(outcome(await asyncio.wait_for(answer, WAIT)))
                question = await link.send(END(max_wait_ms=0, topics=[END.ReadEndTopic(name=topic, partitions=[
                    END.ReadEndTopic.ReadEndPartition(partition_index=n % 2, known_high_watermark=-1)])]), 0)
                ends.append((await asyncio.wait_for(question, WAIT)).topics[0].partitions[0].high_watermark)
            assert appended == [(ErrorCode.NONE, n // 2) for n in range(12)]
            assert ends == [n // 2 + 1 for n in range(12)]
        finally:
            link.close()
    assert counted[True]["out"] < counted[False]["out"] / 2, counted
    assert counted[True]["in"] < counted[False]["in"] / 2, counted


def test_only_a_peer_broker_may_compress_its_link_and_only_with_deflate(broker):
    """A client's KgateLinkDeflate is refused (CLUSTER_AUTHORIZATION_FAILED), a peer's naming
    another codec too (UNSUPPORTED_COMPRESSION_TYPE); either connection goes on uncompressed."""
    for client_id, codec, error in (("a-client", "deflate", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                    (broker_client_id(99, None), "zstd", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
        with Wire(broker.bootstrap, client_id=client_id) as wire:
            assert wire.call(KgateLinkDeflateRequest(codec=codec), 0).error_code == error
            assert wire.call(ApiVersionsRequest(client_software_name="test", client_software_version="1"),
                             3).error_code == ErrorCode.NONE


def test_a_compressed_link_whose_bytes_are_not_a_deflate_stream_is_closed_and_others_are_served(broker):
    """Once its KgateLinkDeflate is answered, a peer sends bytes that do not inflate (a reserved
    block type): the broker closes that link, and goes on answering other connections."""
    with Wire(broker.bootstrap, client_id=broker_client_id(99, None)) as wire:
        assert wire.call(KgateLinkDeflateRequest(codec="deflate"), 0).error_code == ErrorCode.NONE
        wire.sock.sendall(b"\xff" * 64)
        assert closed_by_broker(wire.sock), "the link stays open"
    with Wire(broker.bootstrap, client_id="a-client") as wire:
        assert wire.call(ApiVersionsRequest(client_software_name="test", client_software_version="1"),
                         3).error_code == ErrorCode.NONE
    with open(broker.log_path) as log:
        assert "not a deflate stream" in log.read()


def standing(epoch: int, max_wait_ms: int, known: dict[int, int], topic: str = "standing"):
    """A KgateReadEnd v1: opening the poll over ``known`` (epoch 0), or continuing it."""
    return END(max_wait_ms=max_wait_ms, poll_epoch=epoch, topics=[END.ReadEndTopic(name=topic, partitions=[
        END.ReadEndTopic.ReadEndPartition(partition_index=i, known_high_watermark=hw) for i, hw in known.items()])]
        if known else [])


async def test_a_standing_read_end_poll_continues_naming_no_partition_and_hears_only_what_moved(broker):
    """KgateReadEnd v1: the poll opened over partitions 0 and 1 is answered for both; continued with
    the epoch that answer gave and no partitions named, it waits, and a reference appending to
    partition 1 wakes it with partition 1 alone; continued with the old epoch, it is refused with
    INVALID_FETCH_SESSION_EPOCH."""
    create_topic(broker.bootstrap, "standing", 2)
    records = build_batch([b"moved"])
    await stage(broker, "standing-1", records)
    link = peer_link(broker.bootstrap)
    try:
        opened = await asyncio.wait_for(await link.send(standing(0, 0, {0: 0, 1: 0}), 1), WAIT)
        assert opened.error_code == ErrorCode.NONE
        assert sorted((p.partition_index, p.high_watermark) for t in opened.topics for p in t.partitions) == \
            [(0, 0), (1, 0)]
        waiting = await link.send(standing(opened.poll_epoch, 60_000, {}), 1)
        produce = await link.send(reference("standing", 1, "standing-1", len(records)), 0)
        assert outcome(await asyncio.wait_for(produce, WAIT)) == (ErrorCode.NONE, 0)
        woken = await asyncio.wait_for(waiting, WAIT)
        assert woken.error_code == ErrorCode.NONE and woken.poll_epoch != opened.poll_epoch
        assert [(p.partition_index, p.high_watermark) for t in woken.topics for p in t.partitions] == [(1, 1)]
        stale = await asyncio.wait_for(await link.send(standing(opened.poll_epoch, 0, {}), 1), WAIT)
        assert (stale.error_code, stale.topics) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
    finally:
        link.close()


def users(data_dir: str) -> None:
    for user, password in PASSWORDS.items():
        kgate_users(data_dir, "--create", "add", user, "--password", password, "--mechanism", "SCRAM-SHA-512")


@pytest.mark.parametrize("deflate", [False, True], ids=["plain", "compressed"])
async def test_a_logged_in_link_renews_its_login_before_each_session_ends_and_keeps_working(broker_factory,
                                                                                           tmp_path, deflate):
    """KIP-368 between brokers: the peer gives the link a session of connections.max.reauth.ms;
    the link logs in again on the live connection before it ends, so requests sent across
    several sessions are answered on the one link, never closed for an ended session; the
    same on a compressed link, whose logins after the first go over its deflate streams."""
    users(str(tmp_path / "owner"))
    owner = broker_factory("owner", listeners=("SASL_PLAINTEXT",), **{"connections.max.reauth.ms": 1500})
    create_topic(owner.bootstrap, "renewed", 1)
    link = peer_link(owner.address("SASL_PLAINTEXT"), Login("SCRAM-SHA-512", "kgate-broker",
                                                            PASSWORDS["kgate-broker"]), deflate=deflate)
    records = build_batch([b"renewed"])
    try:
        appended = []
        deadline = asyncio.get_running_loop().time() + 4.0  # past two sessions of 1.5 s
        while asyncio.get_running_loop().time() < deadline:
            name = f"renewed-{len(appended)}"
            await stage(owner, name, records)
            answer = await link.send(reference("renewed", 0, name, len(records)), 0)
            appended.append(outcome(await asyncio.wait_for(answer, WAIT)))
            await asyncio.sleep(0.2)  # paces the traffic across the sessions; nothing waits on it
        assert appended == [(ErrorCode.NONE, offset) for offset in range(len(appended))]
        assert not link.closed
    finally:
        link.close()
    with open(owner.log_path) as log:
        text = log.read()
    assert text.count("re-authenticated as kgate-broker") >= 2 and "SASL session" not in text


@pytest.mark.parametrize("storage", ["files", "s3"])
async def test_with_an_authorizer_the_owner_takes_references_only_from_a_logged_in_peer_and_as_the_client(
        broker_factory, tmp_path, request, storage):
    """With ACLs on, a reference over an anonymous link is refused (CLUSTER_AUTHORIZATION_FAILED); over a
    link logged in with SCRAM as a super user, the produce is authorized as the principal the reference
    names: alice, who may write the topic, appends; bob, who may not, is refused. On a file store and
    on object storage (the set in a WAL object)."""
    users(str(tmp_path / "owner"))
    on_s3 = {"kgate.storage": request.getfixturevalue("bucket_url")} if storage == "s3" else {}
    owner = broker_factory("owner", listeners=("SASL_PLAINTEXT",), **{
        "authorizer.class.name": "acl", "super.users": "User:admin;User:kgate-broker", **on_s3})
    sasl = owner.address("SASL_PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                         "sasl.password": PASSWORDS["admin"]})
    admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(WAIT)
    for future in admin.create_acls([AclBinding(Resource.TOPIC, "guarded", Pattern.LITERAL, "User:alice", "*",
                                                AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
        future.result(WAIT)
    records = build_batch([b"guarded"])
    names = {name: await stage(owner, name, records) for name in ("anonymous", "alice", "bob")}

    anonymous = peer_link(owner.bootstrap)
    logged_in = peer_link(sasl, Login("SCRAM-SHA-512", "kgate-broker", PASSWORDS["kgate-broker"]))
    try:
        refused = await asyncio.wait_for(await anonymous.send(
            reference("guarded", 0, names["anonymous"], len(records), principal="alice"), 0), WAIT)
        assert outcome(refused) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1)
        as_alice = await logged_in.send(reference("guarded", 0, names["alice"], len(records), principal="alice"), 0)
        as_bob = await logged_in.send(reference("guarded", 0, names["bob"], len(records), principal="bob"), 0)
        assert outcome(await asyncio.wait_for(as_alice, WAIT)) == (ErrorCode.NONE, 0)
        assert outcome(await asyncio.wait_for(as_bob, WAIT)) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
    finally:
        anonymous.close()
        logged_in.close()
