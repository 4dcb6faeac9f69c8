"""OpenTelemetry: decoding OTLP traces (JSON and protobuf) into a small span model.

Pure domain code that knows nothing of Assay's other records: `assay.intake.otlp` reads traces
as agent records (what the conventions say), and `assay.monitor.spans` /
`assay.monitor.receiver` turn root spans into session signals (the `POST /v1/traces` route is
`assay.api.routes.otlp`). Results go back out as OpenTelemetry events through `assay.telemetry`,
which reads runs and so cannot live here.
"""
