"""The EvidenceStorage block: where a run's evidence goes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prefect.blocks.core import Block
from prefect_aws import AwsCredentials
from pydantic import Field, SecretStr, field_validator

from assay.schemes import STORES, locate, open_store
from assay.store import EvidenceStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class EvidenceStorage(Block):
    """Where Assay keeps its append-only evidence: a local folder or an S3-compatible bucket.

    Credentials come from, in order: `aws_credentials` (a saved prefect-aws AwsCredentials
    block, honoured whole: keys, session token, region, `profile_name` and
    `aws_client_parameters`), the key pair below, or boto3's standard chain (environment,
    profile, instance role). `endpoint_url` and `region_name` here win over the block's.

    Example:
        Save S3-compatible storage once, then name it in flows (`storage_block="nightly"`):
        ```python
        from blocks import EvidenceStorage

        EvidenceStorage(
            url="s3://eval-evidence/assay",
            endpoint_url="http://minio.internal:9000",
            aws_access_key_id="assay",
            aws_secret_access_key="…",
        ).save("nightly", overwrite=True)
        ```
    """

    _block_type_name = "Assay Evidence Storage"
    _block_type_slug = "assay-evidence-storage"
    _description = "Where Assay writes suites, per-case evidence and EvalResults."

    url: str = Field(
        default="file://.assay",
        description="`file://PATH` for a local folder or `s3://BUCKET/PREFIX` for object storage.",
    )
    endpoint_url: str | None = Field(
        default=None,
        description="S3-compatible endpoint (MinIO, Ceph, R2, …); empty for AWS S3.",
    )
    region_name: str | None = Field(default=None, description="S3 region, if the server needs one.")
    aws_access_key_id: str | None = Field(default=None, description="Access key id.")
    aws_secret_access_key: SecretStr | None = Field(
        default=None, description="Secret access key (stored encrypted, masked in the UI)."
    )
    aws_credentials: AwsCredentials | None = Field(
        default=None,
        description="A saved prefect-aws AwsCredentials block; takes precedence over the keys.",
    )

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        locate(url, STORES, "an evidence store", paths=False)
        return url

    def open(self) -> EvidenceStore:
        """Open the store this block describes (an `s3://` one with this block's client)."""
        return open_store(self.url, s3_client=self._client)

    def _client(self) -> S3Client:
        from assay.s3 import make_client

        return make_client(**self._client_options())

    def _client_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"endpoint_url": self.endpoint_url, "region": self.region_name}
        creds = self.aws_credentials
        if creds is not None:
            # The block's session carries its keys, token, region and `profile_name`; its
            # `aws_client_parameters` (endpoint, TLS, botocore config) are passed on too.
            options |= {
                "session": creds.get_boto3_session(),
                "client_parameters": creds.aws_client_parameters.get_params_override(),
            }
        elif self.aws_access_key_id is not None:
            secret = self.aws_secret_access_key
            options |= {
                "access_key_id": self.aws_access_key_id,
                "secret_access_key": secret.get_secret_value() if secret else None,
            }
        return options
