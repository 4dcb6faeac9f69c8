"""S3-compatible evidence store (`s3://BUCKET/PREFIX`): AWS S3, MinIO, Ceph, R2, rclone, moto.

Write-once objects use conditional writes (`If-None-Match: *`): the server refuses to replace an
existing object, atomically. Some S3-compatible servers accept the header and ignore it, so each
store probes its server once, before its first write-once object, and on such servers guards
writes by reading first instead (which leaves a race between concurrent writers of one key; see
docs/design.md). Every call retries transient failures (see `assay.s3.retrying`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from threading import Lock
from typing import TYPE_CHECKING, TypeVar
from uuid import uuid4

from botocore.exceptions import BotoCoreError, ClientError

from assay.errors import EvidenceConflictError, NotFoundError, StoreUnavailableError
from assay.s3 import bucket_and_prefix, call_s3, error_code, http_status, make_client
from assay.store.base import EvidenceStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

PROBE_PREFIX = "_meta/probe/"
"""Where the conditional-write probe writes (and then deletes) its throwaway objects."""

_WRITE_ROUNDS = 3
"""Conditional writes refused as existing whose object then reads as absent, before giving up."""


class S3Store(EvidenceStore):
    """Evidence in one bucket, under one key prefix.

    Attributes:
        bucket: The bucket.
        prefix: Key prefix, `""` or ending with `/`; store keys are relative to it.
        client: The boto3 S3 client every call goes through.
        conditional_writes: Whether the server enforces `If-None-Match: *`; None until the
            first write-once object triggers the probe. Runs report it with their metrics.
    """

    def __init__(self, bucket: str, prefix: str = "", client: S3Client | None = None) -> None:
        if "/" in bucket:
            raise ValueError(f"invalid bucket name {bucket!r}")
        self.bucket, self.prefix = bucket_and_prefix(bucket, prefix)
        self.uri = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.client = client if client is not None else make_client()
        self.conditional_writes: bool | None = None
        self._probe_lock = Lock()

    @property
    def write_guard(self) -> str:
        """`if-none-match` (server-enforced), `read-before-write` (server ignores conditional
        writes: guarded by a read, racy between concurrent writers) or `not-probed-yet`."""
        if self.conditional_writes is None:
            return "not-probed-yet"
        return "if-none-match" if self.conditional_writes else "read-before-write"

    def _key(self, key: str) -> str:
        if not key or any(part in ("", ".", "..") for part in key.split("/")):
            raise ValueError(f"invalid evidence key {key!r}")
        return self.prefix + key

    def _call(self, operation: str, full_key: str, call: Callable[[], T]) -> T:
        """Run one S3 call under the retry policy; errors name the endpoint, bucket and key.

        A missing bucket, refused credentials or no credentials at all make the store as
        unavailable as an outage does: `StoreUnavailableError`, with the code, not a traceback.
        """
        where = f"s3://{self.bucket}/{full_key} at {self.client.meta.endpoint_url}"
        return call_s3(operation, where, call)

    def _fetch(self, full_key: str) -> bytes | None:
        """An object's bytes; None when there is no such key."""

        def call() -> bytes:
            return self.client.get_object(Bucket=self.bucket, Key=full_key)["Body"].read()

        try:
            return self._call("get_object", full_key, call)
        except ClientError as exc:
            # NoSuchBucket is a configuration error, not a missing object (see `_call`).
            if error_code(exc) == "NoSuchKey":
                return None
            raise

    def _write(self, full_key: str, data: bytes, *, if_absent: bool) -> bool:
        """Put an object, conditionally when `if_absent`; False when the server refused (412)."""

        def call() -> None:
            if if_absent:
                self.client.put_object(Bucket=self.bucket, Key=full_key, Body=data, IfNoneMatch="*")
            else:
                self.client.put_object(Bucket=self.bucket, Key=full_key, Body=data)

        try:
            self._call("put_object", full_key, call)
        except ClientError as exc:
            if if_absent and (error_code(exc) == "PreconditionFailed" or http_status(exc) == 412):
                return False
            raise
        return True

    def _enforces_conditional_writes(self) -> bool:
        """Probe the server once per store; later calls return the recorded answer."""
        with self._probe_lock:
            if self.conditional_writes is None:
                self.conditional_writes = self._probe()
            return self.conditional_writes

    def _probe(self) -> bool:
        """Write one throwaway key twice with `If-None-Match: *`: a server that enforces the
        condition refuses the second write. A server that rejects the header (501) does not."""
        probe = f"{self.prefix}{PROBE_PREFIX}{uuid4().hex}"
        try:
            self._write(probe, b"probe", if_absent=True)
            return not self._write(probe, b"probe", if_absent=True)
        except ClientError as exc:
            if error_code(exc) == "NotImplemented" or http_status(exc) == 501:
                return False
            raise
        finally:
            # Best effort, one attempt: a leftover probe object is harmless.
            with suppress(ClientError, BotoCoreError):
                self.client.delete_object(Bucket=self.bucket, Key=probe)

    def put_once(self, key: str, data: bytes) -> bool:
        """Write an immutable object; never overwrites (see `EvidenceStore.put_once`).

        With conditional writes the server itself refuses an existing key, and only then is the
        existing object read and compared. Without them the key is read first and written only
        when absent.
        """
        full_key = self._key(key)
        conditional = self._enforces_conditional_writes()
        for _ in range(_WRITE_ROUNDS):
            existing = None if conditional else self._fetch(full_key)
            if existing is None:
                if self._write(full_key, data, if_absent=conditional):
                    return True
                existing = self._fetch(full_key)
            if existing is not None:
                if existing != data:
                    raise EvidenceConflictError(
                        f"evidence object {key} exists with different content in {self.uri}"
                    )
                return False
        raise StoreUnavailableError(
            f"S3 put_object on s3://{self.bucket}/{full_key} at {self.client.meta.endpoint_url}: "
            f"the server refused the write as existing {_WRITE_ROUNDS} times, "
            "but the object reads as absent"
        )

    def put(self, key: str, data: bytes) -> None:
        self._write(self._key(key), data, if_absent=False)

    def get(self, key: str) -> bytes:
        data = self._fetch(self._key(key))
        if data is None:
            raise NotFoundError(f"no evidence object {key} in {self.uri}")
        return data

    def exists(self, key: str) -> bool:
        full_key = self._key(key)
        try:
            self._call(
                "head_object",
                full_key,
                lambda: self.client.head_object(Bucket=self.bucket, Key=full_key),
            )
        except ClientError as exc:
            if http_status(exc) == 404:
                return False
            raise
        return True

    def list(self, prefix: str) -> Iterator[str]:
        """Keys under the folder `prefix` (`runs/x` means `runs/x/`, as in the file store),
        relative to the store prefix, sorted; pages through any number of keys."""
        folder = prefix.strip("/")
        return self._listed(self.prefix + (f"{folder}/" if folder else ""))

    def list_starting(self, prefix: str) -> Iterator[str]:
        """Listed by the raw prefix: S3 returns only the keys that start with it."""
        return self._listed(self.prefix + prefix)

    def _listed(self, full_prefix: str) -> Iterator[str]:
        def call() -> list[str]:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full_prefix
            )
            return [item["Key"] for page in pages for item in page.get("Contents", [])]

        keys = self._call("list_objects_v2", full_prefix, call)
        return iter(sorted(key.removeprefix(self.prefix) for key in keys))
