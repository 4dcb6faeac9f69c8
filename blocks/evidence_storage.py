"""The EvidenceStorage block: where a run's evidence goes."""

from __future__ import annotations

from prefect.blocks.core import Block
from prefect_aws import AwsCredentials
from pydantic import Field, SecretStr, field_validator

from assay.schemes import STORES, locate, open_store
from assay.store import EvidenceStore


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
        """Open the store this block describes; its scheme makes the client from the settings
        set here (`assay.schemes.s3` reads the endpoint, region and credentials)."""
        connection = {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name != "url" and getattr(self, name) is not None
        }
        return open_store(self.url, connection=connection)
