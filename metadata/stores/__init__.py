"""Metadata store implementations."""
