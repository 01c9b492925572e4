"""The Kafka wire protocol, sans-IO: bytes in, typed events out.

Nothing in this package touches sockets, asyncio, storage or metadata, so every
rule it enforces can be tested by feeding it bytes.
"""
