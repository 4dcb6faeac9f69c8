"""Judge admission (issue #38): whether a judge may block a merge.

A judge is *admitted* for one fingerprint — model pin, prompt version (with the rubric texts it
reads) and battery version — when it is calibrated against people, passes the bias battery
shipped with Assay (position, verbosity, self-preference) and is steered by none of the
injection canaries. `assay judge admit` measures that and appends an admission record; the gate's
`judge_not_admitted` rule reads the latest record for the run's judge. See docs/admission.md.
"""
