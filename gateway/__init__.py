"""The asyncio broker: server, connections, request handlers, coordinators, CLI."""
