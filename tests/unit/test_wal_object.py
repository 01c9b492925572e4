"""The WAL object and index piece layouts, and the --storage s3:// location, without a store."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgate.gateway.config import ConfigError, Settings
from kgate.storage.ledger import ChecksumMismatch, CorruptLedger
from kgate.storage.stores import wal_object
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.wal_object import HEAD_BYTES, Run

ledgers = st.dictionaries(st.integers(0, 2**40), st.lists(st.binary(max_size=300), min_size=1, max_size=5),
                          min_size=1, max_size=4)


def build(entries_by_ledger: dict[int, list[bytes]]) -> tuple[bytes, list[Run]]:
    buffers, runs, pos = [], [], 0
    for ledger_id, entries in entries_by_ledger.items():
        run = Run(ledger_id, 7, pos)
        for payload in entries:
            chunks = [payload[:3], payload[3:]]
            framed, length = wal_object.frame(chunks)
            buffers += framed
            run.lengths.append(length)
            run.heads.append(wal_object.head_of(chunks))
            pos += wal_object.FRAME.size + length
        runs.append(run)
    return b"".join(buffers) + wal_object.object_index(runs), runs


@given(ledgers)
def test_an_object_index_and_its_frames_read_back(entries_by_ledger):
    data, runs = build(entries_by_ledger)
    read = wal_object.read_object_index(data, "k")
    assert read == runs
    for run, entries in zip(read, entries_by_ledger.values()):
        assert run.heads == [payload[:HEAD_BYTES] for payload in entries]
        got = wal_object.read_frames(data[run.start:run.end], run.ledger_id, run.first_entry, run.lengths)
        assert [bytes(p) for p in got] == entries


@given(ledgers)
def test_an_index_piece_keeps_each_run_with_its_object_key(entries_by_ledger):
    _data, runs = build(entries_by_ledger)
    pieces = [(f"wal/w/{i:020d}", run) for i, run in enumerate(runs)]
    assert wal_object.read_index_piece(wal_object.index_piece(pieces), "p") == pieces


def test_a_flipped_byte_in_a_payload_or_the_index_is_refused():
    data, runs = build({1: [b"hello world", b"again"]})
    damaged = bytearray(data)
    damaged[10] ^= 1
    with pytest.raises(ChecksumMismatch):
        wal_object.read_frames(damaged, 1, 7, runs[0].lengths)
    damaged = bytearray(data)
    damaged[-20] ^= 1
    with pytest.raises(CorruptLedger):
        wal_object.read_object_index(bytes(damaged), "k")
    with pytest.raises(CorruptLedger, match="not a WAL object"):
        wal_object.read_object_index(b"x" * 64, "k")


def test_a_bucket_location_names_bucket_prefix_endpoint_and_region():
    location = BucketLocation.parse("s3://b/some/prefix?endpoint=http://127.0.0.1:8333&region=eu-west-1")
    assert location == BucketLocation("b", "some/prefix", "http://127.0.0.1:8333", "eu-west-1")
    assert BucketLocation.parse("s3://b").region == "us-east-1"


@pytest.mark.parametrize("storage", ["s3://", "s3://b?secret=x", "s3://b?endpoint=ftp://h", "gs://b/p"])
def test_a_bad_storage_url_stops_start_up_naming_the_setting(storage):
    with pytest.raises(ConfigError, match=r"kgate\.storage"):
        Settings.load(overrides=[f"kgate.storage={storage}"])


@pytest.mark.parametrize("wal", ["file:", "disk", "s3://b"])
def test_a_bad_wal_stops_start_up_naming_the_setting(wal):
    with pytest.raises(ConfigError, match=r"kgate\.wal"):
        Settings.load(overrides=[f"kgate.wal={wal}"])
