"""Kafka's names for how a client meets a broker: a listener's security protocol and
the SASL mechanisms. The broker's listeners and SASL exchange and the client-side
commands all speak in these names, so they live with the wire protocol, once."""
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
