"""Results out as OpenTelemetry: a finished run's cases as `gen_ai.evaluation.result` events and
its summary as `assay.evaluation.summary`, sent to an OTLP endpoint when `ASSAY_OTEL_EXPORT`
asks (docs/otel.md). `events` builds them from stored evidence (pure), `export` decides whether
and where and links traced cases to their spans, `sender` is the only module that imports the
OpenTelemetry SDK, and only when a run exports.

Apart from `assay.otel` (decoding traces in), because it reads runs: `assay.runs` reads traces
through `assay.intake`, which reads them through `assay.otel`.
"""
