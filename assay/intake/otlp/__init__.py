"""OTLP traces as agent records: JSON, JSON Lines or protobuf exports, read by byte range.

- `conventions`: the attributes Assay reads — the GenAI semantic conventions (older and current
  shapes), OpenInference and OpenLLMetry: output text, requested tool calls, usage.
- `tools`: what one tool span says about its call.
- `record`: one case's `AgentRecord` from its case span and the spans below it (the mapping
  contract is its docstring); `turns`: where each turn of a conversation begins in a trace.
- `book`: spans gathered by trace, and which traces are one case (one trace, or every trace of
  one conversation id); `conversations`: the conversation attributes and the joined record.
- `index`: indexing exports into slices of cases, and reading a slice back.

Decoding OTLP itself is `assay.otel.traces` (shared with live monitoring).
"""
