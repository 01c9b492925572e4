"""ApiVersions: the table of what we implement, its features (v3+), and the client's software name (v3+).

A peer broker (known by its client id, gateway/zones.py) is also told kgate's own
inter-broker APIs, which clients never see, so its links send the versions this broker
serves (gateway/peer_links.py).
"""
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from kgate.protocol.api_versions import FEATURES, FEATURES_EPOCH, INTERNAL, SUPPORTED, is_supported
from kgate.protocol.error_codes import ErrorCode

from . import Context, handles

_KEYS = [ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=low, max_version=high)
         for key, (low, high) in sorted(SUPPORTED.items())]
_SUPPORTED_FEATURES = [ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                       for name, (low, high, _level) in FEATURES.items()]
# v3 readers (Kafka clients before 3.9) fail on a supported range starting at 0, so Kafka
# leaves such features out of v3 answers (KIP-1022); so does kgate.
_SUPPORTED_FEATURES_V3 = [feature for feature in _SUPPORTED_FEATURES if feature.min_version > 0]
_FINALIZED_FEATURES = [ApiVersionsResponse.FinalizedFeatureKey(name=name, min_version_level=level,
                                                               max_version_level=level)
                       for name, (_low, _high, level) in FEATURES.items() if level]


@handles(ApiKey.ApiVersions)
async def api_versions(ctx: Context, request):
    if request is None or not is_supported(ApiKey.ApiVersions, ctx.version):
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_KEYS)
    if ctx.version >= 3 and request.client_software_name:
        ctx.connection.client_software = (request.client_software_name, request.client_software_version)
    keys = _KEYS if ctx.connection.peer_broker is None else _KEYS + [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(INTERNAL.items())]
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0,
                               supported_features=_SUPPORTED_FEATURES if ctx.version >= 4 else _SUPPORTED_FEATURES_V3,
                               finalized_features_epoch=FEATURES_EPOCH,
                               finalized_features=_FINALIZED_FEATURES)
