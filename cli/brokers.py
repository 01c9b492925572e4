"""``kgate brokers list``: the cluster's brokers as DescribeCluster (or, from older
brokers, Metadata) reports them, to check what clients will be told to connect to, with
each kgate broker's load; ``kgate brokers moves``: the partitions the balancer or a
reassignment moved last.

A kgate broker describes its load and the cluster's recent moves as read-only broker
configs (``kgate.load.*``, ``kgate.balancer.recent.moves``), so they are read with
DescribeConfigs like any broker config; another Kafka has none, shown as ``-``."""
import json
import time

from kafka.admin import ConfigResource

from . import client_options as options
from . import output

LOAD = ("kgate.load.partitions", "kgate.load.bytes.in.per.second", "kgate.load.bytes.out.per.second")
MOVES = "kgate.balancer.recent.moves"


def add_parser(commands) -> None:
    actions = options.family(commands, "brokers", help="list the cluster's brokers",
                             description="Inspect the cluster's brokers over the Kafka protocol.")
    options.subcommand(actions, "list", "broker ids, advertised addresses, racks, the controller and each "
                       "broker's load (partitions, bytes in and out per second)", listing=True)
    options.subcommand(actions, "moves", "the partitions moved last between brokers, by the balancer or a "
                       "reassignment", listing=True)


def run(args) -> int:
    return options.run(_list if args.action == "list" else _moves, args, f"kgate brokers {args.action}")


def _described(admin, broker_ids, names) -> dict[int, dict[str, str]]:
    """Each broker's own values of the read-only configs ``names`` (absent from another Kafka)."""
    described = admin.describe_configs([ConfigResource("BROKER", str(b), configs=list(names)) for b in broker_ids])
    found = described.get("broker", {})
    return {b: {name: entry["value"] for name, entry in found.get(str(b), {}).items() if name in names}
            for b in broker_ids}


def _list(args) -> None:
    with options.admin(args) as admin:
        cluster = admin.describe_cluster()
        brokers = sorted(cluster["brokers"], key=lambda b: b["broker_id"])
        loads = _described(admin, [b["broker_id"] for b in brokers], LOAD)
    controller = cluster.get("controller_id")

    def load(broker_id, name, kind):
        value = loads[broker_id].get(name)
        return kind(float(value)) if value is not None else None

    records = [{"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                "controller": b["broker_id"] == controller, "partitions": load(b["broker_id"], LOAD[0], int),
                "bytes_in_per_second": load(b["broker_id"], LOAD[1], float),
                "bytes_out_per_second": load(b["broker_id"], LOAD[2], float)} for b in brokers]
    if args.output == "json":
        output.document({"cluster_id": cluster.get("cluster_id"), "controller_id": controller, "brokers": records})
        return
    output.table(("ID", "HOST", "PORT", "RACK", "CONTROLLER", "PARTITIONS", "IN-B/S", "OUT-B/S"),
                 [(r["id"], r["host"], r["port"], r["rack"], "yes" if r["controller"] else "no", r["partitions"],
                   _rate(r["bytes_in_per_second"]), _rate(r["bytes_out_per_second"])) for r in records])


def _rate(value: float | None) -> str | None:
    return None if value is None else f"{value:.0f}"


def _moves(args) -> None:
    with options.admin(args) as admin:
        controller = admin.describe_cluster().get("controller_id")
        described = _described(admin, [controller], (MOVES,))[controller]
    moves = json.loads(described.get(MOVES, "[]"))
    if args.output == "json":
        output.document(moves)
        return
    output.table(("AT", "TOPIC", "PARTITION", "FROM", "TO", "REASON", "LOAD-B/S"),
                 [(_when(m["at"]), m["topic"], m["partition"], m["from"], m["to"], m["reason"], f"{m['load']:.0f}")
                  for m in moves])


def _when(at_ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_ms / 1000))
