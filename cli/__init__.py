"""The client commands of ``kgate``: they speak the Kafka protocol (through
kafka-python) to ``--bootstrap-server``, so they manage any Kafka cluster, not only
kgate. Nothing here imports the broker: one module per family of commands, and
``client_options`` for how every one of them connects, fails and exits."""

# Each command name and the module that adds and runs it, imported only when it runs.
COMMANDS = {
    "topics": "kgate.cli.topics",
    "groups": "kgate.cli.groups",
    "consume": "kgate.cli.console",
    "produce": "kgate.cli.console",
    "console": "kgate.console.command",
    "brokers": "kgate.cli.brokers",
    "acls": "kgate.cli.acls",
    "pipeline": "kgate.cli.pipeline_jobs",
    "mirror": "kgate.mirror.command",
    "process": "kgate.cli.process",
}
