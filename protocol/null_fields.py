"""Null where the schema allows none: the check kafka-python's decoder leaves out.

Kafka's generated readers refuse a null (a negative length) for a field that is not
nullable at the request's version, and the broker closes the connection. kafka-python's
decoder turns every -1 length into None whatever the schema says, so without this
check a ``topics`` array sent as null reaches handlers that iterate it. The check is
derived from each API's schema (its ``nullableVersions``), not listed by hand, once
per API and version, and visits only fields that can decode to None.
"""
# Simple types whose -1 length decodes to None; UUIDs also decode to None (the zero
# UUID), which is a value, not a null.
_LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})

# Per (class, version): for each field to visit, (name, must not be null, is an array, checks inside).
_PLANS: dict = {}


def _plan(struct, version: int) -> tuple:
    checks = []
    for field in struct.untagged_fields(version):
        inner = _plan(field, version) if field.is_struct_array() or field.is_struct() else ()
        can_be_null = field.is_array() or field.is_struct() or field.type_str in _LENGTH_PREFIXED
        required = can_be_null and not field.nullable_for_version_q(version)
        if required or inner:
            checks.append((field.name, required, field.is_array(), inner))
    return tuple(checks)


def _first_null(value, plan: tuple) -> list | None:
    """The path (innermost first) to the first non-nullable field holding None, or None."""
    for name, required, is_array, inner in plan:
        item = getattr(value, name)
        if item is None:
            if required:
                return [name]
            continue
        if inner:
            for index, element in enumerate(item) if is_array else ((None, item),):
                found = _first_null(element, inner)
                if found is not None:
                    return [*found, name if index is None else f"{name}[{index}]"]
    return None


def null_field(cls, request, version: int) -> str | None:
    """The first field of ``request`` (decoded by ``cls`` at ``version``) that is null but may not be, or None."""
    plan = _PLANS.get((cls, version))
    if plan is None:
        plan = _PLANS[(cls, version)] = _plan(cls._struct, version)
    found = _first_null(request, plan)
    return None if found is None else ".".join(reversed(found))
