"""YAML/JSON documents (suites, contracts): reading, parsing, and finding the line of a field.

One place for how Assay reports a problem in a document a person wrote: the file, the line and
the field, found again in the text only on the error path (so valid files parse at full speed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from assay.errors import InputError


def read_text(path: str | Path) -> str:
    """A document's text; unreadable files and non-UTF-8 bytes are input errors (with the line)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(source, "not UTF-8 text", line=line) from None


def line_of(text: str, path: tuple[str | int, ...], source_is_json: bool = False) -> int | None:
    """1-based line of the node at `path` in a YAML/JSON document, found only on the error path."""
    if source_is_json:
        text = text.replace("\t", " ")  # JSON strings cannot hold raw tabs; YAML rejects them
    try:
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None if node is None else node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == step), None)
            if match is None:
                key = next((k for k, _ in node.value if k.value == step), None)
                return line if key is None else key.start_mark.line + 1
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if step >= len(node.value):
                return line
            node = node.value[step]
        else:
            return line
        line = node.start_mark.line + 1
    return line


def parse_document(text: str, source: str) -> Any:
    """Parse YAML (or JSON, by the source's extension); malformed text names source and line."""
    if source.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(source, f"malformed JSON: {exc.msg}", line=exc.lineno) from None
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "could not parse"
        context = getattr(exc, "context", None)
        # A scanner error (unclosed quote, key without colon) is best located where the token
        # began; the problem mark of an unclosed quote is the end of the file.
        mark = getattr(exc, "problem_mark", None)
        if isinstance(exc, yaml.scanner.ScannerError) and exc.context_mark is not None:
            mark = exc.context_mark
        if context:
            problem = f"{problem} {context}"
        line = None if mark is None else mark.line + 1
        raise InputError(source, f"malformed YAML: {problem}", line=line) from None


def field_path(loc: tuple[str | int, ...]) -> str:
    """`cases[3].scorers[0]` from a validation error's location."""
    out = ""
    for step in loc:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out
