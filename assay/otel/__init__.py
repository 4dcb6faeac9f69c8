"""OpenTelemetry: decoding OTLP traces (JSON and protobuf), the GenAI semantic conventions Assay
reads, and OTLP trace exports as candidate outputs.

Pure domain code that knows nothing of Assay's other records: `assay.outputs` adapts traces to
candidate outputs, and `assay.monitor.spans` / `assay.monitor.receiver` turn root spans into
session signals (the `POST /v1/traces` route is `assay.api.routes.otlp`).
"""
