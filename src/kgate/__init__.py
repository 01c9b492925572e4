"""kgate: a Kafka-protocol broker over a shared log, and the clients that go with it.

Every part is imported under this name (``kgate.protocol``, ``kgate.gateway``,
``kgate.storage``, ``kgate.metadata``, ``kgate.cli``, ``kgate.pipeline``); the parts
live in folders of their own at the top of the repository, linked in here, so the
installed distribution adds one top-level package and shadows no other.
"""
