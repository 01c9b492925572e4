"""The coordinator runtime: shards of internal topics, replayed, written, timed and compacted alike."""
from .clock import Clock, WallClock
from .partition_writer import LedgerPartitionWriter, PartitionWriter
from .runtime import CoordinatorRuntime
from .shard import Arm, Cancel, Result, Shard

__all__ = ["Arm", "Cancel", "Clock", "CoordinatorRuntime", "LedgerPartitionWriter", "PartitionWriter", "Result",
           "Shard", "WallClock"]
