"""Runs: scoring a suite against outputs, the run's evidence records, baselines and comparisons.

`records` (the EvalResult, the run aggregate, evidence chunks and their layout), `scoring`
(scorers over cases), `sampling`, `baselines`, `findings` (what a finished run gives rise to),
`comparison`, `scorecard`, `verdict` (the flow's final state words) and `render` (the
human-readable run summary).
"""
