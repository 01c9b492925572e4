"""MirrorMaker 2's record formats (bytes as Kafka's Struct schemas lay them out) and
offset translation in both directions."""
import struct

import pytest

from kgate.mirror.mm2_formats import (
    Checkpoint,
    FormatError,
    Heartbeat,
    OffsetSync,
    checkpoints_topic,
    offset_syncs_topic,
)
from kgate.mirror.translation import Sync, SyncHistory


def test_offset_sync_bytes_match_the_struct_layout():
    sync = OffsetSync("orders", 3, 1200, 1100)
    assert sync.key() == b"\x00\x06orders" + struct.pack(">i", 3)
    assert sync.value() == struct.pack(">qq", 1200, 1100)  # no version header
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    assert offset_syncs_topic("dc2") == "mm2-offset-syncs.dc2.internal"


def test_checkpoint_and_heartbeat_bytes_carry_a_version_header():
    checkpoint = Checkpoint("billing", "dc1.orders", 0, 50, 40, "m")
    assert checkpoint.key() == b"\x00\x07billing\x00\x0adc1.orders" + struct.pack(">i", 0)
    assert checkpoint.value() == struct.pack(">hqq", 0, 50, 40) + b"\x00\x01m"
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint
    beat = Heartbeat("dc1", "dc2", 1_700_000_000_000)
    assert beat.key() == b"\x00\x03dc1\x00\x03dc2" and beat.value() == struct.pack(">hq", 0, 1_700_000_000_000)
    assert Heartbeat.decode(beat.key(), beat.value()) == beat
    assert checkpoints_topic("dc1") == "dc1.checkpoints.internal"
    with pytest.raises(FormatError):
        Checkpoint.decode(checkpoint.key(), checkpoint.value()[:9])


def test_forward_translation_never_skips():
    history = SyncHistory([Sync(100, 10), Sync(200, 105)])  # source 100..200 had gaps: 95 copies
    assert history.forward(100) == 10       # exactly at a sync
    assert history.forward(150) == 11       # past it: re-read from the copy after the sync's
    assert history.forward(250) == 106
    assert history.forward(50) == 10        # before the first copy: from the first copy
    assert SyncHistory([]).forward(5) is None


def test_reverse_translation_uses_the_delta_on_dense_copies_and_stays_behind_on_identity_ones():
    history = SyncHistory([Sync(100, 10), Sync(200, 105)])
    assert history.reverse(50, dense=True) == 140     # 50 + (100 - 10)
    assert history.reverse(105, dense=True) == 200
    assert history.reverse(5, dense=True) == 100       # before the first copy: the first copied record
    assert history.reverse(50, dense=False) == 101    # interleaved local records: only what a sync proves


def test_a_partition_copied_twice_translates_from_the_sync_where_the_repeat_begins():
    # 100..150 copied to 100..150, the worker died with 120 stored; its successor copied
    # 120..150 again to 151..181 and wrote a sync at its first acknowledgement.
    history = SyncHistory([Sync(100, 100), Sync(150, 150), Sync(120, 151), Sync(150, 181)])
    assert history.reverse(170, dense=True) == 139    # 170 is the repeat's copy of 139
    assert history.reverse(140, dense=True) == 140
    assert history.forward(130) == 152                 # the repeat holds every copy after 120
