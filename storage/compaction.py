"""Log compaction of one managed ledger, as Kafka's log cleaner does it.

A pass maps each key of the *dirty* part (from the last pass's end to the first
uncleanable ledger) to the offset of its latest record, in a :class:`KeyOffsetMap` of
bounded memory; then rewrites the sealed ledgers from the first up to where the map
ends, keeping a record only when it is its key's latest, and swaps the rewritten
ledgers in with one chain write (:meth:`ManagedLedger.swap`). The open ledger is never
read nor rewritten, nor is a ledger younger than ``min.compaction.lag.ms`` (by its
newest record) or anything after it.

Offsets never change: a rewritten batch keeps its base offset and last offset delta
(``storage.entry`` headers keep counting the offsets it spans), so consumers skip the
gaps. A batch left empty is dropped, unless it is its idempotent producer's last one
in the log, which is kept empty so the producer's sequence survives a restart (Kafka's
rule). Tombstones (null values) stay until ``delete.retention.ms`` after the pass that
first kept them: that pass writes the time into the batch as its delete horizon
(KIP-534), and a later pass past it removes them. Records without a key are removed,
as Kafka's cleaner removes them.

Left as they are: batches with the transactional or control bit (transactions are not
served yet, so none is stored), legacy magic 0/1 entries of the ``kafka`` format (their
keys still count in the map, so older magic-2 records of the same keys go), and entries
of formats that do not store Kafka batches.

The CPU work (inflating, walking records, hashing keys, recompressing) runs in the
caller's executor one read chunk at a time, so the event loop only reads and appends.
"""
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kgate.protocol import message_set
from kgate.protocol.record_batch import read_header
from kgate.protocol.record_compaction import delete_horizon, read_records, rebuild

from . import entry, entry_formats
from .entry import EntryHeader
from .key_offset_map import KeyOffsetMap
from .managed_ledger import LedgerInfo, ManagedLedger, sealed_segment

log = logging.getLogger(__name__)

# Bytes of entries read (and handed to the executor) at a time.
CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class CompactionPolicy:
    """A topic's compaction configs (Kafka's names, in ms and bytes)."""

    delete_retention_ms: int
    min_lag_ms: int
    max_lag_ms: int
    min_dirty_ratio: float
    segment_bytes: int


@dataclass
class Cleanable:
    """The part of a log a pass may touch now, and how dirty it is."""

    segments: list
    clean_bytes: int = 0
    dirty_bytes: int = 0
    first_dirty_timestamp: int | None = None

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def due(self, policy: CompactionPolicy, now_ms: int) -> bool:
        """Kafka's test: dirtier than ``min.cleanable.dirty.ratio``, or dirty for longer than
        ``max.compaction.lag.ms``."""
        if not self.dirty_bytes:
            return False
        if self.dirty_ratio > policy.min_dirty_ratio:
            return True
        return self.first_dirty_timestamp is not None and now_ms - self.first_dirty_timestamp > policy.max_lag_ms


@dataclass
class CompactionResult:
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    swapped: bool = False
    # The earliest delete horizon of the tombstones left, when a later pass must remove them.
    tombstones_expire_ms: int | None = None
    timings: dict = field(default_factory=dict)


def cleanable(ledger: ManagedLedger, policy: CompactionPolicy, now_ms: int) -> Cleanable:
    """The sealed ledgers older than ``min.compaction.lag.ms``, split at the last pass's end."""
    found = Cleanable([])
    clean_end = ledger.clean_end
    for segment in ledger.sealed_segments():
        if segment.info.max_timestamp > now_ms - policy.min_lag_ms:
            break
        found.segments.append(segment)
        if not segment.ends:
            continue
        first_dirty = segment.entry_for(clean_end)
        before = segment.ends[first_dirty - 1] if first_dirty else 0
        found.clean_bytes += before
        found.dirty_bytes += segment.ends[-1] - before
        if found.first_dirty_timestamp is None and first_dirty < len(segment.ends):
            found.first_dirty_timestamp = segment.max_timestamps[first_dirty]
    return found


RunInExecutor = Callable[..., Awaitable]


async def compact(ledger: ManagedLedger, found: Cleanable, policy: CompactionPolicy, map_bytes: int,
                  run: RunInExecutor, now_ms: int, producers_last: dict[int, int],
                  inflate_limit: int) -> CompactionResult:
    """One pass over ``found`` (from :func:`cleanable`); ``run(fn, *args)`` runs CPU work off the loop.

    ``producers_last`` maps each idempotent producer id to the base offset of its last
    batch in the log (those batches are kept even when left empty).
    """
    result = CompactionResult()
    expected = sum(_records_from(segment, ledger.clean_end) for segment in found.segments)
    key_map = KeyOffsetMap(map_bytes, expected)
    map_end = await _build_map(ledger, found.segments, key_map, run, inflate_limit, result)
    if not found.dirty_bytes:  # a pass for expired tombstones only: the whole cleanable part
        old = found.segments
    elif map_end <= ledger.clean_end:
        log.warning("%s: one batch holds more records than log.cleaner.dedupe.buffer.size maps (%d keys); "
                    "not compacted", ledger.name, key_map.capacity)
        return result
    else:
        old = [segment for segment in found.segments if segment.info.first_offset < map_end]
    if not old:
        return result
    groups = _groups(old, policy.segment_bytes)
    ledgers = await ledger.create_rewrite_ledgers(len(groups))
    try:
        rules = _Rules(key_map, now_ms, policy.delete_retention_ms, producers_last, ledger.log_start_offset,
                       inflate_limit)
        new = []
        for group, target in zip(groups, ledgers, strict=True):
            segment = await _rewrite(ledger, group, target, rules, run, result)
            if segment is not None:
                new.append(segment)
        result.swapped = await ledger.swap(old, new, map_end)
    except BaseException:
        ledger.discard_rewrite(ledgers)
        raise
    kept = {segment.info.ledger_id for segment in new} if result.swapped else set()
    ledger.discard_rewrite([target for target in ledgers if target.ledger_id not in kept])
    result.tombstones_expire_ms = rules.earliest_horizon
    return result


def _records_from(segment, offset: int) -> int:
    """Offsets spanned by the segment's entries from ``offset`` on: a bound on their records."""
    first = segment.entry_for(offset)
    if first >= len(segment.last_offsets):
        return 0
    start = segment.last_offsets[first - 1] + 1 if first else segment.info.first_offset
    return segment.last_offsets[-1] + 1 - start


async def _chunks(ledger: ManagedLedger, segment, first: int):
    """The segment's entries from ``first`` on, a few MiB at a time."""
    count = len(segment.ends)
    while first < count:
        start = segment.ends[first - 1] if first else 0
        last = first
        while last + 1 < count and segment.ends[last + 1] - start <= CHUNK_BYTES:
            last += 1
        yield await ledger.read_entries(segment, first, last)
        first = last + 1


async def _build_map(ledger: ManagedLedger, segments, key_map: KeyOffsetMap, run: RunInExecutor,
                     inflate_limit: int, result: CompactionResult) -> int:
    """Map the dirty entries' keys until the map is full; return the offset the map covers up to."""
    end = ledger.clean_end
    for segment in segments:
        async for entries in _chunks(ledger, segment, segment.entry_for(end)):
            result.bytes_read += sum(len(raw) for raw in entries)
            mapped_to, full = await run(_map_entries, entries, key_map, inflate_limit)
            end = max(end, mapped_to)
            if full:
                return end
    return end


def _map_entries(entries, key_map: KeyOffsetMap, inflate_limit: int) -> tuple[int, bool]:
    """Put every key of ``entries`` in the map, stopping before an entry that may not fit."""
    end = -1
    for raw in entries:
        header = EntryHeader.unpack(raw)
        if not key_map.room_for(header.record_count):
            return end, True
        for key, offset in _keys(header, raw[entry.SIZE:], inflate_limit):
            key_map.put(key, offset)
        end = header.last_offset + 1
    return end, False


def _keys(header: EntryHeader, payload, inflate_limit: int):
    if not entry_formats.stores_batches(header.format_code):
        return
    if header.magic < 2:
        for _codec, legacy in message_set.read_stored(payload, inflate_limit):
            yield from ((record.key, record.offset) for record in legacy if record.key is not None)
        return
    batch = read_header(payload)
    if batch.is_transactional or batch.is_control:
        return
    for record in read_records(payload, batch, inflate_limit):
        if record.key is not None:
            yield record.key, batch.base_offset + record.offset_delta


def _groups(segments, segment_bytes: int) -> list[list]:
    """Consecutive ledgers merged into one while their sizes add up to ``segment.bytes`` (as Kafka groups segments)."""
    groups: list[list] = []
    size = 0
    for segment in segments:
        if not groups or size + segment.info.size > segment_bytes:
            groups.append([])
            size = 0
        groups[-1].append(segment)
        size += segment.info.size
    return groups


class _Rules:
    """Which records a pass keeps, and the delete horizons it sees."""

    def __init__(self, key_map: KeyOffsetMap, now_ms: int, delete_retention_ms: int,
                 producers_last: dict[int, int], log_start: int, inflate_limit: int):
        self.key_map = key_map
        self.now_ms = now_ms
        self.new_horizon = now_ms + delete_retention_ms
        self.producers_last = producers_last
        self.log_start = log_start
        self.inflate_limit = inflate_limit
        self.earliest_horizon: int | None = None

    def clean(self, raw) -> tuple[EntryHeader | None, object, int]:
        """The entry as it stays (header and payload; None for neither when it goes) and how
        many records it lost."""
        header = EntryHeader.unpack(raw)
        payload = raw[entry.SIZE:]
        if header.last_offset < self.log_start:
            return None, None, 0  # below the log start (DeleteRecords): never served again
        if header.magic < 2 or not entry_formats.stores_batches(header.format_code):
            return header, payload, 0
        batch = read_header(payload)
        if batch.is_transactional or batch.is_control:
            return header, payload, 0
        records = read_records(payload, batch, self.inflate_limit)
        horizon = delete_horizon(batch)
        kept = self._kept(records, batch.base_offset, horizon is not None and horizon <= self.now_ms)
        base = batch.base_offset
        tombstones = any(record.tombstone for record in kept)
        set_horizon = self.new_horizon if tombstones and horizon is None else None
        if tombstones:
            self._saw_horizon(horizon if set_horizon is None else set_horizon)
        removed = len(records) - len(kept)
        if not removed and set_horizon is None:
            return header, payload, 0
        if not kept and self.producers_last.get(batch.producer_id) != base:
            return None, None, removed
        rebuilt = rebuild(batch, kept, set_horizon)
        return header._replace(max_timestamp=read_header(rebuilt).max_timestamp), rebuilt, removed

    def _kept(self, records, base: int, expired: bool) -> list:
        """The records the key map says are their key's latest (tombstones only while their
        delete horizon has not passed)."""
        get = self.key_map.get
        return [record for record in records
                if record.key is not None and get(record.key) <= base + record.offset_delta
                and not (record.tombstone and expired)]

    def _saw_horizon(self, horizon) -> None:
        if self.earliest_horizon is None or horizon < self.earliest_horizon:
            self.earliest_horizon = horizon


def _clean_entries(entries, rules: _Rules) -> list[tuple[EntryHeader | None, object, int]]:
    return [rules.clean(raw) for raw in entries]


async def _rewrite(ledger: ManagedLedger, group, target, rules: _Rules, run: RunInExecutor,
                   result: CompactionResult):
    """Write ``group``'s entries that stay into the new ledger ``target``; its segment, or None if empty."""
    first, last = group[0].info, group[-1].info
    segment = sealed_segment(LedgerInfo(target.ledger_id, first.first_offset, first.created_ms, closed=True,
                                        last_offset=last.last_offset), target)
    for old in group:
        async for entries in _chunks(ledger, old, 0):
            result.bytes_read += sum(len(raw) for raw in entries)
            for header, payload, removed in await run(_clean_entries, entries, rules):
                result.records_removed += removed
                if header is not None:
                    target.add_entry([header.pack(), payload])
                    segment.add(header, len(payload))
                    result.bytes_written += entry.SIZE + len(payload)
    await target.close()
    if not segment.ends:
        return None
    info = segment.info
    info.last_entry = len(segment.ends) - 1
    info.max_timestamp = max(segment.max_timestamps)
    info.size = segment.ends[-1]
    return segment
