"""Prefect Block types for Assay configuration (evidence storage, judge, budgets, notifications).

Not built yet: issue #3 adds them. Until then every setting comes from the environment
(`ASSAY_STORE`, …) with a local default, so a new user needs nothing but the repo.
"""
