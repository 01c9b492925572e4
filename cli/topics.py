"""``kgate topics create|list|describe|delete|alter-config|add-partitions``.

Each is one Kafka admin request (CreateTopics, Metadata, DescribeConfigs, DeleteTopics,
IncrementalAlterConfigs, CreatePartitions) sent to ``--bootstrap-server``, so the same
commands manage a Kafka cluster. Per-topic errors are read from the response rather
than raised by kafka-python, so the message names the topic and the broker's reason.
"""
import fnmatch
import sys

from kafka.admin import ConfigResource

from . import client_options as options
from . import output
from .client_options import Failed, UsageError

GLOB_CHARACTERS = "*?["


def add_parser(commands) -> None:
    actions = options.family(commands, "topics", help="create, list, describe, alter and delete topics",
                             description="Manage topics over the Kafka protocol (works against any Kafka cluster).")
    create = options.subcommand(actions, "create", "create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=-1, metavar="N",
                        help="number of partitions (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                        help="replicas per partition (default: the broker's default.replication.factor)")
    create.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    options.subcommand(actions, "list", "list topics and their partition counts", listing=True)
    describe = options.subcommand(actions, "describe", "partitions, leaders and config overrides",
                                  description="Describe topics (all when none is named): partitions, leaders, "
                                              "replicas and the configs set on the topic.", listing=True)
    describe.add_argument("names", nargs="*", metavar="NAME")
    delete = options.subcommand(actions, "delete", "delete a topic, or the topics a pattern matches",
                                description="Delete a topic, or every topic a shell-style pattern (*, ?, [...]; "
                                            "quote it) matches, internal topics excepted. A pattern matching "
                                            "several topics asks for confirmation unless --yes; without a "
                                            "terminal to ask on it refuses (exit 2).")
    delete.add_argument("name", metavar="NAME|PATTERN")
    delete.add_argument("--yes", action="store_true", help="delete without asking")
    alter = options.subcommand(actions, "alter-config", "set or remove topic configs (IncrementalAlterConfigs)")
    alter.add_argument("name")
    alter.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE", dest="set",
                       help="configs to set")
    alter.add_argument("--delete", action="extend", nargs="+", default=[], metavar="KEY", dest="delete",
                       help="configs to remove (back to the broker default)")
    grow = options.subcommand(actions, "add-partitions", "raise a topic's partition count (CreatePartitions)")
    grow.add_argument("name")
    grow.add_argument("--total", type=int, required=True, metavar="N", help="the partition count wanted")


def run(args) -> int:
    return options.run(ACTIONS[args.action], args, f"kgate topics {args.action}")


def _create(args) -> None:
    configs = options.key_values(args.config, "--config")
    with options.admin(args) as admin:
        result = admin.create_topics({args.name: {"num_partitions": args.partitions,
                                                  "replication_factor": args.replication_factor,
                                                  "configs": configs}}, raise_errors=False)
    for topic in result["topics"]:
        options.broker_error(topic["error_code"], f"topic {topic['name']!r}", topic.get("error_message"))
    print(f"created topic {args.name!r}")


def _list(args) -> None:
    with options.admin(args) as admin:
        topics = sorted(admin.describe_topics(), key=lambda t: t["name"])
    output.listing(args, ("TOPIC", "PARTITIONS", "INTERNAL"),
                   [(t["name"], len(t["partitions"]), "yes" if t["is_internal"] else "no") for t in topics],
                   [{"name": t["name"], "partitions": len(t["partitions"]), "internal": t["is_internal"]}
                    for t in topics])


def _describe(args) -> None:
    with options.admin(args) as admin:
        topics = admin.describe_topics(args.names or None)
        for topic in topics:
            options.broker_error(topic["error_code"], f"topic {topic['name']!r}")
        topics.sort(key=lambda t: t["name"])
        described = admin.describe_configs([ConfigResource("TOPIC", t["name"]) for t in topics]) if topics else {}
    overrides = described.get("topic", {})
    records = [{"name": t["name"], "topic_id": t.get("topic_id"), "internal": t["is_internal"],
                "configs": {key: entry["value"] for key, entry in overrides.get(t["name"], {}).items()},
                "partitions": [{"partition": p["partition_index"], "leader": p["leader_id"],
                                "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
                               for p in sorted(t["partitions"], key=lambda p: p["partition_index"])]}
               for t in topics]
    if args.output == "json":
        output.document(records)
        return
    output.table(("TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "TOPIC-ID", "CONFIGS"),
                 [(r["name"], len(r["partitions"]),
                   max((len(p["replicas"]) for p in r["partitions"]), default=0), r["topic_id"],
                   ",".join(f"{k}={v}" for k, v in sorted(r["configs"].items())) or None) for r in records])
    print()
    output.table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"),
                 [(r["name"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
                   ",".join(map(str, p["isr"]))) for r in records for p in r["partitions"]])


def _delete(args) -> None:
    with options.admin(args) as admin:
        names = _matching(admin, args.name)
        if len(names) > 1 and not args.yes:
            _confirm(args.name, names)
        result = admin.delete_topics(names, raise_errors=False)
    failures = []
    for topic in result["topics"]:
        if topic["error_code"]:
            failures.append(options.error_text(topic["error_code"], f"topic {topic['name']!r}",
                                               topic.get("error_message")))
        else:
            print(f"deleted topic {topic['name']!r}")
    if failures:
        raise Failed("; ".join(failures))


def _matching(admin, name: str) -> list[str]:
    """``name`` itself, or the non-internal topics a shell-style pattern matches."""
    if not any(c in name for c in GLOB_CHARACTERS):
        return [name]
    names = sorted(t["name"] for t in admin.describe_topics()
                   if not t["is_internal"] and fnmatch.fnmatchcase(t["name"], name))
    if not names:
        raise Failed(f"no topic matches {name!r}")
    return names


def _confirm(pattern: str, names: list[str]) -> None:
    shown = ", ".join(names[:10]) + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")
    if not sys.stdin.isatty():
        raise UsageError(f"{pattern!r} matches {len(names)} topics ({shown}); "
                         f"pass --yes to delete them when there is no terminal to confirm on")
    sys.stderr.write(f"Delete {len(names)} topics: {shown}? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise Failed("not confirmed; nothing deleted")


def _alter_config(args) -> None:
    changes = options.key_values(args.set, "--set")
    if not changes and not args.delete:
        raise UsageError("give --set KEY=VALUE and/or --delete KEY")
    both = sorted(set(changes) & set(args.delete))
    if both:
        raise UsageError(f"both set and deleted: {', '.join(both)}")
    changes.update({key: ("DELETE", None) for key in args.delete})
    with options.admin(args) as admin:
        result = admin.alter_configs([ConfigResource("TOPIC", args.name, configs=changes)],
                                     incremental=True, raise_on_unknown=False)
    outcome = result.get("topic", {}).get(args.name, "no answer for the topic")
    if outcome != "OK":
        raise Failed(options.result_text(outcome, f"topic {args.name!r}"))
    done = [f"set {k}={v}" for k, v in changes.items() if not isinstance(v, tuple)]
    done += [f"deleted {k}" for k in args.delete]
    print(f"altered topic {args.name!r}: {'; '.join(done)}")


def _add_partitions(args) -> None:
    if args.total < 1:
        raise UsageError("--total must be at least 1")
    with options.admin(args) as admin:
        response = admin.create_partitions({args.name: args.total}, raise_errors=False)
    for topic in response.results:
        options.broker_error(topic.error_code, f"topic {topic.name!r}", topic.error_message)
    print(f"topic {args.name!r} now has {args.total} partitions")


ACTIONS = {"create": _create, "list": _list, "describe": _describe, "delete": _delete,
           "alter-config": _alter_config, "add-partitions": _add_partitions}
