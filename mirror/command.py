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

from . import config as mirror_config
from .routes import POLICIES, Route, RouteError, merge, parse_route_name, parse_topics, route_name
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
    failover = _action(actions, "failover", "move a consumer group to the other cluster (a dry run unless --execute)",
                       listing=True)
    failover.add_argument("--group", required=True, metavar="GROUP")
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
    config.cluster(args.source)
    config.cluster(args.target)
    route = merge(state.routes(), Route(args.source, args.target, parse_topics(args.topics), args.policy))
    state.put_route(route)
    print(f"route {route.name} ({route.policy}): {','.join(route.topics)}")


def _routes_list(config, state: MirrorState, args) -> None:
    routes = sorted(state.routes().values(), key=lambda r: r.name)
    output.listing(args, ("ROUTE", "SOURCE", "TARGET", "POLICY", "TOPICS"),
                   [(r.name, r.source, r.target, r.policy, ",".join(r.topics)) for r in routes],
                   [r.to_json() | {"route": r.name} for r in routes])


def _routes_remove(config, state: MirrorState, args) -> None:
    name = route_name(args.source, args.target)
    parse_route_name(name)
    route = state.routes().get(name)
    if route is None:
        raise Failed(f"no route {name}")
    if args.topics is None:
        state.delete_route(name)
        print(f"removed route {name}")
        return
    dropped = parse_topics(args.topics)
    unknown = [t for t in dropped if t not in route.topics]
    if unknown:
        raise Failed(f"route {name} has no pattern {unknown[0]!r} (it has {','.join(route.topics)})")
    remaining = tuple(t for t in route.topics if t not in dropped)
    if remaining:
        state.put_route(Route(route.source, route.target, remaining, route.policy))
        print(f"route {name} ({route.policy}): {','.join(remaining)}")
    else:
        state.delete_route(name)
        print(f"removed route {name}")


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
    ("failover", None): _failover,
    ("routes", "add"): _routes_add,
    ("routes", "list"): _routes_list,
    ("routes", "remove"): _routes_remove,
}
