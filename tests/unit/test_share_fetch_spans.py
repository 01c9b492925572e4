"""What ShareFetch hands the share-partition rules of a read: each batch's offsets, marked as
data, an aborted transaction's records (for read_committed) or a transaction marker."""
import struct

from kgate.gateway.handlers.share_fetch import _spans
from kgate.gateway.partition_transactions import AbortedTransaction
from kgate.gateway.shares.partition_state import Span, SpanKind
from kgate.protocol import control_batch
from kgate.storage.entry import EntryHeader
from kgate.storage.managed_ledger import StoredEntry
from tests.unit.record_batches import build_batch


def stored(batch: bytes, base: int, count: int) -> tuple[bytes, StoredEntry]:
    placed = struct.pack(">q", base) + batch[8:]
    return placed, StoredEntry(EntryHeader(base, count, 0, 2, 0), memoryview(placed))


def read():
    return [stored(build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
                   0, 2),
            stored(control_batch.build(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=0), 2, 1),
            stored(build_batch([b"c"]), 3, 1),
            stored(build_batch([b"d"], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True), 4, 1)]


def test_read_committed_marks_the_aborted_transactions_records_and_the_markers():
    chunks, entries = zip(*read())
    assert list(_spans(chunks, entries, [AbortedTransaction(7, 0, 2)])) == [
        Span(0, 1, SpanKind.ABORTED), Span(2, 2, SpanKind.CONTROL), Span(3, 3), Span(4, 4)]


def test_without_aborted_transactions_only_markers_are_set_apart():
    chunks, entries = zip(*read())
    assert list(_spans(chunks, entries, [])) == [Span(0, 1), Span(2, 2, SpanKind.CONTROL), Span(3, 3), Span(4, 4)]
