"""Ledger stores: where entries physically live."""
