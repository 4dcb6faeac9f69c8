"""Prefect tasks: thin wrappers over `assay` that add retries, logging and artifacts.

No task here persists or caches its result (`persist_result=False`, `NO_CACHE`): results that
pass near candidate outputs must never be pickled into Prefect's result storage, and the
evidence store is the system of record anyway.
"""
