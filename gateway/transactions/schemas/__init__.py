"""Schemas of the records in ``__transaction_state``, in Kafka's message-schema JSON.

The same keys, versions and fields as Kafka's transaction coordinator writes, so tools
that read Kafka's ``__transaction_state`` can read kgate's.
"""
