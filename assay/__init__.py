"""Assay: score agent outputs against versioned golden suites and keep honest evidence.

`assay` is the domain core. It never imports Prefect (only `assay.cli` launches flows), so every
rule here can be used and tested without an orchestrator.
"""

__version__ = "0.1.0"
