"""The `s3` scheme: an object or a key prefix of an S3-compatible bucket (AWS S3, MinIO, Ceph,
R2, rclone, moto), `s3://BUCKET[/KEY-OR-PREFIX]`.

What the rest of Assay knows of S3 is this scheme: a store there (`assay.store.s3.S3Store`),
inputs listed and read with `assay.s3.ObjectReader` (pinned to the ETag/version first read),
a client made from saved settings (an EvidenceStorage block's), and that a service may read it
for a caller. boto3 is imported only when an `s3://` location is opened or read, so commands on
local data do not pay for loading it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from assay.errors import InputError, OutputsChangedError
from assay.process_state import remembered
from assay.schemes.base import Location, Scheme, named

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from assay.s3 import ObjectPin, ObjectReader
    from assay.store.base import EvidenceStore

ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"


class S3Scheme(Scheme):
    name = "s3"
    form = "s3://BUCKET/PREFIX"
    holds_stores = True
    shared = True
    remote = True
    environment = (ENDPOINT_VARIABLE,)

    def open_store(self, location: Location, connection: Mapping[str, Any]) -> EvidenceStore:
        from assay.store.s3 import S3Store

        bucket, prefix = parse_s3_uri(location.uri)
        return S3Store(bucket, prefix, client=_client(connection))

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        bucket, prefix = parse_s3_uri(location.uri)
        keys = [k for k in object_reader().keys(bucket, prefix) if k.endswith(suffixes)]
        if not keys:
            raise InputError(location.uri, f"no {named(suffixes)} objects under this S3 prefix")
        return [f"{self.name}://{bucket}/{key}" for key in keys]

    def one_object(self, location: Location, what: str) -> str:
        return location.uri

    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        from assay.s3 import ObjectChangedError

        bucket, _, key = location.rest.partition("/")
        try:
            return object_reader().read_pinned(bucket, key, start, end, pin)
        except ObjectChangedError as exc:
            raise OutputsChangedError(location.uri, str(exc)) from None


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split `s3://bucket/some/prefix` into its bucket and key prefix.

    Returns:
        `(bucket, prefix)`; the prefix is `""` or ends with `/`, so `prefix + key` is a key.

    Raises:
        ValueError: not an `s3://` URI, no bucket, or an empty path segment (`a//b`), which
            S3-compatible servers that map keys to files refuse.
    """
    scheme, separator, rest = uri.partition("://")
    if not separator or scheme.lower() != S3Scheme.name:
        raise ValueError(f"not an S3 URI: {uri!r} (expected s3://BUCKET[/PREFIX])")
    from assay.s3 import bucket_and_prefix

    bucket, _, prefix = rest.partition("/")
    return bucket_and_prefix(bucket, prefix)


def object_reader() -> ObjectReader:
    """The reader of `s3://` inputs, one per process and S3 endpoint."""
    return _reader_at(os.environ.get(ENDPOINT_VARIABLE))


@lru_cache(maxsize=4)
def _reader_at(endpoint: str | None) -> ObjectReader:
    from assay.s3 import ObjectReader, make_client

    return ObjectReader(make_client(endpoint_url=endpoint))


remembered(__name__, "_reader_at", _reader_at.cache_clear)


def _client(connection: Mapping[str, Any]) -> S3Client:
    """The client saved settings describe. A prefect-aws `aws_credentials` block is honoured
    whole (its boto3 session carries keys, token, region and `profile_name`; its
    `aws_client_parameters` — endpoint, TLS, botocore config — are passed on) and wins over the
    `aws_access_key_id` / `aws_secret_access_key` pair; `endpoint_url` and `region_name` win
    over the block's. Nothing set: boto3's standard chain (environment, profile, role)."""
    from assay.s3 import make_client

    options: dict[str, Any] = {
        "endpoint_url": connection.get("endpoint_url"),
        "region": connection.get("region_name"),
    }
    credentials = connection.get("aws_credentials")
    if credentials is not None:
        options |= {
            "session": credentials.get_boto3_session(),
            "client_parameters": credentials.aws_client_parameters.get_params_override(),
        }
    elif connection.get("aws_access_key_id") is not None:
        secret = connection.get("aws_secret_access_key")
        options |= {
            "access_key_id": connection["aws_access_key_id"],
            "secret_access_key": secret.get_secret_value() if secret else None,
        }
    return make_client(**options)
