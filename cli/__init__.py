"""The client commands of ``kgate``: they speak the Kafka protocol (through
kafka-python) to ``--bootstrap-server``, so they manage any Kafka cluster, not only
kgate. Nothing here imports the broker: one module per family of commands, and
``client_options`` for how every one of them connects, fails and exits."""
from . import brokers, console, groups, pipeline_jobs, process, topics

FAMILIES = (topics, groups, console, brokers, pipeline_jobs, process)
