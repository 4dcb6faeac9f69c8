"""OpenTelemetry: OTLP traces as candidate outputs, and root spans as session signals.

Pure domain code: decoding OTLP (JSON and protobuf), reading the GenAI semantic conventions,
and turning traces into Assay's own records. Nothing here imports Prefect or a web framework;
the HTTP route `POST /v1/traces` is `assay.api.routes.otlp`.
"""
