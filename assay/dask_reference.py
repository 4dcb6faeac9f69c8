"""What names a Dask cluster to score chunks on: a scheduler address or `block:NAME`.

Checked where a reference enters (`--dask`, `ASSAY_DASK_ADDRESS`), before Prefect or Dask is
imported, so a malformed one is answered at once; `flows.runners` connects to it.
"""

from __future__ import annotations

from assay.errors import InputError

BLOCK_PREFIX = "block:"
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
"""Dask's network schemes; an address without one is `tcp://`, as Dask reads it."""
_ADDRESS_FORM = "a Dask scheduler address is [SCHEME://]HOST:PORT (e.g. tcp://10.0.0.5:8786)"


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


def check_reference(address: str) -> str:
    """`address` when it can name a Dask cluster (`block:NAME` or a scheduler address); else
    an InputError, before any connection is tried (Dask itself waits out its connect timeout
    on a malformed address, and then its client's cleanup waits 20 s more). `tls://` also
    needs Dask's TLS settings: without a CA file and a client certificate it cannot connect."""
    if address.startswith(BLOCK_PREFIX):
        return address
    scheme, separator, rest = address.partition("://")
    if not separator:
        scheme, rest = "tcp", address
    host, _, port = rest.rpartition(":")
    if scheme not in SCHEMES or not host or "/" in rest or not port.isdigit():
        raise InputError(address, f"{_ADDRESS_FORM}, or block:NAME")
    if not 0 < int(port) < 65536:
        raise InputError(address, f"port {port} is not a TCP port (1-65535)")
    if scheme == "ucx" and not any(map(_installed, ("ucp", "distributed_ucxx"))):
        raise InputError(
            address,
            "ucx:// needs UCX-Py (the `ucx-py` or `distributed-ucxx` package), which is not"
            " installed here; use tcp://",
        )
    if scheme == "tls":
        import dask.config

        tls = dask.config.get("distributed.comm.tls", default={})  # without distributed loaded
        if not (tls.get("ca-file") and tls.get("client", {}).get("cert")):
            raise InputError(
                address,
                "tls:// needs Dask's TLS settings: distributed.comm.tls.ca-file and "
                "distributed.comm.tls.client.cert (and .key) in the Dask configuration, e.g. "
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
            )
    return address
