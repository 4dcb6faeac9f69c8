"""Keyed one-way hashes of candidate outputs.

Per-case evidence keeps HMAC-SHA256(output) under a per-store secret instead of the text, so two
runs can tell whether an output changed without anyone being able to read or guess it back
(a plain hash of a short answer is easy to brute-force; a keyed one is not).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from assay.store import EvidenceStore

SECRET_KEY = "_meta/output-hmac-secret"
SECRET_ENV = "ASSAY_HMAC_SECRET"


def store_secret(store: EvidenceStore) -> bytes:
    """The store's HMAC secret: `ASSAY_HMAC_SECRET` if set, else created in the store on first use.

    Creation is write-once, so two first runs racing each other end up sharing one secret.
    """
    configured = os.environ.get(SECRET_ENV)
    if configured:
        return configured.encode("utf-8")
    if not store.exists(SECRET_KEY):
        store.put_once_if_absent(SECRET_KEY, secrets.token_hex(32).encode("ascii"))
    return store.get(SECRET_KEY)


class OutputHasher:
    """HMAC-SHA256 of output text under one secret."""

    __slots__ = ("_mac",)

    def __init__(self, secret: bytes) -> None:
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)

    def __call__(self, output: str) -> str:
        mac = self._mac.copy()
        mac.update(output.encode("utf-8"))
        return "hmac-sha256:" + mac.hexdigest()
