"""How a fetch serves a partition's entries when one of them cannot be read.

The entries are built by the real entry formats; only the ledger around them is
left out, since the choice under test is the fetch handler's.
"""
from kgate.gateway.handlers.fetch import decode_entries
from kgate.protocol import conversion, record_batch
from kgate.protocol.error_codes import ErrorCode
from kgate.storage import entry_formats
from kgate.storage.entry import EntryHeader
from kgate.storage.entry_formats import ProducedRecords
from kgate.storage.managed_ledger import StoredEntry
from tests.unit.record_batches import build_batch

BATCH = build_batch([b"a", b"b"])


def entry(format_name: str, base: int, corrupt: bool = False, format_code: int | None = None) -> StoredEntry:
    entry_format = entry_formats.by_name(format_name)
    produced = ProducedRecords.of_batch(memoryview(BATCH), record_batch.validate(BATCH))
    payload = bytearray(b"".join(bytes(b) for b in entry_format.encode(produced, base, 0, None)))
    if corrupt:
        payload[len(payload) // 2] ^= 0xFF
    code = entry_format.code if format_code is None else format_code
    return StoredEntry(EntryHeader(base, 2, 0, 2, code), memoryview(bytes(payload)))


def offsets(chunks) -> list[int]:
    return [record.offset for chunk in chunks for record in conversion.read(chunk)]


def test_mixed_formats_in_one_partition_read_in_order():
    chunks, error = decode_entries([entry("kafka", 0), entry("pulsar", 2), entry("mixed_kafka", 4)], 12)
    assert error == ErrorCode.NONE and offsets(chunks) == [0, 1, 2, 3, 4, 5]


def test_entries_before_an_unreadable_one_are_served_and_the_error_comes_when_it_is_reached():
    entries = [entry("kafka", 0), entry("pulsar", 2, corrupt=True), entry("kafka", 4)]
    chunks, error = decode_entries(entries, 12)
    assert error == ErrorCode.NONE and offsets(chunks) == [0, 1]
    chunks, error = decode_entries(entries[1:], 12)
    assert (chunks, error) == ([], ErrorCode.KAFKA_STORAGE_ERROR)


def test_an_unknown_format_code_is_a_storage_error():
    assert decode_entries([entry("kafka", 0, format_code=99)], 12) == ([], ErrorCode.KAFKA_STORAGE_ERROR)
