"""Managed ledgers over pluggable ledger stores, and the entry formats stored in them.

Nothing here knows the Kafka wire beyond record batches.
"""
