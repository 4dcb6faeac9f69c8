"""YAML/JSON documents (suites, contracts): reading, parsing, and finding the line of a field.

One place for how Assay reports a problem in a document a person wrote: the file, the line and
the field, found again in the text only on the error path (so valid files parse at full speed).

Hostile documents are refused before they can cost time or memory: a duplicate key is an error
naming the key and its line (never "last one wins"); YAML aliases may add at most
`MAX_ALIAS_NODES` nodes (or 10 per node written, for big suites that share scorer lists) to
what was written, which stops alias bombs ("billion laughs") before anything is expanded; JSON
nested deeper than Python can parse is refused as such.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import yaml

from assay.errors import InputError, shown

MAX_ALIAS_NODES: Final = 1_000_000
"""Nodes YAML aliases may add to a document, whatever its size."""
ALIAS_NODES_PER_NODE: Final = 10
"""Nodes aliases may add per node written, when that allows more than `MAX_ALIAS_NODES`."""

_ANCHOR: Final = re.compile(r"(?:^|[\s\[\]{},:-])&[^\s\[\]{},]")
"""Anything that could be a YAML anchor; without one, a document has no alias to expand."""
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(_BASE_LOADER):  # type: ignore[misc]
    """The safe loader (C parser when available), refusing a key written twice in one mapping.

    Merge keys (`<<: *base`) may still be overridden by the mapping's own keys, as YAML says.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[tuple[str, str], yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            seen = first.setdefault((key_node.tag, key_node.value), key_node)
            if seen is not key_node:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {shown(key_node.value)} "
                    f"(first at line {seen.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


class _DuplicateJsonKeyError(Exception):
    pass


def _unique_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _DuplicateJsonKeyError
    return document


def read_text(path: str | Path) -> str:
    """A document's text; unreadable files and non-UTF-8 bytes are input errors (with the line)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read: {exc.strerror}") from None
    return decoded_text(data, source)


def decoded_text(data: bytes, source: str) -> str:
    """`data` as UTF-8 text; non-UTF-8 bytes are an input error naming their line."""
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
    except (yaml.YAMLError, RecursionError):
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


def _check_aliases(text: str, source: str) -> None:
    """Refuse a YAML document whose aliases would expand it past the limits (module docstring).

    Counts nodes from parser events, sizing each anchored node once, so a bomb is refused after
    reading its few hundred bytes, never expanded.
    """
    if _ANCHOR.search(text) is None:
        return
    sizes: dict[str, int] = {}
    open_nodes: list[list[Any]] = []  # [anchor, nodes so far] of each open collection
    written = added = 0
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            size = sizes.get(event.anchor or "", 1)
            added += size
            limit = max(MAX_ALIAS_NODES, ALIAS_NODES_PER_NODE * written)
            if added > limit:
                mark = event.start_mark
                raise InputError(
                    source,
                    f"YAML aliases would add more than {limit:,} nodes to the document "
                    "(an alias bomb?); write the values out or share fewer",
                    line=None if mark is None else mark.line + 1,
                )
        elif isinstance(event, yaml.CollectionStartEvent):
            written += 1
            open_nodes.append([event.anchor, 1])
            continue
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_nodes.pop()
            if anchor:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            written += 1
            size = 1
            if event.anchor:
                sizes[event.anchor] = 1
        else:
            continue
        if open_nodes:
            open_nodes[-1][1] += size


def _duplicate_json_key(text: str, source: str) -> InputError:
    """The error for a JSON object with a key written twice: the key and its line."""
    try:
        yaml.load(text.replace("\t", " "), Loader=_UniqueKeyLoader)
    except yaml.constructor.ConstructorError as exc:
        if exc.problem_mark is not None:
            return InputError(source, exc.problem or "", line=exc.problem_mark.line + 1)
    except (yaml.YAMLError, RecursionError):
        pass
    return InputError(source, "an object has a duplicate key")


def parse_document(text: str, source: str) -> Any:
    """Parse YAML (or JSON, by the source's extension); malformed text names source and line.

    A duplicate key, an alias bomb or a document nested too deeply is an input error too.
    """
    if source.endswith(".json"):
        try:
            return json.loads(text, object_pairs_hook=_unique_json_object)
        except json.JSONDecodeError as exc:
            problem = "starts with a UTF-8 BOM" if text.startswith("\ufeff") else exc.msg
            raise InputError(source, f"malformed JSON: {problem}", line=exc.lineno) from None
        except _DuplicateJsonKeyError:
            raise _duplicate_json_key(text, source) from None
        except RecursionError:
            raise InputError(source, "malformed JSON: nested too deeply") from None
    try:
        _check_aliases(text, source)
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except RecursionError:
        raise InputError(source, "malformed YAML: nested too deeply") from None
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
