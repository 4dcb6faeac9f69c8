"""Candidate outputs: JSON Lines (with messages in any format `assay.intake.messages` reads), OTLP
trace exports (`assay.intake.otlp`) or agent transcripts (`assay.intake.transcripts`) from a
file, a folder or an S3 prefix, streamed and validated.

Outputs never travel as data between pipeline steps. `index.index_outputs` validates the whole
input in one streaming pass and returns an `OutputsIndex` of byte ranges (`OutputSlice`s); each
scoring chunk then reads only its own slice (`slices.read_slice`). Memory stays flat whatever the
input size, and nothing that Prefect records (parameters, results) ever holds output text.

The index also *pins* what each slice must hold when its chunk reads it, later: the SHA-256 of
its bytes (hashed during the index pass, which reads every byte anyway) and, for S3, the
object's ETag and version. A slice that reads anything else raises `OutputsChangedError`.

- `reference`: where outputs are and their format (`OutputsReference`); light, imports no intake;
- `candidate`: one output (`CandidateOutput`) and parsing a line of outputs JSON Lines;
- `sources`: the objects behind a reference and the format of each;
- `slices`: the index's byte ranges and reading a chunk's slice back;
- `index`: the one validating pass that cuts the index.
"""
