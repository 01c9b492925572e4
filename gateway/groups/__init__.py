"""Consumer groups: the classic group protocol's coordinator, its state and its log records."""
from .coordinator import OFFSETS_TOPIC, GroupCoordinator, GroupError, JoinRequest, JoinResult

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupError", "JoinRequest", "JoinResult"]
