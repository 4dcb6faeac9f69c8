"""Shared S3 plumbing: URIs, clients, and one retry policy for transient failures.

Used by the S3 evidence store and by anything else that reads `s3://` locations. Retries belong
to tenacity alone (botocore's own retries are off), so that every call has the same bounded,
jittered backoff and the same clear error when the server stays unreachable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from threading import Lock
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    EndpointResolutionError,
    IncompleteReadError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from pydantic import BaseModel
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    wait_random_exponential,
)
from urllib3.exceptions import ProtocolError

from assay.errors import AssayError, InputError, NotFoundError, StoreUnavailableError, shown

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

MAX_ATTEMPTS_ENV = "ASSAY_S3_MAX_ATTEMPTS"
DEADLINE_ENV = "ASSAY_S3_DEADLINE_SECONDS"
DEFAULT_MAX_ATTEMPTS = 6
DEFAULT_DEADLINE_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
_PROBLEM_CHARS = 200

UNUSABLE_CODES = {
    "NoSuchBucket": "the bucket does not exist; create it or fix the s3:// URI",
    "InvalidBucketName": "the bucket name is not valid; fix the s3:// URI",
    "AccessDenied": "the credentials may not use this bucket",
    "AllAccessDisabled": "all access to this bucket is disabled",
    "InvalidAccessKeyId": "the access key is not known to the server",
    "SignatureDoesNotMatch": "the secret key does not match the access key",
}
"""S3 error codes that mean a bucket cannot be used at all, with what to do about each."""

_TRANSIENT_CODES = frozenset(
    {
        # throttling
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        # server side
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        # a concurrent write to the same key was in flight; AWS says to retry the request
        "ConditionalRequestConflict",
    }
)
_CLIENT_LOCK = Lock()
"""boto3's default session is not thread-safe while it creates clients; its clients are."""

_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    EndpointConnectionError,
    ConnectTimeoutError,
    ConnectionClosedError,
    ReadTimeoutError,
    ResponseStreamingError,
    IncompleteReadError,
    ProtocolError,
    ConnectionError,  # the builtin: reset, aborted, refused, broken pipe
)


class ObjectPin(BaseModel):
    """Which object a read saw: its ETag and, in a versioned bucket, its version."""

    etag: str
    version_id: str | None = None


class ObjectChangedError(Exception):
    """A pinned read found another object under the key (overwritten, deleted, truncated)."""


def bucket_and_prefix(bucket: str, prefix: str) -> tuple[str, str]:
    """A bucket and key prefix checked and normalised (`assay.schemes.s3.parse_s3_uri` splits
    them from a URI).

    Returns:
        `(bucket, prefix)`; the prefix is `""` or ends with `/`, so `prefix + key` is a key.

    Raises:
        ValueError: no bucket, or an empty path segment (`a//b`), which S3-compatible servers
            that map keys to files refuse.
    """
    uri = f"s3://{bucket}/{prefix}"
    if not bucket:
        raise ValueError(f"S3 URI {uri!r} names no bucket (expected s3://BUCKET[/PREFIX])")
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"S3 URI {uri!r} has an empty, '.' or '..' path segment")
    return bucket, f"{prefix}/" if prefix else ""


def make_client(
    endpoint_url: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    *,
    session: boto3.Session | None = None,
    client_parameters: Mapping[str, Any] | None = None,
) -> S3Client:
    """An S3 client for AWS or any S3-compatible server (MinIO, Ceph, R2, rclone, moto).

    Arguments left as None fall back to boto3's standard configuration: the credential chain
    (environment, profile, instance role), `AWS_ENDPOINT_URL`/`AWS_ENDPOINT_URL_S3`, and the
    region settings. `session` (e.g. a prefect-aws `AwsCredentials.get_boto3_session()`, which
    carries its profile) creates the client instead of boto3's default session;
    `client_parameters` (`AwsClientParameters.get_params_override()`: `use_ssl`, `verify`,
    `api_version`, `endpoint_url`, `config`) are passed on, their `config` merged over ours.

    The client makes one attempt per call (tenacity owns retries, see `retrying`), times out
    instead of hanging (`attempt_timeouts`: one attempt fits in half of
    `ASSAY_S3_DEADLINE_SECONDS`, so a call gives up by the deadline even when the server
    hangs), uses path-style addressing when an endpoint is configured (custom hosts rarely
    resolve `bucket.host` names), and only checksums what the operation requires: boto3's
    default full-object checksums break ranged reads on rclone and are known to trip other
    S3-compatible servers. A malformed endpoint URL is an `InputError` naming it. Safe to call
    from several threads.
    """
    extra = dict(client_parameters or {})
    endpoint_url = endpoint_url or extra.pop("endpoint_url", None)
    custom_endpoint = (
        endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    connect_timeout, read_timeout = attempt_timeouts(
        _setting(DEADLINE_ENV, DEFAULT_DEADLINE_SECONDS)
    )
    config = Config(
        retries={"max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        s3={"addressing_style": "path" if custom_endpoint else "auto"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    if "config" in extra:
        config = config.merge(extra.pop("config"))
    try:
        with _CLIENT_LOCK:
            return (session or boto3).client(
                "s3",
                endpoint_url=endpoint_url,
                aws_access_key_id=access_key_id,
                aws_secret_access_key=secret_access_key,
                aws_session_token=session_token,
                region_name=region,
                config=config,
                **extra,
            )
    except ValueError as exc:
        if "Invalid endpoint" not in str(exc):  # botocore's words for a malformed URL
            raise
        source = "endpoint_url" if endpoint_url else "AWS_ENDPOINT_URL"
        raise InputError(
            source,
            f"{shown(custom_endpoint)} is not an S3 endpoint URL (expected http[s]://HOST[:PORT])",
        ) from exc


def attempt_timeouts(deadline: float) -> tuple[float, float]:
    """The connect and read timeouts of one attempt within a retry `deadline`.

    Together they fit in half the deadline, and `retrying` starts no attempt that could not end
    before it: a server that accepts and never answers, or fails fast and then hangs, is given
    up on by the deadline, not a read timeout (or two) after it.
    """
    return min(CONNECT_TIMEOUT_SECONDS, deadline / 6), min(READ_TIMEOUT_SECONDS, deadline / 3)


def unusable(exc: BaseException, operation: str, where: str) -> AssayError | None:
    """The one-line error for an S3 failure that no retry can fix — a missing or invalid
    bucket, refused or absent credentials, a request the client refuses to send — else None."""
    if isinstance(exc, ClientError) and error_code(exc) in UNUSABLE_CODES:
        code = error_code(exc)
        return StoreUnavailableError(
            f"S3 {operation} on {where} failed: {code} ({UNUSABLE_CODES[code]})"
        )
    if isinstance(exc, NoCredentialsError):
        return StoreUnavailableError(
            f"S3 {operation} on {where} failed: no AWS credentials found (set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
        )
    if isinstance(exc, EndpointResolutionError):  # `ftp://…`, a port past 65535
        return StoreUnavailableError(
            f"S3 {operation} on {where} failed: the endpoint is not a valid URL (expected"
            " http[s]://HOST[:PORT]; check AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3)"
        )
    if isinstance(exc, ParamValidationError):  # e.g. an invalid bucket name, checked locally
        problem = " ".join(str(exc).split())[:_PROBLEM_CHARS]
        return InputError(where, problem)
    return None


def call_s3(operation: str, where: str, action: Callable[[], T]) -> T:
    """Run one S3 call under the retry policy (`retrying`); failures no retry can fix become
    one-line errors (`unusable`); other errors propagate unchanged."""
    try:
        return retrying(operation, where)(action)
    except (
        ClientError,
        NoCredentialsError,
        ParamValidationError,
        EndpointResolutionError,
    ) as exc:
        error = unusable(exc, operation, where)
        if error is None:
            raise
        raise error from exc


def error_code(exc: BaseException) -> str:
    """The S3 error code of a `ClientError` (`NoSuchKey`, `PreconditionFailed`, …), else `""`."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a `ClientError`, else None."""
    if isinstance(exc, ClientError):
        return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same request later may succeed.

    True for throttling (429, `SlowDown`, …), server errors (5xx, `InternalError`, …), request
    timeouts, conditional-write conflicts (409 `ConditionalRequestConflict`) and network
    failures (refused or dropped connections, connect and read timeouts, truncated bodies).
    False for everything else: missing objects, failed preconditions, bad credentials or
    requests, which the same request cannot fix.
    """
    if isinstance(exc, ClientError):
        return error_code(exc) in _TRANSIENT_CODES or http_status(exc) in _TRANSIENT_STATUS
    return isinstance(exc, _TRANSIENT_TYPES)


def _setting(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive number, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be a positive number, not {raw!r}")
    return value


def retrying(
    operation: str,
    target: str,
    *,
    max_attempts: int | None = None,
    deadline_seconds: float | None = None,
) -> Retrying:
    """A tenacity retry policy for one S3 call: `retrying("get_object", where)(fn, *args)`.

    Transient failures (`is_transient`) are retried with exponential backoff and full jitter,
    bounded both by attempts and by a total deadline (no attempt starts unless it could end,
    after its wait and its timeouts, before the deadline). Other exceptions propagate at once,
    unchanged. When the bounds run out, the last error is replaced by `StoreUnavailableError`
    (chained from it) instead of tenacity's `RetryError`.

    Args:
        operation: The S3 operation, for the error message (`put_object`).
        target: Where it was going, for the error message (endpoint and bucket/key).
        max_attempts: Attempts in all; default `ASSAY_S3_MAX_ATTEMPTS`, else 6.
        deadline_seconds: Time budget from the first attempt; default
            `ASSAY_S3_DEADLINE_SECONDS`, else 30.
    """
    attempts = max_attempts or int(_setting(MAX_ATTEMPTS_ENV, DEFAULT_MAX_ATTEMPTS))
    deadline = deadline_seconds or _setting(DEADLINE_ENV, DEFAULT_DEADLINE_SECONDS)
    longest_attempt = sum(attempt_timeouts(deadline))

    def stop(state: RetryCallState) -> bool:
        ends_at = (state.seconds_since_start or 0.0) + state.upcoming_sleep + longest_attempt
        return state.attempt_number >= attempts or ends_at > deadline

    def give_up(state: RetryCallState) -> Any:
        last = state.outcome.exception() if state.outcome else None
        code = error_code(last) if last else ""
        raise StoreUnavailableError(
            f"S3 {operation} on {target} failed after {state.attempt_number} attempt(s) in "
            f"{state.seconds_since_start or 0.0:.1f}s; last error: {type(last).__name__}"
            + (f" ({code})" if code else "")
            + "; check that the endpoint is up and reachable, then retry",
            retryable=True,
        ) from last

    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop,
        wait=wait_random_exponential(multiplier=0.25, max=4),
        retry_error_callback=give_up,
    )


class ObjectReader:
    """Reads objects of any bucket by key and byte range: candidate outputs and session signals.

    These are the user's data, not evidence, so they are read through this small reader rather
    than through an evidence store: nothing here writes, and no store semantics (write-once,
    key prefixes, the conditional-write probe) apply. Every call retries like the store's.
    """

    def __init__(self, client: S3Client | None = None) -> None:
        self.client = client if client is not None else make_client()

    def _where(self, bucket: str, key: str) -> str:
        return f"s3://{bucket}/{key} at {self.client.meta.endpoint_url}"

    def keys(self, bucket: str, prefix: str) -> list[str]:
        """Every key under `prefix` (a key prefix, not a folder), sorted; pages through all."""

        def listing() -> list[str]:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            )
            return [item["Key"] for page in pages for item in page.get("Contents", [])]

        return sorted(call_s3("list_objects_v2", self._where(bucket, prefix), listing))

    def read(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes `start` (inclusive) to `end` (exclusive) of an object, like `data[start:end]`.

        One HTTP Range request, so reading a slice of a large object transfers only the slice.
        A range reaching past the end of the object returns the bytes that exist; an empty range
        returns `b""` without a request.

        Raises:
            NotFoundError: no object under `key`.
            ValueError: `start` is negative or after `end`.
        """
        if start < 0 or end < start:
            raise ValueError(f"invalid byte range [{start}, {end}) for {key}")
        if start == end:
            return b""

        def call() -> bytes:
            response = self.client.get_object(
                Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}"
            )
            return response["Body"].read()

        try:
            return call_s3("get_object", self._where(bucket, key), call)
        except ClientError as exc:
            if error_code(exc) == "InvalidRange":  # starts at or after the end of the object
                return b""
            if error_code(exc) == "NoSuchKey":
                raise NotFoundError(f"no object s3://{bucket}/{key}") from None
            raise

    def read_pinned(
        self, bucket: str, key: str, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        """Bytes [start, end) of the object `pin` names (any object, when None), and its pin
        (None only when nothing was read: an empty range, or one past the end of the object).

        A pinned read asks for the pinned version when the bucket gave one (an overwrite then
        leaves it readable), and sends `If-Match: ETAG` in any case, so the bytes come from the
        object that was pinned or not at all.

        Raises:
            ObjectChangedError: the pinned object is gone or was replaced.
            ValueError: `start` is negative or after `end`.
        """
        if start < 0 or end < start:
            raise ValueError(f"invalid byte range [{start}, {end}) for {key}")
        if start == end:
            return b"", pin
        conditions: dict[str, Any] = {}
        if pin is not None:
            conditions["IfMatch"] = pin.etag
            if pin.version_id is not None:
                conditions["VersionId"] = pin.version_id

        def call() -> tuple[bytes, ObjectPin | None]:
            response = self.client.get_object(
                Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **conditions
            )
            version = response.get("VersionId")
            found = ObjectPin(
                etag=response["ETag"], version_id=None if version in (None, "null") else version
            )
            return response["Body"].read(), found

        try:
            return retrying("get_object", self._where(bucket, key))(call)
        except ClientError as exc:
            code = error_code(exc)
            if pin is not None and code in ("PreconditionFailed", "NoSuchKey", "NoSuchVersion"):
                raise ObjectChangedError(
                    f"the S3 object is not the one indexed (ETag {pin.etag}"
                    + (f", version {pin.version_id}" if pin.version_id else "")
                    + f"): {code}"
                ) from None
            if code == "InvalidRange":  # starts at or after the end of the object
                return b"", pin
            if code == "NoSuchKey":
                raise NotFoundError(f"no object s3://{bucket}/{key}") from None
            raise
