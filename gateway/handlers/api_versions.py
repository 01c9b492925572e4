"""ApiVersions: the table of what we implement, and the client's software name (v3+)."""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from kgate.protocol.api_versions import SUPPORTED, is_supported
from kgate.protocol.error_codes import ErrorCode

from . import Context, handles

_KEYS = [ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=low, max_version=high)
         for key, (low, high) in sorted(SUPPORTED.items())]


@handles(ApiKey.ApiVersions)
async def api_versions(ctx: Context, request):
    if request is None or not is_supported(ApiKey.ApiVersions, ctx.version):
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_KEYS)
    if ctx.version >= 3 and request.client_software_name:
        ctx.connection.client_software = (request.client_software_name, request.client_software_version)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_KEYS, throttle_time_ms=0)
