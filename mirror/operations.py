"""What the command line and the HTTP API both do to the mirror's state: add and remove
routes, and gather the status of every assigned partition. One implementation, so the
two front ends refuse the same things with the same words."""
from .config import MirrorConfig
from .routes import Route, RouteError, merge
from .state import MirrorState


def add_route(config: MirrorConfig, state: MirrorState, route: Route) -> Route:
    """Add ``route`` (merged into an existing route of the same pair); ConfigError for an
    unknown cluster, RouteError when refused. Workers pick it up through their watch."""
    config.cluster(route.source)
    config.cluster(route.target)
    merged = merge(state.routes(), route)
    state.put_route(merged)
    return merged


def remove_route(state: MirrorState, name: str, patterns: tuple[str, ...] | None) -> Route | None:
    """Remove the route ``name``, or only ``patterns`` of it; the route that remains, if any."""
    route = state.routes().get(name)
    if route is None:
        raise RouteError(f"no route {name}")
    if patterns is None:
        state.delete_route(name)
        return None
    unknown = [t for t in patterns if t not in route.topics]
    if unknown:
        raise RouteError(f"route {name} has no pattern {unknown[0]!r} (it has {','.join(route.topics)})")
    remaining = tuple(t for t in route.topics if t not in patterns)
    if not remaining:
        state.delete_route(name)
        return None
    kept = Route(route.source, route.target, remaining, route.policy)
    state.put_route(kept)
    return kept


def status_rows(state: MirrorState) -> list[dict]:
    """Every assigned partition with its worker's latest figures (for `status` and the HTTP API)."""
    statuses = state.statuses()
    rows = []
    for worker, items in sorted(state.assignment()["workers"].items()):
        figures = statuses.get(worker, {}).get("partitions", {})
        for route, topic, partition in items:
            row = {"route": route, "topic": topic, "partition": partition, "worker": worker,
                   "lag_records": None, "lag_seconds": None, "records_per_second": 0.0, "bytes_per_second": 0.0}
            row.update({k: v for k, v in figures.get(f"{route}/{topic}/{partition}", {}).items() if k in row})
            rows.append(row)
    return sorted(rows, key=lambda r: (r["route"], r["topic"], r["partition"]))
