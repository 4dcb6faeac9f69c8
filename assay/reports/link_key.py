"""The key in a report link: a browser opens `GET /runs/{id}/report?key=K` with no token.

The Prefect UI's report link is clicked in a browser, which sends no `Authorization` header, so
the link itself carries the right to read that one run's report: an HMAC of the run id under the
store's secret (`assay.hashing.store_secret`, the one the run's flow and the service that serves
its store share). It opens nothing else — no other run's report, no route of the API — and
whoever can read the Prefect UI already reads the run's summary figures there.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from assay.hashing import store_secret
from assay.store import EvidenceStore

_PURPOSE: Final = b"assay report link\n"
"""Keeps the key apart from every other HMAC under the same secret (output hashes)."""
KEY_CHARACTERS: Final = 32
"""128 bits, in hex."""


def report_link_key(store: EvidenceStore, run_id: str) -> str:
    """The key that opens `run_id`'s report from its link."""
    mac = hmac.new(store_secret(store), _PURPOSE + run_id.encode(), hashlib.sha256)
    return mac.hexdigest()[:KEY_CHARACTERS]


def opens_report(store: EvidenceStore, run_id: str, key: str) -> bool:
    """Whether `key` is `run_id`'s report link key (compared in constant time)."""
    return hmac.compare_digest(report_link_key(store, run_id), key)
