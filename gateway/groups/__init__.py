"""Consumer groups: the classic group protocol's coordinator, its state and its log records."""
from .coordinator import OFFSETS_TOPIC, GroupCoordinator
from .effects import JoinResult
from .machine import JoinRequest

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "JoinRequest", "JoinResult"]
