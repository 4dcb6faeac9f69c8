"""The DaskCluster block: where an existing `distributed` scheduler listens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.blocks.core import Block
from pydantic import Field

if TYPE_CHECKING:
    from prefect_dask.task_runners import DaskTaskRunner


class DaskCluster(Block):
    """An existing Dask cluster that suite runs score their chunks on.

    Example:
        ```python
        from blocks import DaskCluster

        DaskCluster(address="tcp://dask-scheduler:8786").save("nightly-cluster", overwrite=True)
        ```
        then `assay run … --dask block:nightly-cluster`
        (or `ASSAY_DASK_ADDRESS=block:nightly-cluster`).
    """

    _block_type_name = "Assay Dask Cluster"
    _block_type_slug = "assay-dask-cluster"
    _description = "Address of an existing Dask scheduler that scores suite-run chunks."

    address: str = Field(description="Scheduler address, e.g. `tcp://10.0.0.5:8786`.")

    def task_runner(self) -> DaskTaskRunner:
        """A Prefect task runner that submits tasks to this cluster (needs `assay[dask]`)."""
        from prefect_dask.task_runners import DaskTaskRunner

        return DaskTaskRunner(address=self.address)
