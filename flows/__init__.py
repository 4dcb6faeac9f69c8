"""Prefect flows: compose tasks into the pipelines users run and schedule."""
