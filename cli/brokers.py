"""``kgate brokers list``: the cluster's brokers as DescribeCluster (or, from older
brokers, Metadata) reports them, to check what clients will be told to connect to."""
from . import client_options as options
from . import output


def add_parser(commands) -> None:
    actions = options.family(commands, "brokers", help="list the cluster's brokers",
                             description="Inspect the cluster's brokers over the Kafka protocol.")
    options.subcommand(actions, "list", "broker ids, advertised addresses, racks and the controller",
                       listing=True)


def run(args) -> int:
    return options.run(_list, args, f"kgate brokers {args.action}")


def _list(args) -> None:
    with options.admin(args) as admin:
        cluster = admin.describe_cluster()
    brokers = sorted(cluster["brokers"], key=lambda b: b["broker_id"])
    controller = cluster.get("controller_id")
    if args.output == "json":
        output.document({"cluster_id": cluster.get("cluster_id"), "controller_id": controller,
                         "brokers": [{"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                                      "controller": b["broker_id"] == controller} for b in brokers]})
        return
    output.table(("ID", "HOST", "PORT", "RACK", "CONTROLLER"),
                 [(b["broker_id"], b["host"], b["port"], b["rack"], "yes" if b["broker_id"] == controller else "no")
                  for b in brokers])
