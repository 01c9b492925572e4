"""The client commands of ``kgate``: they speak the Kafka protocol (through
kafka-python) to ``--bootstrap-server``, so they manage any Kafka cluster, not only
kgate. Nothing here imports the broker: one module per family of commands, and
``client_options`` for how every one of them connects, fails and exits."""
from kgate.console import command as console_command
from kgate.mirror import command as mirror_command

from . import acls, brokers, console, groups, pipeline_jobs, process, topics

FAMILIES = (topics, groups, console, brokers, acls, pipeline_jobs, mirror_command, process, console_command)
