"""Schemas of the records in ``__share_group_state``, in Kafka's message-schema JSON.

The same key version and fields as Kafka's share coordinator writes for a snapshot.
"""
