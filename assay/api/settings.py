"""What `assay serve` configures: the store, the body limit and the run pool."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class ServeSettings(BaseModel):
    """Settings of one service instance (`assay serve` flags)."""

    store: str | None = Field(
        default=None, description="Evidence store URI (default: $ASSAY_STORE or file://.assay)."
    )
    max_body_mb: float = Field(default=32, gt=0, description="Largest request body (413).")
    max_concurrent_runs: int = Field(default=4, ge=1, description="Runs executing at once.")
    max_queued_runs: int = Field(
        default=16, ge=0, description="Runs waiting for a slot; beyond them, 429."
    )
    keepalive_seconds: float = Field(
        default=15,
        gt=0,
        description="Seconds a followed run's event stream may stay silent before it sends an "
        "SSE comment line, so that proxies and load balancers keep the connection open.",
    )
    start_prefect: bool = Field(
        default=True,
        description="Select (and, with no PREFECT_API_URL, start) the Prefect API at start-up.",
    )
    local_token: SecretStr | None = Field(
        default=None,
        description="The lasting local service's credential (`assay server start`): a caller "
        "holding it is the machine's user — an admin that may name outputs by local path.",
    )

    @property
    def max_body_bytes(self) -> int:
        """The body limit in bytes."""
        return int(self.max_body_mb * 1024 * 1024)
