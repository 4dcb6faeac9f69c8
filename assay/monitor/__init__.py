"""Live-session monitoring (SPEC §13): session health per subject from behavioural signals only.

`signals` (the record and its reader), `windows`, `figures` (rates, costs, tokens and their
changes), `thresholds`, `report` (health per subject, findings, the evidence record) and
`render`. Nothing here imports Prefect.
"""
