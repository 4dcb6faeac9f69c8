"""The release gate: its decision over a run (`decision`), JUnit output, overrides and access."""
