"""``kgate mirror serve|routes|status|audit|failover``: the replication service's commands.

Every one reads ``--config`` (default mirror.toml) for the clusters and the ZooKeeper
that holds the mirror's state, and fails the way the other client commands do (one
line on stderr; exit 1 refused, 2 bad usage or configuration, 3 unreachable).
"""
import argparse
import logging

from kgate.cli import client_options as options
from kgate.cli import output
from kgate.cli.client_options import ConnectError, Failed, UsageError

from . import audit, operations
from . import config as mirror_config
from .routes import POLICIES, Route, RouteError, parse_route_name, parse_topics, route_name
from .state import MirrorState, StateUnavailable

# kazoo logs every failed connection attempt; the commands report the failure themselves,
# in one line (serve configures logging, and its records still reach the root handler).
logging.getLogger("kazoo").addHandler(logging.NullHandler())


def add_parser(commands) -> None:
    mirror = commands.add_parser("mirror", help="replicate topics between Kafka clusters",
                                 description="Cross-cluster replication: workers that copy topics from source to "
                                             "target clusters, coordinated through ZooKeeper.")
    actions = mirror.add_subparsers(dest="action", required=True, metavar="ACTION")
    serve = _action(actions, "serve", "run a replication worker (run several, on any hosts)")
    serve.add_argument("--http", metavar="HOST:PORT", help="serve the routes and status JSON API here")
    serve.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics here")
    serve.add_argument("--worker-id", metavar="ID", help="this worker's name (default HOST-PID)")
    routes = _action(actions, "routes", "add, list and remove routes")
    route_actions = routes.add_subparsers(dest="route_action", required=True, metavar="ROUTE_ACTION")
    add = _action(route_actions, "add", "copy topics from one cluster to another (takes effect at once)")
    _route_options(add, topics_required=True)
    add.add_argument("--policy", choices=POLICIES, default="prefix",
                     help="prefix: SOURCE.TOPIC on the target (MirrorMaker 2's naming, the default); "
                          "identity: the same name (two-way hot standby)")
    _action(route_actions, "list", "the routes", listing=True)
    remove = _action(route_actions, "remove", "stop copying a route, or some of its topic patterns")
    _route_options(remove, topics_required=False)
    _action(actions, "status", "per route and partition: worker, lag in records and seconds, throughput",
            listing=True)
    audit = _action(actions, "audit", "records per topic and minute at the source and at the target (exit 1 when "
                                      "records are missing)", listing=True)
    audit.add_argument("--route", required=True, metavar="SOURCE:TARGET",
                       help="the route to audit, its source and target cluster names")
    audit.add_argument("--since", default="1h", metavar="WHEN",
                       help="a duration back from now (90s, 30m, 1h, 2d) or an ISO-8601 time (default 1h)")
    failover = _action(actions, "failover", "move a consumer group to the other cluster (a dry run unless --execute)",
                       listing=True)
    failover.add_argument("--group", required=True, metavar="GROUP",
                          help="the consumer group whose committed offsets are translated")
    failover.add_argument("--from", required=True, dest="source", metavar="CLUSTER",
                          help="the cluster the group leaves (its committed offsets are read there)")
    failover.add_argument("--to", required=True, dest="target", metavar="CLUSTER",
                          help="the cluster the group resumes on (translated offsets are committed there)")
    failover.add_argument("--execute", action="store_true",
                          help="commit the translated offsets (the group must not be active on the target)")


def _action(actions, name: str, help: str, listing: bool = False) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=help, description=help)
    parser.add_argument("--config", metavar="FILE", default=mirror_config.DEFAULT_PATH,
                        help=f"the mirror's configuration (default {mirror_config.DEFAULT_PATH})")
    if listing:
        output.add_option(parser)
    return parser


def _route_options(parser: argparse.ArgumentParser, topics_required: bool) -> None:
    parser.add_argument("--source", required=True, metavar="CLUSTER", help="a cluster alias of the configuration")
    parser.add_argument("--target", required=True, metavar="CLUSTER", help="a cluster alias of the configuration")
    parser.add_argument("--topics", required=topics_required, metavar="LIST",
                        help="comma-separated topic names or shell patterns ('orders,payments-*')"
                             + ("" if topics_required else "; without it the whole route goes"))


def run(args) -> int:
    name = f"kgate mirror {args.action}" + (f" {args.route_action}" if args.action == "routes" else "")
    return options.run(_dispatch, args, name)


def _dispatch(args) -> None:
    try:
        config = mirror_config.load(args.config)
        # serve and failover need confluent-kafka (the mirror extra): imported only for them.
        if args.action == "serve":
            from .service import serve
            serve(config, args)
            return
        with _state(config) as state:
            ACTIONS[(args.action, getattr(args, "route_action", None))](config, state, args)
    except mirror_config.ConfigError as exc:
        raise UsageError(str(exc)) from None
    except RouteError as exc:
        raise Failed(str(exc)) from None


def _state(config) -> MirrorState:
    try:
        return MirrorState(config).connect()
    except StateUnavailable as exc:
        raise ConnectError(str(exc)) from None


def _routes_add(config, state: MirrorState, args) -> None:
    route = operations.add_route(config, state, Route(args.source, args.target, parse_topics(args.topics),
                                                       args.policy))
    print(f"route {route.name} ({route.policy}): {','.join(route.topics)}")


def _routes_list(config, state: MirrorState, args) -> None:
    routes = sorted(state.routes().values(), key=lambda r: r.name)
    output.listing(args, ("ROUTE", "SOURCE", "TARGET", "POLICY", "TOPICS"),
                   [(r.name, r.source, r.target, r.policy, ",".join(r.topics)) for r in routes],
                   [r.to_json() | {"route": r.name} for r in routes])


def _routes_remove(config, state: MirrorState, args) -> None:
    name = route_name(args.source, args.target)
    remaining = operations.remove_route(state, name, parse_topics(args.topics) if args.topics is not None else None)
    print(f"route {name} ({remaining.policy}): {','.join(remaining.topics)}" if remaining else f"removed route {name}")


def _status(config, state: MirrorState, args) -> None:
    rows = operations.status_rows(state)
    output.listing(args, ("ROUTE", "TOPIC", "PARTITION", "WORKER", "LAG", "LAG SECONDS", "RECORDS/S", "BYTES/S"),
                   [(r["route"], r["topic"], r["partition"], r["worker"], r["lag_records"], r["lag_seconds"],
                     round(r["records_per_second"], 1), round(r["bytes_per_second"])) for r in rows], rows)


def _audit(config, state: MirrorState, args) -> None:
    from .target_counts import CountError, audit_route
    source, target = parse_route_name(args.route)
    try:
        since_ms = audit.parse_since(args.since)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    route = state.routes().get(args.route)
    if route is None and not state.children("audit", args.route):
        raise Failed(f"no route {args.route} and no audit counts for it")
    try:
        rows = audit_route(state, config.cluster(target), route or Route(source, target, ("*",)), since_ms)
    except CountError as exc:
        raise Failed(f"cannot count the target: {exc}") from None
    output.listing(args, ("TOPIC", "MINUTE", "SOURCE", "TARGET", "MISSING", "DUPLICATED"),
                   [(r.topic, audit.minute_text(r.minute), r.source, r.target, r.missing, r.duplicated)
                    for r in rows], [r.to_json() for r in rows])
    missing = sum(r.missing for r in rows)
    if missing:
        raise Failed(f"{missing} records missing on {target} (counted at {source}, not found at {target})")


def _failover(config, state: MirrorState, args) -> None:
    from confluent_kafka import KafkaException

    from .failover import FailoverError, execute, plan
    config.cluster(args.source)
    config.cluster(args.target)
    try:
        steps = plan(config, state.routes(), args.group, args.source, args.target)
        output.listing(args, ("TOPIC", "PARTITION", "OFFSET", f"{args.target.upper()} TOPIC",
                              f"{args.target.upper()} OFFSET", "HOW"),
                       [(s.topic, s.partition, s.offset, s.to_topic, s.to_offset, s.how) for s in steps],
                       [s.__dict__ for s in steps])
        if not args.execute:
            output.note(f"dry run: nothing committed; --execute commits these offsets for {args.group} "
                        f"on {args.target}")
            return
        count = execute(config, args.group, args.target, steps)
    except FailoverError as exc:
        raise Failed(str(exc)) from None
    except KafkaException as exc:
        raise Failed(exc.args[0].str()) from None
    output.note(f"committed {count} offsets for {args.group} on {args.target}")


ACTIONS = {
    ("status", None): _status,
    ("audit", None): _audit,
    ("failover", None): _failover,
    ("routes", "add"): _routes_add,
    ("routes", "list"): _routes_list,
    ("routes", "remove"): _routes_remove,
}
