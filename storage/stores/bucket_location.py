"""Where the object ledger store keeps its objects, as ``--storage`` names it.

Its own module, free of the S3 client, so settings can be checked at start-up without
the optional ``s3`` extra installed.
"""
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class BucketLocation:
    """``s3://BUCKET/PREFIX?endpoint=URL&region=REGION``: where the store's objects live."""

    bucket: str
    prefix: str
    endpoint: str | None
    region: str

    @classmethod
    def parse(cls, url: str) -> "BucketLocation":
        parts = urlsplit(url)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        unknown = set(query) - {"endpoint", "region"}
        if parts.scheme != "s3" or not parts.netloc or unknown or parts.fragment:
            raise ValueError(f"{url!r}: expected s3://BUCKET/PREFIX?endpoint=URL&region=REGION"
                             + (f" (unknown parameters: {', '.join(sorted(unknown))})" if unknown else ""))
        endpoint = query.get("endpoint")
        if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
            raise ValueError(f"{url!r}: endpoint must be an http:// or https:// URL")
        return cls(parts.netloc, parts.path.strip("/"), endpoint, query.get("region", "us-east-1"))
