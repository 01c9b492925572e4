"""Benchmarks: they print figures, they never assert them (see bench/README.md)."""
