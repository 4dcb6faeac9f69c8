"""Judge calibration (SPEC §9): labelled sets (`labels`), the judge measured against them and the
ratcheting targets (`report`), and `render`."""
