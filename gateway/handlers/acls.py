"""DescribeAcls, CreateAcls and DeleteAcls: Kafka's ACL administration.

Like Kafka: describing ACLs needs DESCRIBE on the cluster and changing them ALTER;
without an authorizer every one of them answers SECURITY_DISABLED. Bindings are
written to the metadata store, so every broker of the cluster applies them (and this
one has re-read them before it answers, so a describe right after sees the change).
"""
import logging

from kafka.protocol.admin.acl import (
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import (
    CLUSTER_NAME,
    Acl,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    invalid_acl,
)
from kgate.protocol.error_codes import ErrorCode

from . import Context, handles

log = logging.getLogger(__name__)

SECURITY_DISABLED = "No Authorizer is configured on the broker"


def _refusal(ctx: Context, operation: Operation) -> tuple[ErrorCode, str] | None:
    if not ctx.broker.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED
    if not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Not authorized to {operation.name} ACLs"
    return None


def _filter(ctx: Context, f) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter (their fields share names) as an AclFilter;
    a code no enum knows becomes UNKNOWN, which the filter reports as invalid."""
    def enum(kind, value):
        try:
            return kind(value)
        except ValueError:
            return kind.UNKNOWN
    return AclFilter(
        resource_type=enum(ResourceType, f.resource_type_filter), name=f.resource_name_filter,
        pattern=enum(PatternType, f.pattern_type_filter) if ctx.version >= 1 else PatternType.LITERAL,
        principal=f.principal_filter, host=f.host_filter,
        operation=enum(Operation, f.operation), permission=enum(Permission, f.permission_type))


@handles(ApiKey.DescribeAcls)
async def describe_acls(ctx: Context, request):
    R = DescribeAclsResponse
    refused = _refusal(ctx, Operation.DESCRIBE)
    acl_filter = _filter(ctx, request)
    problem = refused or ((ErrorCode.INVALID_REQUEST, acl_filter.invalid()) if acl_filter.invalid() else None)
    if problem:
        return R(throttle_time_ms=0, error_code=problem[0], error_message=problem[1], resources=[])
    by_resource: dict[tuple, list[Acl]] = {}
    for acl in ctx.broker.authorizer.bindings:
        if acl_filter.matches(acl):
            by_resource.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=resource_type, resource_name=name, pattern_type=pattern, acls=[
            R.DescribeAclsResource.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                                  permission_type=acl.permission)
            for acl in acls])
        for (resource_type, name, pattern), acls in by_resource.items()])


@handles(ApiKey.CreateAcls)
async def create_acls(ctx: Context, request):
    R = CreateAclsResponse
    refused = _refusal(ctx, Operation.ALTER)
    results, wanted = [], []
    for creation in request.creations:
        problem = refused
        acl = None
        if problem is None:
            try:
                acl = Acl(ResourceType(creation.resource_type), creation.resource_name,
                          PatternType(creation.resource_pattern_type) if ctx.version >= 1 else PatternType.LITERAL,
                          creation.principal, creation.host, Operation(creation.operation),
                          Permission(creation.permission_type))
            except ValueError as exc:
                problem = (ErrorCode.INVALID_REQUEST, str(exc))
            else:
                reason = invalid_acl(acl)
                problem = (ErrorCode.INVALID_REQUEST, reason) if reason else None
        results.append(R.AclCreationResult(error_code=problem[0] if problem else ErrorCode.NONE,
                                           error_message=problem[1] if problem else None))
        if problem is None and acl is not None:
            wanted.append(acl)
    if wanted:
        authorizer = ctx.broker.authorizer
        await authorizer.acls.add(wanted)
        await authorizer.reload()
        log.info("%s created %d ACL bindings", ctx.connection.principal or "ANONYMOUS", len(wanted))
    return R(throttle_time_ms=0, results=results)


@handles(ApiKey.DeleteAcls)
async def delete_acls(ctx: Context, request):
    R = DeleteAclsResponse
    Matching = R.DeleteAclsFilterResult.DeleteAclsMatchingAcl
    refused = _refusal(ctx, Operation.ALTER)
    filters = [_filter(ctx, f) for f in request.filters]
    if refused:
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=refused[0], error_message=refused[1], matching_acls=[])
            for _ in filters])
    valid = [f for f in filters if f.invalid() is None]
    authorizer = ctx.broker.authorizer
    removed = iter(await authorizer.acls.remove(valid)) if valid else iter(())
    await authorizer.reload()
    results = []
    for acl_filter in filters:
        reason = acl_filter.invalid()
        if reason:
            results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=reason,
                                                    matching_acls=[]))
            continue
        results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=acl.resource_type,
                     resource_name=acl.name, pattern_type=acl.pattern, principal=acl.principal, host=acl.host,
                     operation=acl.operation, permission_type=acl.permission)
            for acl in next(removed)]))
    return R(throttle_time_ms=0, filter_results=results)
