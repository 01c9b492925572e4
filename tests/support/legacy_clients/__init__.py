"""Clients of the 0.9/0.10 era that cannot live in the project venv (old kafka-python
releases, Sarama 1.22, kcat) or that need a forced generation (confluent-kafka without
ApiVersions), each behind the produce/consume shape of tests.support.clients."""
