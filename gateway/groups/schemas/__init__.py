"""Schemas of the records in ``__consumer_offsets``, in Kafka's message-schema JSON.

kafka-python generates the encoders from them, so the record layout is declared
once, with the same versions and fields as Kafka's group coordinator writes: tools
that read Kafka's ``__consumer_offsets`` can read kgate's.
"""
