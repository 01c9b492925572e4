"""Transactions (KIP-98): the coordinator, its state machine and its log records."""
from .coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator"]
