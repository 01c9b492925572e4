"""Message schemas, in Kafka's JSON schema language, of the APIs kafka-python has no
classes for. kafka-python's generator builds the codecs from them exactly as it does
for its own schemas, so these messages are declared once, as Kafka declares them."""
